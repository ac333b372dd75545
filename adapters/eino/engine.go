package eino

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/internal/demo"
)

// EventKind is the kind of an upstream event normalized by an [Engine].
type EventKind int

// The kinds of [Event].
const (
	// EventDelta is assistant text (agent.output.delta).
	EventDelta EventKind = iota + 1
	// EventToolStart is a tool call the model selected (agent.tool.start).
	EventToolStart
	// EventToolResult is a tool's result (agent.tool.result).
	EventToolResult
	// EventNodeCompleted is an Eino agent finishing its part of the run
	// (agent.node.completed; the node is the agent's name).
	EventNodeCompleted
)

// Event is one upstream Eino event normalized.
type Event struct {
	// Kind says which fields are set.
	Kind EventKind
	// Text is the delta of EventDelta.
	Text string
	// Tool, CallID are the tool call (EventToolStart, EventToolResult).
	Tool   string
	CallID string
	// Args are the call's arguments, JSON (EventToolStart).
	Args string
	// Output is the tool's result (EventToolResult).
	Output string
	// Error, on an EventToolResult, is why the call failed (a call of a
	// tool nobody declared); Output is then what the model is told.
	Error string
	// Node is the agent's name (EventNodeCompleted).
	Node string
}

// Pending is an approval an Eino run interrupted for.
type Pending struct {
	// CheckpointID is the run's checkpoint; InterruptID the interrupt
	// point's address, the target of the resume.
	CheckpointID string `json:"checkpoint_id"`
	InterruptID  string `json:"interrupt_id"`
	// Request is the interrupted tool call.
	Request ApprovalRequest `json:"request"`
}

// Result is what one run of an [Engine] produced.
type Result struct {
	// Text is the final assistant text.
	Text string
	// Messages are the messages the run produced, in order (assistant
	// tool calls, tool results, the final answer).
	Messages []*schema.Message
	// Pending is set when the run interrupted for an approval.
	Pending *Pending
}

// Engine is an Eino ChatModelAgent run by an Eino Runner with a
// checkpoint store: the upstream half of the adapter, usable without
// Armature's runtime. It is safe for concurrent use.
type Engine struct {
	runner *adk.Runner
	store  CheckPointStore
	closer io.Closer // the store NewEngine opened, if it must be closed
	// gated names the approval-gated tools: a call of one starts
	// (agent.tool.start, through the adapter) once approved, not when
	// the model selects it.
	gated map[string]bool
	// maxIterations is the ReAct loop's bound (Config.MaxIterations, or
	// Eino's default): the model calls a turn that reached it made,
	// across the runs its approvals resumed.
	maxIterations int
}

// einoMaxIterations is Eino's default bound of a ChatModelAgent's loop
// (adk's react state, v0.9.21).
const einoMaxIterations = 20

// NewEngine builds the agent with Eino's native constructors
// (adk.NewChatModelAgent, adk.NewRunner) and the checkpoint store cfg
// selects.
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := cfg.Model
	if m == nil {
		m = NewProviderModel(demo.Model{})
	}
	e := &Engine{store: cfg.Store, maxIterations: cfg.MaxIterations}
	if e.maxIterations == 0 {
		e.maxIterations = einoMaxIterations
	}
	if e.store == nil {
		switch cc := cfg.Checkpoint; cc.Driver {
		case CheckpointFile:
			fs, err := NewFileStore(cc.Dir)
			if err != nil {
				return nil, err
			}
			e.store = fs
		case CheckpointPostgres:
			url := cc.URL
			if url == "" {
				url = os.Getenv(cc.URLEnv) // set: Validate checked it
			}
			ps, err := NewPostgresStore(ctx, url, cc.Table)
			if err != nil {
				return nil, err
			}
			e.store, e.closer = ps, ps
		default:
			e.store = NewMemoryStore()
		}
	}
	acfg := &adk.ChatModelAgentConfig{Name: cfg.Name, Description: cfg.Description, Instruction: cfg.Instruction,
		Model: m, MaxIterations: cfg.MaxIterations}
	for _, t := range cfg.Tools {
		if t.NeedsApproval {
			if e.gated == nil {
				e.gated = make(map[string]bool)
			}
			e.gated[t.Definition.Name] = true
		}
		it, err := NewTool(t)
		if err != nil {
			return nil, errors.Join(err, e.Close())
		}
		acfg.ToolsConfig.Tools = append(acfg.ToolsConfig.Tools, it)
	}
	// A call of a tool nobody declared is answered with an error the
	// model reads, as a native agent answers it, rather than failing the
	// run (a failed turn is retryable: a client's retries would run the
	// turn's other tools again).
	acfg.ToolsConfig.UnknownToolsHandler = func(ctx context.Context, name, _ string) (string, error) {
		text := fmt.Sprintf("error: there is no tool named %q", name)
		if s, ok := ctx.Value(strayKey{}).(*strayResults); ok {
			s.add(schema.ToolMessage(text, compose.GetToolCallID(ctx), schema.WithToolName(name)))
		}
		return text, nil
	}
	ag, err := adk.NewChatModelAgent(ctx, acfg)
	if err != nil {
		return nil, errors.Join(err, e.Close())
	}
	e.runner = adk.NewRunner(ctx, adk.RunnerConfig{Agent: ag, CheckPointStore: e.store, EnableStreaming: cfg.streams()})
	return e, nil
}

