// Package adapter is Armature's backend adapter contract (the
// stable-harness Backend Adapter Contract): it lets agents written with
// other Go agent frameworks (ADK-Go, Eino, a customer's own) run under
// Armature's runtime — sessions, run records and runtime events,
// approvals with signal resume, cancellation, durable restart, and every
// protocol surface of armature serve — without rewriting them.
//
// Adapters are passthrough-first: an [Adapter] translates one runtime
// turn ([Request]: the compiled [Workspace], the selected [Agent], the
// request and session ids, the history and the user message) into an
// upstream call, normalizes the upstream's events into runtime events
// through an [Emitter], and returns a [Result]: an [Output] (text,
// messages, metadata, runtime artifacts) or a [Suspension] (an upstream
// human-in-the-loop request, mapped onto Armature's suspended outcome).
// The runtime owns request ids, session ids, parent run links, metadata,
// artifact records, lifecycle state and event recording; the adapter
// owns only the upstream handoff.
//
// [Compile] builds the chat graph that serves an adapter's turns (the
// native backend, [NativeAdapter], brings its own graph): the runtime
// stores the session's history, pauses a suspended turn durably with the
// adapter's opaque resume state, and calls [Adapter.Run] again with
// [Request.Resume] when the approval arrives on any surface. An adapter
// that keeps upstream state for a suspension (a checkpoint) implements
// [Discarder], and the runtime hands it the suspensions superseded by a
// new message or cancelled, so that it deletes that state. One whose
// upstream keeps each session's state of its own (a session service,
// checkpoints) implements [SessionDeleter]: deleting a session deletes
// the upstream's too ([OnDelete]), so that the id starts clean. Such an
// upstream writes its session before the runtime writes the turn: it
// returns a [Result.Cursor], which the runtime commits with the turn and
// hands back in [Request.Cursor], so that it can roll back what turns
// the runtime did not commit left there. On a resume the runtime saves
// the result of each call the approval ran as soon as the upstream
// reports it, so that a turn failing or cancelled after it keeps it (and
// the approval cannot run it again); a [Positioner] gives the cursor
// saved with it. An upstream that reports nothing more once its context
// is cancelled (a cancel arriving while the approved tool runs) is
// covered by its tool wrappers calling [ToolReturned] when a tool
// returns.
//
// The workspace agent's model settings ([Agent.Sampling]) are for the
// adapter to give its upstream's model calls, and so are a turn's
// per-request instructions ([Request.Instructions], agent.WithInstructions:
// the OpenAI Responses API's instructions field), in place of the
// agent's instruction; its history window
// ([Agent.Window]) is applied by the runtime, which hands the adapter
// only the part of the history the window sends. An adapter reports
// each upstream model call's usage with [ReportModelCall]. Tool calls
// an upstream makes under an id the session already holds are stored
// under fresh ids, their results and approvals following them.
//
// A workspace agent names its adapter with backend: (default
// [Native], "armature"); a section named like the backend (adk:, eino:)
// is its typed backend-native config, decoded by [Agent.DecodeConfig].
// A [Registry] maps adapter names to [Factory] functions: embedded
// callers, and armature serve binaries built in other modules, register
// theirs there.
//
// The runtime surface the protocols are built on is split into the four
// focused interfaces of the contract: [RuntimeClient], [RuntimeEventSource],
// [RuntimeInspector] and [RuntimeLifecycle] (together [Runtime]).
//
// # Concurrency
//
// A Registry is safe for concurrent use. An Adapter's Run is called
// concurrently for different sessions, never for two turns of one
// session at once; an Emitter may be called from any goroutine while
// Run runs.
//
// # Example
//
//	reg := &adapter.Registry{}
//	_ = reg.Register("echo", func(ctx context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
//		return echo{}, nil // Name() "echo"; Run returns adapter.Text("you said: " + req.Input.Text())
//	})
//	ag := &adapter.Agent{ID: "helper", Backend: "echo"}
//	a, _ := reg.Build(ctx, adapter.FactoryRequest{Agent: ag})
//	g, _ := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: store}))
//	h, _ := chat.New(chat.Config{Graph: g})
//	out, _ := h.Send(ctx, "session-1", llm.UserText("hi"))
//
// See the package's examples and package adaptertest, the end-to-end
// script every backend runs.
package adapter
