package adapter

import (
	"context"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// The runtime surface, split into the four focused interfaces of the
// stable-harness runtime interface. Every protocol surface of armature
// serve (chat REST + SSE, OpenHarness, the OpenAI-compatible endpoints,
// the web page and terminal client) needs only these; *server.Server
// implements all four, whatever backend each agent runs on. Identifiers
// (run ids, session ids, tenants) are the runtime's.

// RuntimeClient submits a turn and returns its response.
type RuntimeClient interface {
	// Submit runs one turn (a message, or a signal resuming a suspended
	// turn) to its end and returns its response. The turn runs detached
	// from ctx's cancellation once admitted (cancel it through
	// RuntimeLifecycle.Cancel), like every surface's turns.
	Submit(ctx context.Context, req SubmitRequest) (*Response, error)
}

// RuntimeEventSource subscribes to a session's normalized runtime
// events.
type RuntimeEventSource interface {
	// Subscribe delivers the session's events as they are stored, until
	// cancel is called or the channel closes (the subscriber fell behind
	// or the runtime stops; replay the rest from RuntimeInspector.Events).
	Subscribe(ctx context.Context, tenant, sessionID string) (events <-chan runtime.Event, cancel func())
}

// RuntimeInspector reads run records.
type RuntimeInspector interface {
	// Run returns a run record (runtime.ErrNotFound for an unknown run or
	// another tenant's).
	Run(ctx context.Context, tenant, runID string) (*runtime.Run, error)
	// Events returns a run's or a session's events.
	Events(ctx context.Context, req runtime.EventsRequest) ([]runtime.Event, error)
	// Runs lists runs, newest first.
	Runs(ctx context.Context, req runtime.ListRunsRequest) (runtime.ListRunsResponse, error)
}

// RuntimeLifecycle cancels running work and stops the runtime.
type RuntimeLifecycle interface {
	// Cancel cancels a live or suspended run; it reports whether there
	// was one to cancel.
	Cancel(ctx context.Context, tenant, runID string) (bool, error)
	// Stop stops accepting turns, lets those in flight end within ctx,
	// and cancels the rest. It is idempotent.
	Stop(ctx context.Context) error
}

// Runtime is the whole runtime surface.
type Runtime interface {
	RuntimeClient
	RuntimeEventSource
	RuntimeInspector
	RuntimeLifecycle
}

// SubmitRequest is a turn submitted to a RuntimeClient: a message, or a
// Signal resuming a suspended turn.
type SubmitRequest struct {
	// Tenant owns the session; SessionID names it (the runtime mints one
	// when empty); Agent is an agent id or task hint ("" = the default
	// agent).
	Tenant    string
	SessionID string
	Agent     string
	// Message is the user message of a send.
	Message llm.Message
	// MessageID makes a send idempotent (chat.WithMessageID).
	MessageID string
	// Signal, when set, resumes a suspended turn instead of sending.
	Signal *Signal
	// CorrelationID, when set, is a send's correlation id
	// (graph.WithCorrelationID): the id a caller's trace or request
	// already carries (a W3C traceparent, X-Request-ID). A resumed turn
	// keeps the one it started with.
	CorrelationID string
	// OnChunk, when set, receives the turn's chunks in order as it
	// streams (text deltas, tool statuses), on the runtime's goroutine:
	// what an in-process streaming surface forwards. It must not block
	// for long; the turn completes and is stored whether or not it
	// consumes them. Subscribers of RuntimeEventSource see the same turn
	// as runtime events.
	OnChunk func(chat.Chunk)
}

// Signal resumes a suspended turn: by signal id or invocation id, with
// a payload (agent.Approve, agent.Deny).
type Signal struct {
	SignalID     string
	InvocationID string
	Payload      map[string]any
	// RequestID makes the signal idempotent.
	RequestID string
}

// Response is a submitted turn's answer.
type Response struct {
	// RunID is the turn's run ("" when no turn ran: a retransmission or a
	// refused signal).
	RunID string
	// SessionID is the session the turn ran in.
	SessionID string
	// Outcome is the chat outcome: *chat.Completed, *chat.Suspended or
	// *chat.Errored.
	Outcome chat.Outcome
}