// Close releases the checkpoint store NewEngine opened (the PostgreSQL
// connections), if any; a Config.Store is the caller's to close.
func (e *Engine) Close() error {
	if e.closer == nil {
		return nil
	}
	c := e.closer
	e.closer = nil
	return c.Close()
}

// Runner returns the Eino runner, to run the agent directly.
func (e *Engine) Runner() *adk.Runner { return e.runner }

// Send runs the agent on messages (the conversation so far, ending with
// the user's message) under checkpointID, which must be new: should a
// tool interrupt for an approval, Eino saves the run's checkpoint there.
// When the run fails (its context ended as it interrupted, an interrupt
// the adapter cannot map), the checkpoint it may have saved is deleted:
// no suspension names it, so nothing would resume or discard it.
func (e *Engine) Send(ctx context.Context, checkpointID string, messages []*schema.Message, emit func(Event)) (Result, error) {
	ctx = context.WithValue(ctx, strayKey{}, &strayResults{})
	res, err := e.drain(ctx, checkpointID, e.runner.Run(ctx, messages, adk.WithCheckPointID(checkpointID)), emit, nil)
	if err != nil {
		// Deleted even when ctx ended (a cancelled turn).
		err = errors.Join(err, e.Discard(context.WithoutCancel(ctx), Pending{CheckpointID: checkpointID}))
	}
	return res, err
}

// Resume resumes the interrupted run p with decision d targeted at its
// interrupt point (Runner.ResumeWithParams). The run's checkpoint is
// deleted once the resumed run ends without interrupting again, and
// when the resume fails: a paused turn whose resume failed is never
// resumed again (the runtime ends it errored; its decision may have
// taken effect). It fails with [ErrNoCheckpoint] when the store holds
// no checkpoint for p, fails to read it (joined with the store's
// error), or holds one Eino cannot load (one that does not decode:
// joined with Eino's error); the checkpoint is deleted in these two
// cases too.
func (e *Engine) Resume(ctx context.Context, p Pending, d Decision, emit func(Event)) (Result, error) {
	return e.resume(ctx, p, d, emit, nil)
}

// resume is Resume calling found, when not nil, once Eino loaded the
// run from its checkpoint and before the resumed run's events are read.
func (e *Engine) resume(ctx context.Context, p Pending, d Decision, emit func(Event), found func()) (Result, error) {
	if _, ok, err := e.store.Get(ctx, p.CheckpointID); err != nil {
		// The store failed: the resume fails, and the runtime retires
		// the paused turn, so the checkpoint, if it is there, goes too.
		return Result{}, errors.Join(&noCheckpoint{id: p.CheckpointID, approved: d.Approved}, err, e.Discard(context.WithoutCancel(ctx), p))
	} else if !ok {
		return Result{}, &noCheckpoint{id: p.CheckpointID, approved: d.Approved}
	}
	ctx = context.WithValue(ctx, strayKey{}, &strayResults{})
	// reached is set once the resume reaches its target call (tools.go):
	// from then on the decision took effect, whatever fails next.
	reached := new(atomic.Bool)
	ctx = context.WithValue(ctx, resumeReachedKey{}, reached)
	var res Result
	it, err := e.runner.ResumeWithParams(ctx, p.CheckpointID, &adk.ResumeParams{Targets: map[string]any{p.InterruptID: &d}})
	if err != nil {
		// Eino could not load the run from its checkpoint (it does not
		// decode, or it went since the Get): as for a missing one, no
		// approval sent again can resume it. (Eino fails so before the
		// run starts: its errors once running come with its events.)
		err = &noCheckpoint{id: p.CheckpointID, approved: d.Approved, cause: err}
	} else {
		if found != nil {
			found()
		}
		started := false
		res, err = e.drain(ctx, p.CheckpointID, it, emit, func() { started = true })
		if err != nil && !started && !reached.Load() && ctx.Err() == nil {
			// The run failed at its first event, before it resumed
			// anything (Eino loaded a checkpoint it cannot resume: one
			// of an agent since renamed): as for one it cannot load.
			err = &noCheckpoint{id: p.CheckpointID, approved: d.Approved, cause: err}
		}
	}
	if err != nil || res.Pending == nil {
		// Deleted even when ctx ended (a cancelled resume).
		err = errors.Join(err, e.Discard(context.WithoutCancel(ctx), p))
	}
	return res, err
}

