// Package eino is Armature's Eino backend adapter: it runs agents written
// with Eino (github.com/cloudwego/eino) under Armature's runtime —
// sessions, run records and runtime events, approvals from any surface,
// cancellation, durable restart, chat REST + SSE, OpenHarness, the
// OpenAI-compatible endpoints, the web page and the terminal client —
// without rewriting them.
//
// It is passthrough-first. The agent is Eino's ChatModelAgent (a ReAct
// loop over a compose graph), built with Eino's own constructors
// (adk.NewChatModelAgent, adk.NewRunner) from a typed backend-native
// section of the workspace ([Config], key eino:), and a turn is one run
// of Eino's Runner, with Eino's execution semantics. The adapter only
// normalizes Eino's agent events into runtime events
// (agent.output.delta, agent.tool.start, agent.tool.result,
// agent.node.completed) and maps Eino's human-in-the-loop primitive —
// a tool's interrupt (tool.Interrupt), saved in the Runner's checkpoint
// store and resumed with Runner.ResumeWithParams targeted at the
// interrupt — onto Armature's suspended outcome and signal resume. It
// never routes on the user's words, never synthesizes or replays tool
// calls.
//
// # Sessions, checkpoints and restarts
//
// Eino keeps no conversation: its caller passes the messages. The
// adapter passes the Armature session's history (which the runtime
// stores, durably on the SQLite and PostgreSQL stores) and the user's
// message; the messages Eino produces join that history. An interrupted
// run lives in Eino's checkpoint store under a per-turn checkpoint id,
// which the suspension carries. With no store named, [Factory] keeps it
// with the runtime's data (adapter.FactoryRequest.DataDir or Database:
// armature serve's --data or --database). In memory (an embedded
// runtime's default, or driver: memory) a restart loses it, and an
// approval pending across the restart fails with [ErrNoCheckpoint];
// with checkpoint: {driver: file} ([FileStore])
// or {driver: postgres} ([PostgresStore], shared by every replica) it
// survives, and an approval given after a restart, from any surface,
// resumes the run. A checkpoint that is missing, or that the store fails
// to read or Eino to load (a corrupt file), fails the approval with
// [ErrNoCheckpoint] (harness_signal_correlation_failed: sending it again
// cannot help), and the history answers the call with [NotRunText] (or
// the denial), not as an approval that was cancelled. A checkpoint is
// deleted when its resumed run ends or fails (a paused turn whose resume
// failed is retired, a failure to read or load the checkpoint included),
// when the turn that interrupted fails (its context ended as Eino saved
// the checkpoint, or the interrupted call has no id: no suspension names
// it), when its suspension is
// cancelled (the runs API's cancel: adapter.OnCancel, as the chat
// harness's OnCancel), and when its suspension is superseded by a new
// message, or a cancel's delete failed: the runtime discards such a
// suspension once the turn that found it stale is
// committed, at the session's following turn (adapter.Discarder;
// [Adapter.Discard]). A superseded suspension in a session that gets no
// further turns keeps its checkpoint until the session is deleted.
//
// # Per-request instructions
//
// A turn's per-request instructions (adapter.Request.Instructions: the
// OpenAI Responses API's instructions field) replace the agent's
// instruction as the system message of the turn's model calls, a
// resumed turn's included (the resuming request's): the model bridge
// (NewProviderModel, the workspace's model) sends them in place of the
// system messages Eino hands it, leaving the run's state as it is. The
// next turn without them has the agent's instruction again. A model of
// the embedder's own (Config.Model, an eino-ext client) gets Eino's
// system message: instructions are not applied to it.
//
// # Images
//
// A user's images reach Eino as the message's UserInputMultiContent
// image parts, in the turn's message and in the history handed over; the
// model bridge ([NewProviderModel]) hands them to an Armature model as
// image blocks, and fails other media with [ErrUnsupportedContent].
//
// # Concurrency
//
// An [Engine] and an [Adapter] are safe for concurrent use; the runtime
// never runs two turns of one session at once.
//
// # Registering
//
// [Register] adds the adapter to an adapter.Registry under [Name];
// [Factory] is the adapter.Factory.
//
//	reg := &adapter.Registry{}
//	if err := eino.Register(reg); err != nil { ... }
//
// Without the runtime, an [Engine] runs the same agent directly:
//
//	e, _ := eino.NewEngine(ctx, eino.Config{Tools: tools})
//	res, _ := e.Send(ctx, "turn-1", []*schema.Message{schema.UserMessage("where is order 7?")}, func(eino.Event) {})
package eino
