package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// Node names of the graph Compile builds around an adapter.
const (
	// NodeRun hands the turn (or its resumption) to the adapter.
	NodeRun = "run"
	// NodeAwait suspends the turn until the approval signal arrives.
	NodeAwait = "await_approval"
)

// SuspensionField is the state field holding an adapter's pending
// suspension (its tool call and resume state) while the turn is paused.
// It is stored with the paused turn and must not change.
const SuspensionField = "adapter_suspension"

// DiscardField is the state field holding the suspensions a committed
// turn found superseded or cancelled, whose upstream state the session's
// next turn discards (see Discarder). It is stored with the session and
// must not change.
const DiscardField = "adapter_discard"

// CursorField is the state field holding the Result.Cursor of the
// session's last committed turn. It is stored with the session and must
// not change.
const CursorField = "adapter_cursor"

// GraphAdapter is the optional capability of an adapter that is itself
// an Armature chat graph (the native backend): Compile uses its graph
// instead of wrapping Run. Detect it with a type assertion.
type GraphAdapter interface {
	Adapter
	// Compile builds the adapter's chat graph (see chat.Config.Graph).
	Compile(opts ...graph.CompileOption) (*graph.Graph, error)
}

// Workflow is the optional capability of an adapter whose turns execute
// a graph workflow (an upstream graph, such as an Eino compose graph or a
// LangGraph-style agent with edges): the runtime then brackets each turn
// with runtime.workflow.started and runtime.workflow.completed facts
// naming WorkflowID (server.Agent.Workflow). Detect it with a type
// assertion.
type Workflow interface {
	Adapter
	// WorkflowID names the workflow ("" = none).
	WorkflowID() string
}

// WorkflowOf returns the workflow id of a when it is a Workflow.
func WorkflowOf(a Adapter) string {
	if w, ok := a.(Workflow); ok {
		return w.WorkflowID()
	}
	return ""
}

// Compile builds the chat graph that runs a's turns for the workspace
// agent ag, with the given compile options (graph.WithSessions is
// required: chat graphs are sessioned; a durable
// graph.WithCheckpointStore lets a suspended turn resume after a restart
// or on another process). Serve it with chat.New like any chat graph:
// the runtime then owns the session's history, ids, run records, events,
// approvals and cancellation, and the adapter only the upstream
// handoff.
//
// A GraphAdapter's own graph is used as is. Otherwise the graph has two
// nodes: NodeRun calls a.Run with the session's history and the turn's
// message, appends the output's messages, and on a Suspension appends
// its messages and a pending approval message and moves to NodeAwait,
// which suspends the turn with the approval signal every surface
// understands (agent.SignalPrefix + the call id, agent.Approve /
// agent.Deny payloads); the resumed turn runs NodeRun again, which calls
// a.Run with Request.Resume. The graph's DeleteSession (a chat harness's
// Delete) drops what the graph keeps in memory of the deleted session,
// its index of the session's tool-call ids (graph.WithSessionForget).
func Compile(a Adapter, ws *Workspace, ag *Agent, opts ...graph.CompileOption) (*graph.Graph, error) {
	g, _, err := compile(a, ws, ag, opts)
	return g, err
}

