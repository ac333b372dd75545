package runtime

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Top-level runtime event types (PROTOCOLS §3, stable-harness runtime
// event model §2). They are wire identifiers: they are stored in run
// records and sent to clients, and must not change.
const (
	// EventRequestStarted: a turn was accepted (validated, session lock
	// held). A resumed turn's started event carries parentRequestId.
	EventRequestStarted = "runtime.request.started"
	// EventAdapterEvent: the envelope of a backend/agent signal; its data
	// is {"event": {"phase": <Phase...>, ...}}.
	EventAdapterEvent = "runtime.adapter.event"
	// EventRequestCompleted: the turn completed; data {"output": ...}.
	EventRequestCompleted = "runtime.request.completed"
	// EventRequestFailed: the turn errored; data {"error": RunError}.
	EventRequestFailed = "runtime.request.failed"
	// EventRequestCancelled: the turn was cancelled; data {"reason": ...,
	// "cause": ...} (see CancelCause).
	EventRequestCancelled = "runtime.request.cancelled"
	// EventRequestSuspended: the turn suspended (Armature extension);
	// data {"invocationId": ..., "signal": ...}.
	EventRequestSuspended = "runtime.request.suspended"
	// EventApprovalRequested: a suspended turn awaits an approval
	// (Armature extension); data {"approval": ...}.
	EventApprovalRequested = "runtime.approval.requested"
	// EventApprovalResolved: a resumed turn's approval decision
	// (Armature extension); data {"approval": ..., "decision": ...}.
	EventApprovalResolved = "runtime.approval.resolved"
	// EventArtifactCreated: a turn produced an artifact; data
	// {"artifact": Artifact}. The run's output lists its artifacts too.
	EventArtifactCreated = "runtime.artifact.created"
	// EventWorkflowStarted and EventWorkflowCompleted bracket a graph
	// workflow's execution; data {"workflowId", "adapter"}.
	EventWorkflowStarted   = "runtime.workflow.started"
	EventWorkflowCompleted = "runtime.workflow.completed"
	// EventToolDirectStarted and EventToolDirectCompleted bracket a
	// direct tool request (an operator invoking a declared tool without
	// the model); data {"toolId", "args"} and {"toolId", "output"} (or
	// "error"). Model-selected calls are agent.tool.* payloads instead.
	EventToolDirectStarted   = "runtime.tool.direct.started"
	EventToolDirectCompleted = "runtime.tool.direct.completed"
	// EventProgressNarration: human-readable progress derived from the
	// turn's facts and signals, when narration is enabled; data
	// {"message", "provider", "sourceEventTypes", "style"?}. Narration
	// only reads events; it never changes the turn.
	EventProgressNarration = "runtime.progress.narration"
)

// Artifact is a stable runtime artifact record: what an adapter (or a
// node) produced besides its text, e.g. a file or a report. Its JSON
// form is a wire format and must not change.
type Artifact struct {
	// ID identifies the artifact within its run (the runtime assigns
	// "artifact-<n>" when empty, and gives an id the run already has a
	// suffix, "-2" or the next number free).
	ID string `json:"id"`
	// Name is a display name; MediaType its MIME type.
	Name      string `json:"name,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	// URI references the content (the runtime never stores large binary
	// content inline); Text holds small textual content instead.
	URI  string `json:"uri,omitempty"`
	Text string `json:"text,omitempty"`
	// Size is the content's size in bytes, when known.
	Size int64 `json:"size,omitempty"`
	// Metadata is free-form, JSON-serializable.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// NativeAdapter is the adapter field of the agent.* events of turns run
// by Armature's own backend. It is a wire identifier and must not change.
const NativeAdapter = "armature"

// Adapter payload phases: the value of data.event.phase of a
// [EventAdapterEvent]. They are wire identifiers and must not change.
const (
	// PhaseHandoff: the agent took over (adapter, modelRef, tools).
	PhaseHandoff = "agent.handoff"
	// PhaseOutputDelta: an assistant token chunk (text).
	PhaseOutputDelta = "agent.output.delta"
	// PhaseToolStart: a model-selected tool call started (toolId, args).
	PhaseToolStart = "agent.tool.start"
	// PhaseToolResult: a model-selected tool call ended (toolId, output,
	// error).
	PhaseToolResult = "agent.tool.result"
	// PhaseNodeCompleted: a graph node completed (workflowId, nodeId).
	PhaseNodeCompleted = "agent.node.completed"
	// PhasePromptResolved: a node rendered a managed prompt (Armature
	// extension; prompt: name, version, label, templateHash,
	// renderedHash): which prompt version the turn used.
	PhasePromptResolved = "agent.prompt.resolved"
)

// Event is one stored runtime event of a run. Its JSON form is the wire
// form of the stable-harness event model (camelCase names).
type Event struct {
	// ID is assigned by the Store on Append. IDs increase across the
	// whole store in commit order: an event stored after another has a
	// larger ID. It is the SSE id used for Last-Event-ID replay.
	ID int64 `json:"id"`
	// Seq is the event's position within its run, from 1, without gaps;
	// assigned by the Store on Append.
	Seq int64 `json:"seq"`
	// Type is one of the Event* constants (or another namespaced type).
	Type string `json:"type"`
	// RunID is the run's id, the stable-harness requestId. The Store
	// sets it, and the identity fields below, from the run on Append.
	RunID string `json:"requestId"`
	// ParentRequestID is the run's ParentID: on a resumed turn, the
	// suspended run it continues.
	ParentRequestID string `json:"parentRequestId,omitempty"`
	SessionID       string `json:"sessionId"`
	AgentID         string `json:"agentId"`
	Tenant          string `json:"tenant,omitempty"`
	// Time is when the event happened; the Store sets a zero Time to its
	// clock.
	Time time.Time `json:"time"`
	// Data is the event's JSON payload (an object), or empty.
	Data json.RawMessage `json:"data,omitempty"`
}

// Status is a run's state. Statuses are wire identifiers and must not
// change.
type Status string

// The run statuses. A run starts in StatusStarted and moves exactly once
// to one of the others, which are final: a suspended run is resumed by a
// new run whose ParentID names it. One end is not the turn's own: a run
// that reconciliation failed with [CategoryInterrupted] was ended
// without its owner, on the guess that its turn died uncommitted, and
// it still takes its owner's writes: the turn's end, if it comes, is
// the run's final status (see [Writable]).
const (
	StatusStarted   Status = "started"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusSuspended Status = "suspended"
)

// Final reports whether s is one of the final statuses.
func (s Status) Final() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusSuspended:
		return true
	}
	return false
}

// Writable reports whether a run in status st, whose error category is
// category ("" for none), takes a write: an Append (f its Finish, nil
// for none) or a Finish f. A started run takes every write. A run that
// reconciliation failed as interrupted (status failed, category
// [CategoryInterrupted]: [Recorder.Reconcile], or another replica's
// [Recorder.ReconcileAbandoned]) was ended on a guess, without its
// owner: the owner may be alive (a replica whose liveness lock was lost
// for a while) and its turn may have committed after the reconciler
// looked. So such a run still takes its owner's writes, events and one
// end that is not itself an interrupted failure: that end replaces the
// guess, and the run's record agrees with its committed turn. A second
// reconciler's interrupted failure, and any write to another finished
// run, is [ErrConflict]. Every Store applies this rule.
func Writable(st Status, category string, f *FinishRequest) bool {
	switch {
	case st == StatusStarted:
		return true
	case st == StatusFailed && category == CategoryInterrupted:
		return f == nil || !f.Interrupted()
	}
	return false
}

// Interrupted reports whether f is the end reconciliation gives a run
// whose turn did not commit: failed with [CategoryInterrupted].
func (f FinishRequest) Interrupted() bool {
	return f.Status == StatusFailed && f.Error != nil && f.Error.Category == CategoryInterrupted
}

// Run is the record of one turn (one invoke): the stable-harness run
// record. Its events are read separately with [Store.Events].
type Run struct {
	// ID is the run id (the events' requestId). It is unique within its
	// tenant.
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
	// SessionID and AgentID identify the conversation and the agent.
	SessionID string `json:"sessionId"`
	AgentID   string `json:"agentId"`
	// ParentID is the suspended run this run resumes, if any: the
	// parentRequestId of the run's events (stable-harness names).
	ParentID string `json:"parentRequestId,omitempty"`
	// CorrelationID is the caller's trace id (OpenHarness correlation_id).
	CorrelationID string `json:"correlationId,omitempty"`
	// ConversationID is the caller's sub-thread of the session
	// (OpenHarness context.conversation_id): metadata, recorded and
	// echoed; it does not split the session's history.
	ConversationID string `json:"conversationId,omitempty"`
	// InvocationID is the suspended invocation's id, set when the run
	// finishes suspended: the resume key.
	InvocationID string `json:"invocationId,omitempty"`
	// MessageID is the client's id of the message the turn answers (an
	// idempotency key, or the implicit key of an official OpenAI SDK's
	// request), when it is a valid id: [ListRunsRequest.MessageIDPrefix]
	// finds the run by it. The run's runtime.request.started event
	// carries it too, as messageId.
	MessageID string `json:"messageId,omitempty"`
	Status    Status `json:"status"`
	// Output is the completed turn's output (JSON), or empty.
	Output json.RawMessage `json:"output,omitempty"`
	// Error describes a failed turn.
	Error     *RunError `json:"error,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	// EndedAt is zero while the run is started.
	EndedAt time.Time `json:"endedAt,omitzero"`
}

// RunError describes why a run failed: the harness error bucket and
// category (PROTOCOLS §2) and a message safe to show the caller.
type RunError struct {
	Bucket   string `json:"bucket,omitempty"`
	Category string `json:"category,omitempty"`
	Message  string `json:"message,omitempty"`
}

// storable returns e with text every store keeps as given: invalid UTF-8
// and NUL bytes (an upstream's message cut inside a character, say)
// become U+FFFD. PostgreSQL refuses both in text columns, which left
// such a run unended there.
func (e RunError) storable() RunError {
	clean := func(s string) string {
		if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
			return s
		}
		return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	e.Bucket, e.Category, e.Message = clean(e.Bucket), clean(e.Category), clean(e.Message)
	return e
}

// Error returns the message, prefixed with the category when there is
// one, so that a RunError can travel as an error.
func (e *RunError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Category == "" {
		return e.Message
	}
	return e.Category + ": " + e.Message
}
