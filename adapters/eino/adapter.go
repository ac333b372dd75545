package eino

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// Name is the adapter's name: the backend: value of a workspace agent,
// the key of its backend-native section, and the adapter field of its
// events. It must not change.
const Name = "eino"

// Register registers [Factory] under [Name].
func Register(r *adapter.Registry) error { return r.Register(Name, Factory) }

// Factory builds the adapter of a workspace agent with backend: eino: it
// decodes the agent's eino: section into a [Config], takes the tools,
// approvals and system prompt (as the default instruction) from the
// workspace agent, bridges the workspace's model unless the section
// selects the scripted one, resolves a relative checkpoint directory
// against the workspace directory, and builds the [Engine].
func Factory(ctx context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
	var cfg Config
	if err := req.Agent.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Tools = req.Agent.Tools
	if cfg.Instruction == "" {
		cfg.Instruction = req.Agent.System
	}
	switch {
	case cfg.Provider == ProviderWorkspace && req.Agent.Provider == nil:
		return nil, fmt.Errorf("%w: provider %q but the workspace agent declares no model", ErrInvalidConfig, ProviderWorkspace)
	case cfg.Provider != ProviderScripted && req.Agent.Provider != nil:
		cfg.Model = NewProviderModelConfig(req.Agent.Provider, req.Agent.Sampling)
	}
	if d := cfg.Checkpoint.Dir; d != "" && !filepath.IsAbs(d) && req.Workspace != nil && req.Workspace.Dir != "" {
		cfg.Checkpoint.Dir = filepath.Join(req.Workspace.Dir, d)
	}
	if cfg.Checkpoint.Driver == "" {
		// No store named: keep the checkpoints where the runtime keeps
		// its data, so that an approval survives a restart (and reaches
		// every replica) as the runtime's paused turn does.
		switch {
		case req.Database != "":
			cfg.Checkpoint = CheckpointConfig{Driver: CheckpointPostgres, URL: req.Database}
		case req.DataDir != "":
			// One directory for every Eino agent, as one table on the
			// database: a session is one conversation across agents, and
			// the agent whose turn supersedes an approval discards its
			// checkpoint (checkpoint ids are unique across agents).
			dir := filepath.Join(req.DataDir, "eino-checkpoints")
			moveLegacyCheckpoints(filepath.Join(dir, req.Agent.ID), dir)
			cfg.Checkpoint = CheckpointConfig{Driver: CheckpointFile, Dir: dir}
		}
	}
	e, err := NewEngine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	workflow := cfg.withDefaults().Name
	if cfg.Workflow != nil {
		workflow = *cfg.Workflow
	}
	return &Adapter{Engine: e, Workflow: workflow}, nil
}

