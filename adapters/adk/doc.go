// Package adk is Armature's ADK-Go backend adapter: it runs agents
// written with ADK-Go (google.golang.org/adk/v2) under Armature's runtime
// — sessions, run records and runtime events, approvals from any surface,
// cancellation, durable restart, chat REST + SSE, OpenHarness, the
// OpenAI-compatible endpoints, the web page and the terminal client —
// without rewriting them.
//
// It is passthrough-first. The agent is built with ADK-Go's own
// constructors (llmagent.New, functiontool.New, runner.New) from a typed
// backend-native section of the workspace ([Config], key adk:); a turn is
// one run of ADK-Go's runner, with ADK-Go's execution semantics and its
// own session service (in memory, or its database service on a SQLite
// file). The adapter only normalizes ADK-Go's events into runtime events
// (agent.output.delta, agent.tool.start, agent.tool.result,
// agent.node.completed) and maps ADK-Go's tool confirmation
// (functiontool RequireConfirmation, answered by a function response to
// the adk_request_confirmation call) onto Armature's suspended outcome
// and signal resume. A denial's comment travels in that function
// response's confirmation payload ({"comment": ...}, [CommentKey]), and
// the tool answers the rejected call with ADK-Go's rejection, "The user
// denied this call." and the reason (agent.DeniedResult), so the model
// reads that a human refused it and why, as with the native agent. It never
// routes on the user's words, never synthesizes or replays tool calls.
//
// # Sessions and restarts
//
// Both sides keep the conversation: ADK-Go its session (which the model
// sees), Armature its session history (which the surfaces show). The ADK
// session is named like the Armature one, its user is the tenant. With
// the in-memory session service (the default) a restart loses the ADK
// sessions: their next turns are given Armature's history ([Engine.Seed])
// and go on, and an approval pending across the restart is given its
// confirmation request again (ADK-Go's own events, under their original
// ids), so approving it runs the tool. With session: {driver: sqlite} (ADK-Go's database
// service on a SQLite file) or {driver: postgres} (on PostgreSQL, shared
// by every replica) both survive a restart, and a confirmation given
// after it, from any surface, runs the tool.
//
// ADK-Go writes its session as a turn runs, Armature when the turn ends.
// Each committed turn carries the ADK session's position
// ([Engine.Position], adapter.Result.Cursor); the next turn first rolls
// the session back to it ([Engine.Rewind]), so that a turn Armature did
// not commit (failed, cancelled, its session write failed, its process
// killed) never reaches the model. An ADK session without events, while
// Armature's history has some (a conversation a client of the
// OpenAI-compatible endpoint sends whole), is seeded with that history.
//
// A user's images reach ADK-Go as parts of the user's content
// ([Engine.SendMessage]; an inline image or a data: URL as inline data,
// another URL as file data), and the model bridge hands them to an
// Armature model as image blocks; other media fail with
// [ErrUnsupportedContent].
//
// # Concurrency
//
// An [Engine] and an [Adapter] are safe for concurrent use on different
// sessions; the runtime never runs two turns of one session at once.
//
// # Registering
//
// [Register] adds the adapter to an adapter.Registry under [Name];
// [Factory] is the adapter.Factory.
//
//	reg := &adapter.Registry{}
//	if err := adk.Register(reg); err != nil { ... }
//
// Without the runtime, an [Engine] runs the same agent directly:
//
//	e, _ := adk.NewEngine(ctx, adk.Config{Tools: tools})
//	res, _ := e.Send(ctx, "user", "session-1", "where is order 7?", func(adk.Event) {})
package adk