// Discard deletes the checkpoint of interrupted run p, which will not be
// resumed (its approval was superseded or cancelled), when the store
// supports deletion (adk.CheckPointDeleter; the adapter's stores all do).
// A checkpoint already gone is no error.
func (e *Engine) Discard(ctx context.Context, p Pending) error {
	if del, ok := e.store.(adk.CheckPointDeleter); ok {
		return del.Delete(ctx, p.CheckpointID)
	}
	return nil
}

// DeleteSession deletes the checkpoints of group (the interrupted runs
// of a session, see GroupDeleter) when the store supports it.
func (e *Engine) DeleteSession(ctx context.Context, group string) error {
	if gd, ok := e.store.(GroupDeleter); ok {
		return gd.DeleteGroup(ctx, group)
	}
	return nil
}

func (e *Engine) drain(ctx context.Context, checkpointID string, it *adk.AsyncIterator[*adk.AgentEvent], emit func(Event), started func()) (Result, error) {
	var (
		res      Result
		lastNode string
	)
	stray, _ := ctx.Value(strayKey{}).(*strayResults)
	// strays adds the results of calls of undeclared tools, which Eino
	// answers (UnknownToolsHandler) without an event of their own.
	// A result is added once its call is (Eino may report the call
	// after the tool node ran).
	strays := func() {
		for _, m := range stray.take(func(id string) bool { return called(res.Messages, id) }) {
			res.Messages = append(res.Messages, m)
			emit(Event{Kind: EventToolResult, Tool: m.ToolName, CallID: m.ToolCallID, Output: m.Content,
				Error: strings.TrimPrefix(m.Content, "error: ")})
		}
	}
	for {
		ev, ok := it.Next()
		if !ok {
			break
		}
		if started != nil && ev.Err == nil {
			started() // the run resumed: its first event came
			started = nil
		}
		if lastNode != "" && ev.AgentName != lastNode {
			emit(Event{Kind: EventNodeCompleted, Node: lastNode})
		}
		lastNode = ev.AgentName
		if ev.Err != nil {
			strays()
			if errors.Is(ev.Err, adk.ErrExceedMaxIterations) && answered(res.Messages) {
				// The loop's bound: the turn ends with what ran and says
				// so, as a native agent's at its step limit.
				// The bound counts the model calls of the whole turn,
				// across the runs its approvals resumed (Eino keeps the
				// count with the interrupted run), not only this run's.
				stop := schema.AssistantMessage(StoppedText(max(e.maxIterations, steps(res.Messages))), nil)
				emit(Event{Kind: EventDelta, Text: stop.Content})
				res.Messages, res.Text = append(res.Messages, stop), stop.Content
				continue
			}
			return res, ev.Err
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil {
			if ev.Output.MessageOutput.Role == schema.Assistant {
				// The step before this model call is over: the results
				// of its undeclared calls come before the call's text,
				// which message emits as it reads it.
				strays()
			}
			msg, err := message(ev.Output.MessageOutput, emit)
			if err != nil {
				return res, err
			}
			if msg != nil {
				if msg.Role == schema.Assistant {
					strays() // the step before this call is over
				}
				if res.Messages == nil {
					res.Messages = make([]*schema.Message, 0, 4) // a tool turn: call, result, answer
				}
				res.Messages = append(res.Messages, msg)
				switch msg.Role {
				case schema.Assistant:
					reportCall(ctx, msg)
					for _, tc := range msg.ToolCalls {
						emit(Event{Kind: EventToolStart, Tool: tc.Function.Name, CallID: tc.ID, Args: tc.Function.Arguments})
					}
					if len(msg.ToolCalls) == 0 {
						res.Text = msg.Content
					}
				case schema.Tool:
					emit(Event{Kind: EventToolResult, Tool: msg.ToolName, CallID: msg.ToolCallID, Output: msg.Content,
						Error: stray.failure(msg.ToolCallID)})
				}
			}
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			p, err := pendingFrom(checkpointID, ev.Action.Interrupted)
			if err != nil {
				return res, err
			}
			res.Pending = p
		}
	}
	strays()
	if lastNode != "" {
		emit(Event{Kind: EventNodeCompleted, Node: lastNode})
	}
	return res, ctx.Err()
}

// strayResults collects, for a run, the results Eino's
// UnknownToolsHandler gave calls of undeclared tools (see drain).
type strayResults struct {
	mu   sync.Mutex
	msgs []*schema.Message
	// failed holds, by call id, why a declared tool's call failed or
	// was denied (tools.go), for its agent.tool.result's error.
	failed map[string]string
}

// fail records that the call callID failed (or was denied) with text.
func (s *strayResults) fail(callID, text string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.failed == nil {
		s.failed = map[string]string{}
	}
	s.failed[callID] = text
	s.mu.Unlock()
}

// failure returns (and forgets) why the call callID failed, "" when it
// did not.
func (s *strayResults) failure(callID string) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	text := s.failed[callID]
	delete(s.failed, callID)
	return text
}