// compile is Compile, also returning the runner of a graph it built
// around Run (nil for a GraphAdapter's graph).
func compile(a Adapter, ws *Workspace, ag *Agent, opts []graph.CompileOption) (*graph.Graph, *runner, error) {
	if a == nil || ag == nil {
		return nil, nil, fmt.Errorf("%w: Compile needs an adapter and its agent", ErrInvalidConfig)
	}
	if ga, ok := a.(GraphAdapter); ok {
		g, err := ga.Compile(opts...)
		return g, nil, err
	}
	if ws == nil {
		ws = &Workspace{Agents: []*Agent{ag}}
	}
	if ag.Window.MaxMessages < 0 || ag.Window.MaxTokens < 0 {
		return nil, nil, fmt.Errorf("%w: agent %s: Window bounds must not be negative", ErrInvalidConfig, ag.ID)
	}
	r := &runner{a: a, ws: ws, ag: ag, name: a.Name(), workflow: ag.ID}
	if w := WorkflowOf(a); w != "" {
		r.workflow = w
	}
	if ag.Window.MaxTokens > 0 {
		r.tokens = llm.EstimateTokens
		if e, ok := ag.Provider.(llm.TokenEstimator); ok {
			r.tokens = e.EstimateTokens
		}
		r.fixed = FixedTokens(ag.System, ag.Tools, r.tokens)
	}
	schema, err := chat.NewSchema(graph.NewDynamicField(agent.ApprovalField, graph.TypeAny), graph.NewDynamicField(SuspensionField, graph.TypeAny),
		graph.NewDynamicField(CursorField, graph.TypeAny), graph.NewDynamicField(DiscardField, graph.TypeAny))
	if err != nil {
		return nil, nil, err
	}
	// A deleted session's tool-call index goes with it (the graph's
	// DeleteSession, which every chat harness delete calls).
	opts = append(opts[:len(opts):len(opts)], graph.WithSessionForget(r.calls.Forget))
	g, err := graph.NewBuilder(schema).
		AddNode(NodeRun, r.run).
		AddConditionalEdge(NodeRun, r.route, NodeAwait, graph.End).
		AddNode(NodeAwait, r.await).
		AddEdge(NodeAwait, NodeRun).
		SetEntry(NodeRun).
		Compile(opts...)
	if err != nil {
		return nil, nil, err
	}
	return g, r, nil
}

// FixedTokens estimates the tokens a model call spends outside the
// history, as a window bounded by tokens counts them (agent.Window.Start's
// fixed): the system prompt (tokens estimates it, as a message) and the
// tool definitions.
func FixedTokens(system string, tools []agent.Tool, tokens func(*llm.Message) int) int {
	n := 0
	if system != "" {
		sys := llm.SystemText(system)
		n = tokens(&sys)
	}
	for _, t := range tools {
		d := &t.Definition
		n += llm.DefaultTokenRates().EstimateText(len(d.Name) + len(d.Description) + len(d.Parameters))
	}
	return n
}

// Wraps reports whether g is a chat graph Compile built around an
// adapter that is not a GraphAdapter. Its nodes (NodeRun, NodeAwait) are
// the runtime's scaffolding, not the upstream's: the upstream reports
// its own node completions through the Emitter, so a server records no
// agent.node.completed for them.
func Wraps(g *graph.Graph) bool {
	return g != nil && g.Schema().Has(SuspensionField) && g.Schema().Has(CursorField) && slices.Equal(g.Nodes(), []string{NodeRun, NodeAwait})
}

// runner is the adapter graph's nodes.
type runner struct {
	a  Adapter
	ws *Workspace
	ag *Agent
	// name is the adapter's name, boxed once: every agent.* event the
	// adapter emits carries it.
	name any
	// workflow is the workflowId of the adapter's node events that name
	// none: its workflow (WorkflowOf), or else the agent's id, as a
	// native agent's node events name its graph.
	workflow any
	// tokens estimates a message's tokens and fixed those of the system
	// prompt and tool definitions, for a window bounded by tokens.
	tokens func(*llm.Message) int
	fixed  int
	// calls indexes the tool call ids of the sessions' histories (see
	// uniqueIDs).
	calls callindex.Cache
}

// window returns msgs[:n], the history before the turn's input, cut to
// what the agent's window sends; the input, msgs[n] when n < len(msgs),
// counts as sent.
func (r *runner) window(msgs []llm.Message, n int) []llm.Message {
	w := r.ag.Window
	if w.IsZero() || n == 0 {
		return msgs[:n]
	}
	start, _ := w.Start(msgs[:min(n+1, len(msgs))], r.fixed, r.tokens)
	return msgs[min(start, n):n]
}