// moveLegacyCheckpoints moves the checkpoints an earlier build kept in
// an agent's own directory (legacy) into dir, so that the approvals
// they wait for can still be given.
func moveLegacyCheckpoints(legacy, dir string) {
	entries, err := os.ReadDir(legacy)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".ckpt") {
			_ = os.Rename(filepath.Join(legacy, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(legacy) // once empty
}

// Adapter is the Eino backend adapter: an [Engine] behind Armature's
// adapter contract. Eino keeps no conversation of its own (its caller
// passes the messages), so a turn runs the agent on the Armature
// session's history and the user's message; an interrupt of an
// approval-gated tool becomes a Suspension whose resume state is the
// run's checkpoint id and interrupt address, and its resume is Eino's
// Runner.ResumeWithParams from the checkpoint store.
type Adapter struct {
	// Engine is the upstream half.
	Engine *Engine
	// Workflow names the agent's Eino graph in run records (the
	// runtime.workflow.* facts and the workflowId of agent.node.completed):
	// Factory sets Config.Workflow, by default the ChatModelAgent's name,
	// since Eino runs every turn as a compose graph. Empty means none.
	Workflow string
}

var (
	_ adapter.Adapter        = (*Adapter)(nil)
	_ adapter.Workflow       = (*Adapter)(nil)
	_ adapter.Discarder      = (*Adapter)(nil)
	_ adapter.SessionDeleter = (*Adapter)(nil)
)

// Name implements adapter.Adapter.
func (a *Adapter) Name() string { return Name }

// Close releases the engine's checkpoint database, if any.
func (a *Adapter) Close() error { return a.Engine.Close() }

// WorkflowID implements adapter.Workflow.
func (a *Adapter) WorkflowID() string { return a.Workflow }

// Run implements adapter.Adapter.
func (a *Adapter) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	fwd := func(e Event) {
		if e.Kind == EventToolStart && a.Engine.gated[e.Tool] {
			// The model selected an approval-gated call: it starts once
			// approved (found, below), as a native agent's does, so
			// that a suspended run shows no start of a call that never
			// ran.
			return
		}
		forward(ctx, emit, e, a.Workflow)
	}
	// The turn's per-request instructions, for its model calls (see
	// instructions).
	if req.Instructions != nil {
		ctx = adapter.WithInstructions(ctx, req.Instructions)
	}
	var (
		res Result
		err error
	)
	if r := req.Resume; r != nil {
		var p Pending
		if err := json.Unmarshal(r.State, &p); err != nil || p.CheckpointID == "" {
			return nil, fmt.Errorf("%w: the resume state of %s is not an Eino checkpoint", ErrNoCheckpoint, r.SignalID)
		}
		var found func()
		if r.Approved {
			// Eino runs the approved call without a new event of it: the
			// call starts once its run is found to resume, as a native
			// agent's approved call does (a denied one only answers; one
			// whose checkpoint is lost never starts).
			found = func() {
				forward(ctx, emit, Event{Kind: EventToolStart, Tool: p.Request.Tool, CallID: p.Request.CallID, Args: p.Request.Arguments}, a.Workflow)
			}
		}
		res, err = a.Engine.resume(ctx, p, Decision{Approved: r.Approved, Comment: r.Comment}, fwd, found)
		if errors.Is(err, ErrNoCheckpoint) && p.Request.CallID != "" {
			// The run cannot be resumed, and the runtime retires its
			// paused turn: the decision is spent, the call never runs.
			// Its result says so (the runtime saves it with the session),
			// rather than the runtime's closing text for a call whose
			// approval was cancelled.
			forward(ctx, emit, notRun(p.Request, r), a.Workflow)
		}
	} else {
		// Eino hands the messages to its model as they are: the
		// history's asides (the runtime's approval requests, which stand
		// between a call and its result) are left out, as every wire
		// mapping leaves them out (llm.AsideFilter), or a model that
		// checks the tool-call grouping (OpenAI's API) refuses every
		// later turn of the session.
		msgs := make([]*schema.Message, 0, len(req.History)+1)
		var asides llm.AsideFilter
		for i := range req.History {
			m := &req.History[i]
			if m.Role != llm.RoleSystem && !asides.Aside(m) {
				msgs = append(msgs, fromLLM(*m))
			}
		}
		msgs = append(msgs, fromLLM(req.Input))
		res, err = a.Engine.Send(ctx, checkpointID(req), msgs, fwd)
	}
	if err != nil {
		return nil, err
	}
	out, err := result(res)
	if err != nil && res.Pending != nil {
		// The turn fails after Eino saved the interrupted run's
		// checkpoint: no suspension names it, so nothing would resume or
		// discard it (deleted even when ctx ended).
		err = errors.Join(err, a.Engine.Discard(context.WithoutCancel(ctx), *res.Pending))
	}
	return out, err
}

// result is the adapter's result of an Eino run: its answer, or the
// suspension of the approval it interrupted for.
func result(res Result) (*adapter.Result, error) {
	// answered: the last message is an assistant's without tool calls
	// (toLLM makes every role but user and tool an assistant's).
	n := len(res.Messages)
	answered := n > 0 && res.Messages[n-1].Role != schema.User && res.Messages[n-1].Role != schema.Tool && len(res.Messages[n-1].ToolCalls) == 0
	extra := 0
	if !answered && res.Pending == nil {
		extra = 1 // the answer, appended below
	}
	out := make([]llm.Message, n, n+extra)
	for i, m := range res.Messages {
		var err error
		if out[i], err = toLLM(m); err != nil {
			return nil, err
		}
	}
	if p := res.Pending; p != nil {
		if p.Request.CallID == "" || p.Request.Tool == "" {
			// A model of the embedder's own (the bridge refuses such an
			// answer before Eino runs it) called an approval-gated tool
			// under no id: no approval could name the call.
			return nil, fmt.Errorf("%w: the call of %q waiting for its approval has no id", ErrInvalidToolCall, p.Request.Tool)
		}
		state, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var args json.RawMessage
		if json.Valid([]byte(p.Request.Arguments)) {
			args = json.RawMessage(p.Request.Arguments)
		}
		return &adapter.Result{Suspension: &adapter.Suspension{
			ToolCall: llm.ToolCall{ID: p.Request.CallID, Name: p.Request.Tool, Arguments: args},
			Messages: out,
			State:    state,
			Metadata: map[string]any{"eino_checkpoint_id": p.CheckpointID},
		}}, nil
	}
	if res.Text == "" {
		// The model's last step said nothing (a safety filter's withheld
		// answer): the turn fails as a native or an ADK-Go agent's does,
		// rather than in the history validator's words.
		return nil, errcat.Wrap(errcat.ProviderInvalidResponse, "the model returned an empty reply", agent.ErrEmptyReply)
	}
	if !answered {
		out = append(out, llm.AssistantText(res.Text))
	}
	return adapter.Completed(res.Text, out), nil
}

// NotRunText is the error of the result of an approved call whose
// interrupted run cannot be resumed ([ErrNoCheckpoint]): the approval is
// spent, and the call never ran.
const NotRunText = "not run: the approval could not be applied, as the interrupted run's checkpoint is missing or unreadable"

// notRun is the result of call req, which decision r could not resume:
// a denied call is answered as the tool answers a denial, an approved
// one with NotRunText.
func notRun(req ApprovalRequest, r *adapter.Resume) Event {
	ev := Event{Kind: EventToolResult, Tool: req.Tool, CallID: req.CallID}
	if !r.Approved {
		ev.Output = agent.DeniedResult(r.Comment)
		return ev
	}
	ev.Output, ev.Error = "error: "+NotRunText, NotRunText
	return ev
}

// Discard implements adapter.Discarder: it deletes the checkpoint of a
// suspension the runtime discards (superseded by a new message, or
// cancelled), which no resume will read.
func (a *Adapter) Discard(ctx context.Context, _ *adapter.Request, d *adapter.Discarded) error {
	var p Pending
	if err := json.Unmarshal(d.State, &p); err != nil || p.CheckpointID == "" {
		return fmt.Errorf("%w: the state of %s is not an Eino checkpoint", ErrNoCheckpoint, d.SignalID)
	}
	return a.Engine.Discard(ctx, p)
}

// DeleteSession implements adapter.SessionDeleter: the runtime deleted
// the session, so the checkpoints of its interrupted runs (approvals it
// can no longer resume) are deleted from the checkpoint store.
func (a *Adapter) DeleteSession(ctx context.Context, tenant, sessionID string) error {
	return a.Engine.DeleteSession(ctx, tenant+"/"+sessionID)
}

// checkpointID names the turn's Eino checkpoint: the session and the
// runtime's run id, or a random id when the runtime gave none.
func checkpointID(req *adapter.Request) string {
	id := req.RequestID
	if id == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	return req.Tenant + "/" + req.SessionID + "/" + id
}

func forward(ctx context.Context, emit adapter.Emitter, e Event, workflow string) {
	switch e.Kind {
	case EventDelta:
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: e.Text})
	case EventToolStart:
		tc := llm.ToolCall{ID: e.CallID, Name: e.Tool}
		if json.Valid([]byte(e.Args)) {
			tc.Arguments = json.RawMessage(e.Args)
		}
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &tc})
	case EventToolResult:
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &llm.ToolCall{ID: e.CallID, Name: e.Tool}, Output: e.Output, Error: e.Error})
	case EventNodeCompleted:
		ev := adapter.Event{Phase: runtime.PhaseNodeCompleted, Node: e.Node}
		if workflow != "" {
			ev.Data = map[string]any{"workflowId": workflow}
		}
		emit.Emit(ctx, ev)
	}
}