type strayKey struct{}

func (s *strayResults) add(m *schema.Message) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
}

// take removes and returns the results collected whose call ids ok
// accepts (none for a nil s).
func (s *strayResults) take(ok func(callID string) bool) []*schema.Message {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var taken []*schema.Message
	kept := s.msgs[:0]
	for _, m := range s.msgs {
		if ok(m.ToolCallID) {
			taken = append(taken, m)
		} else {
			kept = append(kept, m)
		}
	}
	s.msgs = kept
	return taken
}

// called reports whether an assistant message among msgs calls id.
func called(msgs []*schema.Message, id string) bool {
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if tc.ID == id {
				return true
			}
		}
	}
	return false
}

// StoppedText is the answer of a turn that reached max_iterations after
// steps model calls.
func StoppedText(steps int) string {
	return fmt.Sprintf("I stopped after %d steps without finishing. Ask me to continue if you want me to keep going.", steps)
}

// steps counts the model calls among a turn's messages: the assistant's.
func steps(msgs []*schema.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == schema.Assistant {
			n++
		}
	}
	return n
}

// answered reports whether every tool call among msgs has its result.
func answered(msgs []*schema.Message) bool {
	open := map[string]bool{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			open[tc.ID] = true
		}
		if m.Role == schema.Tool {
			delete(open, m.ToolCallID)
		}
	}
	return len(open) == 0
}

// message reads one message output, streaming an assistant stream's
// chunks as deltas (a whole assistant message is one delta).
func message(mv *adk.MessageVariant, emit func(Event)) (*schema.Message, error) {
	if !mv.IsStreaming {
		if mv.Message != nil && mv.Message.Role == schema.Assistant && mv.Message.Content != "" {
			emit(Event{Kind: EventDelta, Text: mv.Message.Content})
		}
		return mv.Message, nil
	}
	if mv.MessageStream == nil {
		return nil, nil
	}
	defer mv.MessageStream.Close()
	var chunks []*schema.Message
	for {
		c, err := mv.MessageStream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if mv.Role == schema.Assistant && c.Content != "" {
			emit(Event{Kind: EventDelta, Text: c.Content})
		}
		chunks = append(chunks, c)
	}
	if len(chunks) == 0 {
		return nil, nil
	}
	return schema.ConcatMessages(chunks)
}

// pendingFrom maps an interrupt onto the approval it waits for: its one
// root cause must be an [ApprovalRequest] of an approval-gated tool.
func pendingFrom(checkpointID string, info *adk.InterruptInfo) (*Pending, error) {
	var roots []*adk.InterruptCtx
	for _, c := range info.InterruptContexts {
		if c.IsRootCause {
			roots = append(roots, c)
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("%w: no root cause", ErrInterrupt)
	}
	// Several approval-gated calls of one step each interrupt; the first
	// is asked for, and the others interrupt again when it is resumed.
	c := roots[0]
	req, ok := c.Info.(*ApprovalRequest)
	if !ok {
		return nil, fmt.Errorf("%w: %s interrupted with %T", ErrInterrupt, c.ID, c.Info)
	}
	return &Pending{CheckpointID: checkpointID, InterruptID: c.ID, Request: *req}, nil
}