// pendingSuspension is SuspensionField's value: JSON, as stored.
type pendingSuspension struct {
	ToolCall llm.ToolCall    `json:"tool_call"`
	Risk     string          `json:"risk,omitempty"`
	State    json.RawMessage `json:"state,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
	// IDs maps the upstream's ids of the turn's tool calls that the
	// history stores under other ids (see uniqueIDs) to those: the
	// resumed turn's messages answer them under the upstream's ids.
	IDs map[string]string `json:"ids,omitempty"`
}

// suspensionOf reads SuspensionField (a stored state holds it decoded
// from JSON).
func suspensionOf(s graph.State) (*pendingSuspension, bool) {
	return decodeSuspension(rawField(s, SuspensionField))
}

// decodeSuspension decodes a pendingSuspension's JSON (nil: none).
func decodeSuspension(raw json.RawMessage) (*pendingSuspension, bool) {
	if len(raw) == 0 {
		return nil, false // no suspension: nothing to decode (or allocate)
	}
	p := new(pendingSuspension)
	if json.Unmarshal(raw, p) != nil || p.ToolCall.ID == "" {
		return nil, false
	}
	return p, true
}

// rawField returns the JSON of a field the runner stores as a JSON
// string (a stored state may hold it decoded): nil when unset.
func rawField(s graph.State, field string) json.RawMessage {
	v, _ := s.Get(field)
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return json.RawMessage(v)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		return raw
	}
}

// decision reads the approval field: (approved, comment, present).
func decision(s graph.State) (bool, string, bool) {
	v, _ := s.Get(agent.ApprovalField)
	m, ok := v.(map[string]any)
	if !ok {
		return false, "", false
	}
	approved, _ := m["approved"].(bool)
	comment, _ := m["comment"].(string)
	return approved, comment, true
}

// turn is one run of NodeRun: the request and the emitter handed to the
// adapter, in one allocation.
type turn struct {
	req Request
	em  emitter
}

func (r *runner) run(ctx context.Context, s graph.State) (graph.Update, error) {
	msgs := chat.Messages.Get(s)
	t := &turn{req: Request{Workspace: r.ws, Agent: r.ag}, em: emitter{name: r.name, workflow: r.workflow, streaming: chat.Streaming(ctx)}}
	req, em := &t.req, &t.em
	fillIdentity(ctx, req)
	req.Cursor = rawField(s, CursorField)
	if text, ok := agent.Instructions(ctx); ok {
		req.Instructions = new(text) // allocated only when set
	}
	upd := graph.Update{}
	p, pending := suspensionOf(s)
	approved, comment, decided := decision(s)
	var stale *pendingSuspension
	if decided && !pending {
		// A decision with no suspension of this graph's to take it:
		// another graph's paused turn resumed here (graphs sharing a
		// checkpoint store without names, see graph.WithName). Running
		// the upstream would apply the decision to whatever it asks next.
		return nil, ErrNoSuspension
	}
	if pending && !decided {
		// A suspension nobody resumed (a new message superseded it, or it
		// was cancelled): the chat harness closed its tool call, and this
		// is a new turn. A resume always carries a decision (the payload
		// schema requires it).
		upd[SuspensionField], pending, stale = nil, false, p
	}
	if pending {
		req.History = r.window(msgs, len(msgs))
		req.Resume = &Resume{SignalID: agent.SignalPrefix + p.ToolCall.ID, Approved: approved, Comment: comment, ToolCall: p.ToolCall, State: p.State}
		upd[agent.ApprovalField], upd[SuspensionField] = nil, nil
		// The decision takes effect with the call's result (the approved
		// call's, or the denial's answer): saved as it comes.
		em.saver = &resultSaver{ctx: ctx, inv: graph.InvocationID(ctx), r: r, req: req, open: openCalls(msgs, p.IDs)}
		if _, ok := r.a.(Discarder); ok {
			// Should the process die once the decision took effect (the
			// saver's save) and before the upstream dropped the paused
			// run's state (a Discarder's, at the resume's end), the next
			// committed turn discards it.
			raw, err := json.Marshal(append(discardsOf(s), *p))
			if err != nil {
				return nil, err
			}
			em.saver.discard = string(raw)
		}
		// The backend's tool wrappers report the calls' results too
		// (ToolReturned): an upstream whose context is cancelled while
		// the approved call runs never reports it as an event.
		ctx = context.WithValue(ctx, saverKey{}, em)
	} else {
		i := len(msgs) - 1
		for i >= 0 && msgs[i].Role != llm.RoleUser {
			i--
		}
		if i >= 0 {
			req.History, req.Input = r.window(msgs, i), msgs[i]
		} else {
			req.History = r.window(msgs, len(msgs))
		}
	}
	res, err := r.a.Run(ctx, req, em)
	if em.saver != nil {
		em.mu.Lock()
		em.saver.done = true // past Run, under the turn's end: no more saves
		em.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	switch {
	case res == nil || (res.Output == nil) == (res.Suspension == nil):
		return nil, fmt.Errorf("%w: %s returned neither or both of an output and a suspension", ErrInvalidResult, r.a.Name())
	case res.Suspension != nil && (res.Suspension.ToolCall.ID == "" || res.Suspension.ToolCall.Name == ""):
		return nil, fmt.Errorf("%w: %s suspended without a tool call id and name", ErrInvalidResult, r.a.Name())
	case res.Cursor != nil && !json.Valid(res.Cursor):
		return nil, fmt.Errorf("%w: %s returned a cursor that is not JSON", ErrInvalidResult, r.a.Name())
	}
	if res.Cursor != nil {
		upd[CursorField] = string(res.Cursor)
	}
	if d, ok := r.a.(Discarder); ok {
		// The suspensions an earlier turn superseded are discarded now:
		// that turn is committed (they are in its session write). One
		// this turn supersedes is recorded with this turn and waits for
		// the next: should this turn not be committed, the suspension
		// stays resumable with its upstream state.
		done := discardsOf(s)
		for i := range done {
			_ = d.Discard(ctx, req, &Discarded{SignalID: agent.SignalPrefix + done[i].ToolCall.ID, ToolCall: done[i].ToolCall, State: done[i].State})
		}
		switch {
		case stale != nil:
			raw, err := json.Marshal([]*pendingSuspension{stale})
			if err != nil {
				return nil, err
			}
			upd[DiscardField] = string(raw)
		case len(done) > 0:
			upd[DiscardField] = nil
		}
	}
	var ids map[string]string // the upstream's call ids stored under others
	if req.Resume != nil {
		ids = p.IDs
	}
	if res.Output != nil {
		out := *res.Output
		out.Messages, _ = r.uniqueIDs(ctx, msgs, out.Messages, ids)
		return r.completed(ctx, em, &out, req.Resume, upd)
	}
	sp := *res.Suspension
	add := sp.Messages
	if len(add) == 0 {
		add = []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{sp.ToolCall}}}
	}
	add, ids = r.uniqueIDs(ctx, msgs, add, ids)
	if id, ok := ids[sp.ToolCall.ID]; ok {
		sp.ToolCall.ID = id
	}
	prompt := sp.Prompt
	if prompt == "" {
		prompt = fmt.Sprintf("I need your approval to call %s with %s.", sp.ToolCall.Name, compactArgs(sp.ToolCall.Arguments))
	}
	add = append(slices.Clip(add), llm.AssistantText(prompt)) // add may be the adapter's: a copy
	risk := sp.Risk
	if risk == "" {
		risk = string(agent.RiskCaution)
		if t, ok := r.ag.Tool(sp.ToolCall.Name); ok && t.Risk != "" {
			risk = string(t.Risk)
		}
	}
	raw, err := json.Marshal(pendingSuspension{ToolCall: sp.ToolCall, Risk: risk, State: sp.State, Metadata: sp.Metadata, IDs: ids})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: the suspension's state is not JSON: %w", ErrInvalidResult, r.a.Name(), err)
	}
	if err := r.output(ctx, em, nil); err != nil { // the artifacts it emitted
		return nil, err
	}
	upd[chat.MessagesField] = add
	upd[SuspensionField] = string(raw)
	return upd, nil
}

// discardsOf reads DiscardField.
func discardsOf(s graph.State) []pendingSuspension {
	raw := rawField(s, DiscardField)
	if raw == nil {
		return nil
	}
	var ps []pendingSuspension
	if json.Unmarshal(raw, &ps) != nil {
		return nil
	}
	return ps
}

// completed records the output's artifacts and metadata and appends its
// messages. Metadata or an artifact that does not encode as JSON (a NaN,
// a channel) fails the turn with ErrInvalidResult: the run's output
// could not be recorded.
func (r *runner) completed(ctx context.Context, em *emitter, out *Output, resume *Resume, upd graph.Update) (graph.Update, error) {
	for _, a := range out.Artifacts {
		em.artifact(ctx, &a)
	}
	if err := r.output(ctx, em, out.Metadata); err != nil {
		return nil, err
	}
	msgs := out.Messages
	if len(msgs) == 0 {
		msgs = []llm.Message{llm.AssistantText(out.Text)}
	}
	if resume != nil && !hasResult(msgs, resume.ToolCall.ID) {
		// The suspended call stays answered in the history, as every
		// provider requires.
		text := "The user approved this call."
		if !resume.Approved {
			text = agent.DeniedResult(resume.Comment)
		}
		msgs = append([]llm.Message{llm.ToolResult(resume.ToolCall.ID, text)}, msgs...)
	}
	upd[chat.MessagesField] = msgs
	return upd, nil
}

// output hands the run's output its artifacts (those the adapter emitted
// and returned) and metadata, for a completed turn or one that suspends.
// Metadata or an artifact that does not encode as JSON (a NaN, a
// channel) fails the turn with ErrInvalidResult: the run's output could
// not be recorded.
func (r *runner) output(ctx context.Context, em *emitter, metadata map[string]any) error {
	em.mu.Lock()
	recorded := slices.Clip(em.recorded) // an adapter's late emit appends to its own copy
	em.mu.Unlock()
	if len(recorded) == 0 && len(metadata) == 0 {
		return nil
	}
	extra := make(map[string]any, 2)
	if len(recorded) > 0 {
		extra["artifacts"] = recorded
	}
	if len(metadata) > 0 {
		extra["metadata"] = metadata
	}
	if _, err := json.Marshal(extra); err != nil {
		return fmt.Errorf("%w: %s: the output's metadata or artifacts are not JSON: %w", ErrInvalidResult, r.a.Name(), err)
	}
	chat.EmitEvent(ctx, chat.Event{Output: extra})
	return nil
}

// uniqueIDs returns the messages a turn adds (add, after history) with
// tool call ids unique in the session, and the ids it changed: a model
// behind the upstream sees only a window of the history, or numbers its
// calls by what it sees, or repeats one id, and a call reusing the id of
// an earlier call would make the stored history invalid for every
// provider and fail the turn, and every later one like it. Such a call
// gets a fresh id (callindex.Unique: the model's id and the index of the
// message added), and the tool results after it answer it under that id.
// ids are the changes carried over from the suspended turn a resume
// continues; the result holds them and this turn's. The upstream keeps
// its own ids (its events and its own state).
func (r *runner) uniqueIDs(ctx context.Context, history, add []llm.Message, ids map[string]string) ([]llm.Message, map[string]string) {
	calls := false
	for i := range add {
		calls = calls || len(add[i].ToolCalls) > 0
	}
	if !calls && len(ids) == 0 {
		return add, ids
	}
	var out []llm.Message // add, copied at its first change
	set := func(i int, m llm.Message) {
		if out == nil {
			out = slices.Clone(add)
		}
		out[i] = m
	}
	rename := func(inHistory func(string) bool) {
		var seenBuf [8]string
		seen := seenBuf[:0] // the ids of the calls add makes (a few)
		used := func(id string) bool { return slices.Contains(seen, id) || inHistory(id) }
		for i := range add {
			m := add[i]
			if m.Role == llm.RoleTool {
				if id, ok := ids[m.ToolCallID]; ok {
					m.ToolCallID = id
					set(i, m)
				}
				continue
			}
			if len(m.ToolCalls) == 0 {
				continue
			}
			got := callindex.Unique(history, 0, m.ToolCalls, used)
			for j := range got {
				if orig := m.ToolCalls[j].ID; got[j].ID != orig {
					if ids == nil {
						ids = map[string]string{}
					}
					ids[orig] = got[j].ID
				} else {
					delete(ids, orig) // the id names this call now: its results are its
				}
				seen = append(seen, got[j].ID)
			}
			if &got[0] != &m.ToolCalls[0] {
				m.ToolCalls = got
				set(i, m)
			}
		}
	}
	if key := graph.SessionID(ctx); key != "" && len(history) >= indexedHistory {
		// A long history: its call ids are indexed once per session,
		// not scanned on every tool turn.
		r.calls.With(key, func(x *llm.CallIndex) {
			x.Sync(history)
			rename(x.HasCall)
		})
	} else {
		rename(func(id string) bool { return callindex.HasCall(history, id) })
	}
	if out == nil {
		return add, ids
	}
	return out, ids
}

// indexedHistory is the history length from which uniqueIDs looks call
// ids up in the session's call index rather than scanning the history.
const indexedHistory = 64

// hasResult reports whether msgs hold the result of tool call id.
func hasResult(msgs []llm.Message, id string) bool {
	for _, m := range msgs {
		if m.Role == llm.RoleTool && m.ToolCallID == id {
			return true
		}
	}
	return false
}

func (r *runner) route(_ context.Context, s graph.State) (string, error) {
	if _, ok := suspensionOf(s); ok {
		return NodeAwait, nil
	}
	return graph.End, nil
}

func (r *runner) await(ctx context.Context, s graph.State) (graph.Update, error) {
	if _, _, decided := decision(s); decided {
		return nil, nil
	}
	p, ok := suspensionOf(s)
	if !ok {
		return nil, nil
	}
	md := map[string]any{}
	for k, v := range p.Metadata {
		md[k] = v
	}
	md[agent.MetadataTool], md[agent.MetadataCallID], md[agent.MetadataRiskTier] = p.ToolCall.Name, p.ToolCall.ID, p.Risk
	md["adapter"] = r.a.Name()
	var args any
	if json.Unmarshal(p.ToolCall.Arguments, &args) == nil && args != nil {
		md[agent.MetadataArguments] = args
	}
	var opts []graph.SuspendOption
	if d, ok := r.a.(Discarder); ok {
		// Should the suspension's write fail, nothing will resume it:
		// its upstream state is discarded at once, as no later turn
		// learns of it (the session does not hold it).
		opts = append(opts, graph.OnPersistFailed(r.discardUnpersisted(ctx, s, d, p)))
	}
	return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: agent.SignalPrefix + p.ToolCall.ID, Metadata: md,
		PayloadSchema: json.RawMessage(agent.ApprovalPayloadSchema)}, opts...)
}

// discardUnpersisted returns the graph.OnPersistFailed callback of
// suspension p, which the turn of state s (its node's context: ctx)
// suspends on: it discards p with d. The engine calls it on the turn's
// goroutine, only when no paused record of the turn was stored (and not
// for a resumed turn, whose upstream state may be the resumed
// suspension's, still recorded).
func (r *runner) discardUnpersisted(ctx context.Context, s graph.State, d Discarder, p *pendingSuspension) func(context.Context) {
	// The request is built only when the write failed: a suspension
	// that is persisted (the common case) pays for the closure alone.
	return func(wctx context.Context) {
		req := &Request{Workspace: r.ws, Agent: r.ag, Cursor: rawField(s, CursorField)}
		fillIdentity(ctx, req) // the node's ids
		msgs := chat.Messages.Get(s)
		req.History = r.window(msgs, len(msgs))
		_ = d.Discard(wctx, req, &Discarded{SignalID: agent.SignalPrefix + p.ToolCall.ID, ToolCall: p.ToolCall, State: p.State})
	}
}

// emitter turns an adapter's events into the turn's stream chunks: text
// and tool progress as the native agent streams them (so every surface
// shows them), other signals and artifacts as runtime events.
type emitter struct {
	name     any // the adapter's name (a string)
	workflow any // the workflowId of node events naming none
	// streaming is chat.Streaming of the turn: when nobody streams it
	// (a plain chat.Send), an event other than an artifact is dropped
	// before it is built.
	streaming bool
	// mu guards what follows: Emit may be called from any goroutine.
	mu       sync.Mutex
	arts     int
	recorded []runtime.Artifact
	ids      map[string]struct{} // the ids of recorded, from the run's second artifact on
	// saver, on a resume, saves the results of the calls the decision
	// ran or denied as they come.
	saver *resultSaver
}

// resultSaver saves, during a resumed turn, the results of the
// history's open calls (the ones the decision let run, or denied) as the
// upstream reports them (graph.SaveSession), with the upstream's cursor
// when the adapter is a Positioner: a turn failing or cancelled after
// them (its next model call) then leaves a history saying the calls
// ran, with their results, rather than one saying they never did, an
// upstream session rolled back to where it stood after them, and a
// decision that cannot be given again. The save at the turn's end
// overwrites it.
type resultSaver struct {
	ctx context.Context // the node's: SaveSession's scope
	inv string          // its invocation's id: ToolReturned of a nested one is not its
	r   *runner
	req *Request
	// open maps the upstream's id of each open call of the history to
	// the id the history stores it under.
	open  map[string]string
	saved []llm.Message
	// discard, for a Discarder, is the DiscardField value naming the
	// resumed suspension with those already awaiting their discard.
	discard string
	// done is set once the adapter's Run returned: the turn's own save
	// takes over, and a report coming later (a tool the upstream left
	// running) saves nothing.
	done bool
}

// result saves the result of an open call (the upstream's id callID):
// the text the model reads, output, or "error: " and errText for a
// failed call that has none (Event.Output). It runs under the
// emitter's lock.
func (s *resultSaver) result(callID, output, errText string) {
	id, ok := s.open[callID]
	if !ok || s.done {
		return
	}
	delete(s.open, callID)
	text := output
	if text == "" && errText != "" {
		text = "error: " + errText
	}
	s.saved = append(s.saved, llm.ToolResult(id, text))
	// The approval is spent, as the node's own update says.
	upd := graph.Update{chat.MessagesField: slices.Clone(s.saved), agent.ApprovalField: nil, SuspensionField: nil}
	if s.discard != "" {
		upd[DiscardField] = s.discard
	}
	// The call ran: what it did is saved even when the turn was
	// cancelled meanwhile (the turn still holds its session: its node
	// has not returned).
	ctx := context.WithoutCancel(s.ctx)
	if p, ok := s.r.a.(Positioner); ok {
		if c, err := p.Position(ctx, s.req); err == nil && c != nil && json.Valid(c) {
			upd[CursorField] = string(c)
		}
	}
	// A failure (the store's) leaves the turn to go on: the save at its
	// end reports it.
	_ = graph.SaveSession(ctx, upd)
}

// saverKey is the context key of a resumed turn's emitter, for
// ToolReturned.
type saverKey struct{}

// ToolReturned reports, from a backend adapter's tool wrapper, that a
// call of a runtime tool returned: callID is the upstream's id of the
// call, output the text the model reads as its result, or, for a call
// that failed with no such text, errText (the model then reads "error: "
// and errText, as for an Event). Call it as soon as the tool returns,
// whatever the state of ctx (the context the tool was called with).
//
// On a resumed turn the runtime saves the result of a call the decision
// let run the moment it has it, whichever of this report and the
// upstream's agent.tool.result event comes first: an upstream whose
// context was cancelled while the approved call ran (ADK-Go and Eino
// stop their event streams) never reports its result, and the history
// must still say the call ran, with what it answered, rather than that
// it never did. Anywhere else it does nothing (a turn that is not a
// resume, or another invocation run from within the resumed one's tools,
// an agent used as a tool). It is safe to call from any goroutine.
func ToolReturned(ctx context.Context, callID, output, errText string) {
	e, ok := ctx.Value(saverKey{}).(*emitter)
	if !ok || graph.InvocationID(ctx) != e.saver.inv {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saver.result(callID, output, errText)
}

// openCalls returns the calls of the history's last exchange that have
// no result yet, by the upstream's id (ids maps the upstream's ids the
// history stores under others) to the history's.
func openCalls(msgs []llm.Message, ids map[string]string) map[string]string {
	open := map[string]string{}
	for _, tc := range callindex.Open(msgs) {
		open[tc.ID] = tc.ID
	}
	for up, stored := range ids {
		if _, ok := open[stored]; ok {
			delete(open, stored)
			open[up] = stored
		}
	}
	return open
}

// Positioner is the optional capability of an adapter whose upstream
// keeps a session of its own (see Result.Cursor): Position returns the
// cursor of where that session stands now, during the turn. The runtime
// asks for it when it saves a turn's progress before the turn ends (the
// result of a call an approval ran), so that the next turn rolls the
// upstream's session back to that point, not before it. Detect it with
// a type assertion.
type Positioner interface {
	Adapter
	Position(ctx context.Context, req *Request) (json.RawMessage, error)
}

func (e *emitter) Emit(ctx context.Context, ev Event) bool {
	if e.saver != nil && ev.Phase == runtime.PhaseToolResult && ev.ToolCall != nil {
		e.mu.Lock()
		e.saver.result(ev.ToolCall.ID, ev.Output, ev.Error)
		e.mu.Unlock()
	}
	if ev.Artifact != nil {
		a := *ev.Artifact
		return e.artifact(ctx, &a)
	}
	if !e.streaming {
		return false
	}
	tc := ev.ToolCall
	switch {
	case ev.Phase == runtime.PhaseOutputDelta:
		return chat.EmitText(ctx, ev.Text)
	case ev.Phase == runtime.PhaseToolStart && tc != nil:
		return chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolRunning, Arguments: tc.Arguments})
	case ev.Phase == runtime.PhaseToolResult && tc != nil:
		if ev.Error != "" {
			return chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: ev.Error})
		}
		return chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolCompleted, Result: ev.Output})
	case ev.Phase == "":
		return false
	}
	data := make(map[string]any, len(ev.Data)+3)
	for k, v := range ev.Data {
		data[k] = v
	}
	if ev.Node != "" {
		data["nodeId"] = ev.Node
	}
	if _, ok := data["workflowId"]; !ok && strings.HasPrefix(ev.Phase, "agent.node.") {
		data["workflowId"] = e.workflow
	}
	if ev.Text != "" {
		data["text"] = ev.Text
	}
	data["adapter"] = e.name
	return chat.EmitEvent(ctx, chat.Event{Phase: ev.Phase, Data: data})
}

// artifact records an artifact, numbering one without an id
// ("artifact-<n>", n the count of the run's artifacts so far, or the next
// number no artifact of the run has). An id the run already has (one it
// numbered, or the adapter's own given twice) gets a suffix ("-2", or the
// next number free): ids identify a run's artifacts.
func (e *emitter) artifact(ctx context.Context, a *runtime.Artifact) bool {
	e.mu.Lock()
	e.arts++
	if e.ids == nil && len(e.recorded) > 0 { // the run's ids, from its second artifact on
		e.ids = make(map[string]struct{}, len(e.recorded)+1)
		for i := range e.recorded {
			e.ids[e.recorded[i].ID] = struct{}{}
		}
	}
	switch _, taken := e.ids[a.ID]; {
	case a.ID == "":
		a.ID = e.freeID("artifact-", e.arts)
	case taken:
		a.ID = e.freeID(a.ID+"-", 2)
	}
	if e.ids != nil {
		e.ids[a.ID] = struct{}{}
	}
	e.recorded = append(e.recorded, *a)
	e.mu.Unlock()
	if !e.streaming || !encodes(a) {
		// One that does not encode fails the turn (runner.output).
		return false
	}
	return chat.EmitEvent(ctx, chat.Event{Type: runtime.EventArtifactCreated, Data: map[string]any{"artifact": *a}})
}

// freeID returns prefix and the first number from n on that no artifact
// of the run has as its id. It runs under e.mu.
func (e *emitter) freeID(prefix string, n int) string {
	for ; ; n++ {
		id := prefix + strconv.Itoa(n)
		if _, taken := e.ids[id]; !taken {
			return id
		}
	}
}

// encodes reports whether a encodes as JSON.
func encodes(a *runtime.Artifact) bool {
	_, err := json.Marshal(a)
	return err == nil
}

func compactArgs(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "no arguments"
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
