package adapter

import (
	"context"
	"encoding/json"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// Native is the name of Armature's own backend, the chat harness over
// the agent graph: the default of a workspace agent's backend field. It
// is a wire identifier (workspace YAML, the adapter field of agent.*
// events) and must not change.
const Native = "armature"

// Adapter hands one agent's turns to an upstream agent framework
// (stable-harness Backend Adapter Contract). It owns only that handoff:
// the runtime owns request and session ids, parent run links, metadata,
// artifact records, lifecycle state, approvals, cancellation, the
// session's history and event recording.
//
// Run is called once per turn, and again with Request.Resume set when a
// turn it suspended is resumed by a signal (an approval given on any
// surface, possibly by another process after a restart). It must honor
// ctx: a cancelled turn's ctx is cancelled with cause
// runtime.ErrCancelled. Run is called concurrently for different
// sessions, never for two turns of one session at once.
type Adapter interface {
	// Name is the adapter's name: the registry key and the adapter field
	// of the agent.* events it emits.
	Name() string
	// Run runs one turn (or resumes one) and returns its output or its
	// suspension. An error fails the turn; an errcat category on it
	// (errcat.Of) chooses the failure's bucket, as for native nodes.
	Run(ctx context.Context, req *Request, emit Emitter) (*Result, error)
}

// Request is one turn handed to an adapter.
type Request struct {
	// Workspace is the compiled workspace and Agent the selected agent
	// (its Config carries the backend-native section).
	Workspace *Workspace
	Agent     *Agent
	// RequestID is the turn's run id (the stable-harness requestId, the
	// invocation id every surface reports); SessionID the session as the
	// API names it (without the tenant); Tenant the caller's tenant.
	RequestID string
	SessionID string
	Tenant    string
	// History is the session's history before this turn, cut to the
	// agent's Window (Agent.Window: with the Input, what the window
	// sends); Input the turn's user message (the zero Message on a
	// resume).
	History []llm.Message
	Input   llm.Message
	// Resume is set when the turn resumes a suspension Run returned.
	Resume *Resume
	// Metadata holds the runtime's request metadata (correlation and
	// conversation ids, when the caller gave them); read-only.
	Metadata map[string]any
	// Cursor is the Result.Cursor of the session's last turn the
	// runtime committed (nil when there is none: a new session, or an
	// adapter that keeps no cursor), as stored.
	Cursor json.RawMessage
	// Instructions, when set, is the turn's per-request system prompt
	// (agent.WithInstructions on the turn's context: the OpenAI
	// Responses API's instructions field): the adapter gives the turn's
	// model calls it in place of the agent's instruction ("" sends
	// none), as a native agent does. It is not stored: the next turn
	// without it has the agent's instruction again, and a resume has
	// the resuming request's.
	Instructions *string
}

// Resume is the signal that resumes a suspended turn.
type Resume struct {
	// SignalID is the suspension's signal id.
	SignalID string
	// Approved and Comment are the approval decision (agent.Approve,
	// agent.Deny; every surface's approve/deny maps onto them).
	Approved bool
	Comment  string
	// ToolCall is the call the suspension waited on.
	ToolCall llm.ToolCall
	// State is the Suspension.State the adapter returned, as stored.
	State json.RawMessage
}

// Result is what a turn produced: exactly one of Output and Suspension.
type Result struct {
	Output     *Output
	Suspension *Suspension
	// Cursor, when set, is where the upstream's own session state stands
	// once this turn's work is in it (for ADK-Go, the time of its
	// session's last event): JSON the runtime stores with the turn's messages, in
	// the same session write, and hands back as Request.Cursor on the
	// session's next Run (or resume). nil keeps the stored cursor.
	//
	// An upstream that keeps a session of its own writes it before the
	// runtime writes the turn, and a turn the runtime does not commit
	// (its Run failed, it was cancelled, the runtime's write failed, or
	// the process died between the two writes) would stay in the
	// upstream's session only: its next model call would see a turn the
	// runtime's history lacks, a retried message twice. The cursor tells
	// the next Run where the committed conversation ends, so that it can
	// roll back what follows (see the ADK-Go adapter).
	Cursor json.RawMessage
}

// Text returns a Result whose output is text (the contract's "an adapter
// may return a string").
func Text(s string) *Result { return &Result{Output: &Output{Text: s}} }

// Completed returns the result of a completed turn whose output is text
// and the messages it adds to the history (Output.Messages; empty: the
// text as one assistant message), in one allocation: an adapter
// returns one per turn.
func Completed(text string, msgs []llm.Message) *Result {
	r := &struct {
		res Result
		out Output
	}{out: Output{Text: text, Messages: msgs}}
	r.res.Output = &r.out
	return &r.res
}

// Output is a completed turn's runtime output.
type Output struct {
	// Text is the assistant's answer.
	Text string
	// Messages, when set, are the messages the turn adds to the session
	// after the user's (assistant tool calls, tool results, the final
	// answer), in the upstream's order; the last assistant message's text
	// should be Text. When empty, the turn adds one assistant message
	// with Text. On a resumed turn without a result for the suspended
	// tool call among them, the runtime adds one first (the decision:
	// approved, or denied with its reason), so that the history stays
	// valid for every provider.
	Messages []llm.Message
	// Metadata is recorded with the run's output.
	Metadata map[string]any
	// Artifacts become runtime artifact records: each is recorded as a
	// runtime.artifact.created event and on the run's output.
	Artifacts []runtime.Artifact
}

// Suspension is a turn paused for an approval of one tool call (the
// upstream's human-in-the-loop request mapped onto Armature's suspended
// outcome). The runtime stores it durably with the session, shows it on
// every surface (REST signal, OpenHarness request_approval, Responses
// mcp_approval_request, the web page and terminal client) and calls Run
// again with Request.Resume once a decision arrives.
type Suspension struct {
	// ToolCall is the call awaiting approval; its ID must be set (the
	// signal id is agent.SignalPrefix + ID).
	ToolCall llm.ToolCall
	// Risk is the tool's declared risk tier (agent.Risk); default
	// caution.
	Risk string
	// Messages are stored in the session before the suspension (the
	// assistant message carrying ToolCall, results of earlier calls);
	// when empty, one assistant message carrying ToolCall is stored.
	Messages []llm.Message
	// Prompt is the pending message shown to the user; default "I need
	// your approval to call <tool> with <arguments>."
	Prompt string
	// State is the adapter's opaque resume state (the upstream's
	// checkpoint or interrupt id): JSON, stored durably with the paused
	// turn and handed back in Resume.State, in this or another process.
	State json.RawMessage
	// Metadata joins the suspension's signal metadata.
	Metadata map[string]any
}

// Discarder is the optional capability of an adapter that keeps
// upstream state for a suspension outside the runtime's stores (an Eino
// checkpoint, an interrupt record): the runtime calls Discard for a
// suspension that will never be resumed, so that the adapter can delete
// that state. Detect it with a type assertion.
//
// A suspension is discarded when a new message supersedes it, or after
// it was cancelled (chat.Harness.CancelSuspended, the runs API's cancel):
// the runtime learns of it at the session's next turn, and records it
// with that turn; once that turn is committed, the session's following
// turn calls Discard, after the adapter's Run for it has returned a
// valid result. A suspension is thus discarded only once the turn that
// superseded it is in the session: should that turn fail, or its
// session write fail, the suspension stays resumable with its state in
// place. A suspension in a session that gets no further turns is not
// discarded (deleting the session deletes the upstream's state with it:
// SessionDeleter).
//
// A suspension is also discarded when the runtime fails to record it:
// the suspending turn fails (suspension_persistence_failed, or cancelled)
// because the write of its session and paused turn failed, and no paused
// turn was stored to resume it (graph.OnPersistFailed). The turn calls
// Discard before it ends, req being the suspending turn's (its ids and
// history). A suspension whose write may have been committed all the
// same is not discarded then (a store writing the session and the paused
// turn in one transaction, as the SQLite and Postgres stores do, failed
// otherwise than with a write conflict; or the paused turn's own save
// failed), nor is a resumed turn's new suspension, whose upstream state
// may be the resumed one's: the suspension it resumed stays recorded.
//
// Discard is best-effort: its error is ignored (the turn goes on) and it
// must tolerate state already gone (it may be called again for the same
// suspension when the turn that called it is not committed, or when a
// session write reported failed had stored the suspension). It is called
// on the turn's goroutine, never concurrently with a Run of the same
// session.
type Discarder interface {
	Adapter
	// Discard releases the upstream state of the discarded suspension d;
	// req is the turn that found it discarded (its ids and history), or,
	// for a cancelled suspension released with the cancel (OnCancel),
	// only the tenant and session id. It may be called again for a
	// suspension it discarded (a cancelled one is discarded at the
	// cancel and again by the session's next turns): it must succeed
	// then.
	Discard(ctx context.Context, req *Request, d *Discarded) error
}

// SessionDeleter is an Adapter whose upstream keeps state of each
// session of its own (ADK-Go's session service): when the runtime
// deletes a session, it deletes the upstream's too, so that a session
// created again under the same id starts with nothing of the deleted
// one. The runtime calls DeleteSession after its own records of the
// session are gone, under the session's lock (no turn of the session
// runs meanwhile, nor starts before it returns); deleting a session the
// upstream does not hold must succeed. An error fails the delete, which
// the caller may retry.
type SessionDeleter interface {
	Adapter
	// DeleteSession deletes the upstream's state of the tenant's
	// session (the ids as Request carries them).
	DeleteSession(ctx context.Context, tenant, sessionID string) error
}

// OnDelete is the hook a chat harness over a's chat graph calls when it
// deletes a session (chat.Config.OnDelete): the upstream's delete when a
// is a SessionDeleter, nil otherwise. The harness's session key is split
// as the runtime forms it ("tenant/session", or a session id alone).
func OnDelete(a Adapter) func(ctx context.Context, key string) error {
	d, ok := a.(SessionDeleter)
	if !ok {
		return nil
	}
	return func(ctx context.Context, key string) error {
		tenant, id := splitKey(key)
		return d.DeleteSession(ctx, tenant, id)
	}
}

// Discarded is a suspension the runtime discards (see Discarder): what
// the adapter's Suspension said, as stored.
type Discarded struct {
	// SignalID is the suspension's signal id; ToolCall the call that
	// awaited approval.
	SignalID string
	ToolCall llm.ToolCall
	// State is the Suspension.State the adapter returned, as stored.
	State json.RawMessage
}

// Emitter receives an adapter's upstream events, normalized: the
// runtime records each as a runtime.adapter.event carrying the adapter
// field, streams text and tool progress to the surfaces, and records
// artifacts. Emit is safe to call from any goroutine while Run runs; it
// reports whether the event was taken (false once the turn is over or
// nobody streams it: nothing to do about it).
type Emitter interface {
	Emit(ctx context.Context, e Event) bool
}

// EmitterFunc adapts a function to Emitter.
type EmitterFunc func(ctx context.Context, e Event) bool

// Emit calls f.
func (f EmitterFunc) Emit(ctx context.Context, e Event) bool { return f(ctx, e) }

// Event is one normalized upstream signal: an agent.* phase of the
// runtime event model (runtime.Phase*), or an artifact.
type Event struct {
	// Phase is the signal: runtime.PhaseOutputDelta (Text),
	// runtime.PhaseToolStart (ToolCall), runtime.PhaseToolResult
	// (ToolCall, Output or Error), runtime.PhaseNodeCompleted (Node), or
	// another agent.* phase (Data).
	Phase string
	// Text is an output delta.
	Text string
	// ToolCall identifies the tool call of a tool phase (ID, Name,
	// Arguments).
	ToolCall *llm.ToolCall
	// Output and Error are a tool result's output or error.
	Output string
	Error  string
	// Node is the completed node (workflow step) of a node phase.
	Node string
	// Artifact, when set, is recorded as a runtime.artifact.created
	// event (Phase is then ignored).
	Artifact *runtime.Artifact
	// Data holds further fields of the agent.* payload.
	Data map[string]any
}
