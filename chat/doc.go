// Package chat is the chat harness of the OpenArmature harness-chat
// capability: Send a user message to a session, get the turn's replies.
//
// A chat graph declares the canonical history field [Messages] (a list
// of llm.Message with the append reducer; [NewSchema] declares it) and is
// compiled graph.WithSessions. [Harness.Send] validates the session id
// and the message (llm-provider §3) before touching the store, appends
// the message to the session's history, runs the graph, and returns an
// [Outcome]:
//
//   - [*Completed]: Replies are the messages the turn appended after the
//     user's, of every role (assistant tool calls, tool results, the final
//     answer), in graph order — extracted by index, never by content.
//   - [*Suspended]: the turn paused for a signal (an approval);
//     PendingMessages are what it appended before pausing, typically a
//     question for the user. Send returns at once.
//   - [*Errored]: Reply is a system message for the user, chosen by the
//     failure's bucket (harness.BucketOf); user-correctable replies quote
//     the diagnostic.
//
// [Harness.Signal] resumes a suspended turn (found by signal id through
// the coordinator, so with a harness.StoreCoordinator the signal may
// arrive at any worker sharing the store), and the resumed turn's outcome
// goes to the session's listeners ([Harness.Subscribe]) exactly once.
//
// [Harness.SendStreaming] runs the same turn as an iterator of chunks:
// nodes stream model tokens and tool progress with [Emit], [EmitText] and
// [EmitTool] without knowing the transport, and the last chunk carries
// the Outcome. [Harness.SendFunc] hands the same chunks to a function
// instead, called in place on the emitting node's goroutine: no goroutine
// and no channel hand-off per chunk, which is how the server records and
// relays every turn.
//
// # Concurrency
//
// A Harness is safe for concurrent use. Sends (and Signals) to one
// session run one at a time in arrival order — a FIFO per-session lock,
// so no sender starves and a cancelled waiter leaves the queue — while
// different sessions run in parallel. That serialization covers one
// Harness; to serialize a session across harnesses (in one process or
// several), give every harness the same [Locker]. The embedded SQLite
// store's Store.SessionLocker serializes every harness on one database
// file with leases: two extra small write transactions per turn;
// waiters poll, so across harnesses the order is not FIFO; a crashed
// holder's lease lapses after its TTL. Several processes can open one
// SQLite file only when each sets sqlite.Config.Shared (by default a
// Store owns its file and a second process's Open fails). Without a
// shared Locker, harnesses writing one session interleave their turns
// and, under the default last-write-wins session saves, lose some of
// them: always configure one when several harnesses serve the same
// sessions. The PostgreSQL store's Store.SessionLocker is a Locker on
// advisory locks, which queue fairly and cost no extra writes.
//
// A turn waits for its session for as long as the session is held,
// unless bounded: Config.LockWait (or WithLockWait, Signal.LockWait) ends
// the wait with invocation_cancelled, cause [ErrSessionBusy], before the
// turn runs anything, and WithWaitContext (Signal.Wait) ends it when a
// server's client goes away. Either way the turn's message is not in the
// session and a resume takes no decision: the same request can be sent
// again.
//
// # A message sent while a turn is suspended
//
// A session has at most one suspended turn. A message sent while it
// waits (for example a user who types a new question instead of
// answering "may I refund order 91?") supersedes it, as in chat products
// that drop a pending tool approval when the user moves on:
//
//   - the suspended turn's open tool calls are closed with a tool result
//     saying they were not run (Config.SupersededResult, default
//     [DefaultSupersededResult]), so the model knows the action did not
//     happen and the history stays valid for every provider;
//   - the new message is appended after them and its turn runs on the
//     session as it is now; its outcome's Turn.Superseded lists the
//     superseded signal ids, so a UI can close the approval prompt;
//   - the suspension is retired: its signal then fails with
//     harness_signal_correlation_failed ("superseded by a later
//     message"), and changes nothing.
//
// The supersede takes effect with the new turn: if that turn errors
// (nothing stored), the approval is still pending. The closing results,
// the new message and a mark naming the superseded invocation are
// written in the turn's one transaction, so a crash cannot leave the
// suspension resumable after it was superseded.
//
// A suspended turn can also be cancelled (Harness.CancelSuspended; the
// server's POST /v1/runs/{id}/cancel): its signal then fails like a
// superseded one, and the session's next message first closes its open
// tool calls with a tool result saying they were not run
// (Config.CancelledResult, default [DefaultCancelledResult]). A call
// left open that never awaited an approval (a conversation a client
// sent whole with a call it gave no result for) is closed the same way
// with [UnansweredResult].
//
// A resumed turn's messages are always appended to the session as it is
// now, with the store's version check — never written over it.
//
// # History stays valid
//
// Every session write of a turn is checked with [llm.CheckHistory]:
// every tool result answers a tool call of the same history (once), no
// assistant message is without content and tool calls, tool call ids
// are unique in the session. A message given to Send that would break
// them fails with chat_message_shape_invalid; a turn whose own messages
// would (an empty model reply, a tool result for an unknown call) fails
// with provider_invalid_response ([HistoryError]); both are
// user-correctable and store nothing.
//
// # Signals
//
// [Harness.Signal] fails, changing nothing, with
// harness_signal_correlation_failed when nothing awaits the signal: it
// was already answered (of concurrent signals for one suspension exactly
// one wins, every other gets this), superseded, or its session deleted
// (a signal that waited for the session while a new message superseded
// its turn has [ErrSuperseded] as its cause, one whose turn a resume
// took up and did not finish [ErrDecisionTookEffect]);
// and with suspension_resume_payload_invalid when the payload does not
// match what the suspended node expects (graph.SignalDescriptor's
// PayloadSchema; the agent's approvals require
// {"approval": {"approved": <boolean>, "comment"?: <string>}}) — the turn
// then stays suspended.
//
// # Deleting a session
//
// [Harness.Delete] waits for the session's running turn, then deletes
// its history, its suspended turns and its recorded outcomes (in one
// transaction on the SQLite store). A running turn cannot bring the
// session back, and a later signal for it fails with
// harness_signal_correlation_failed. [Harness.DeleteWith] goes on under
// the session's lock (the other agents' harnesses, with
// [Harness.DeleteLocked], and the session's run records), so that a
// message sent meanwhile begins a new session. What the harness and its
// graph keep of the session in memory goes too: the harness's index of
// the session's tool-call ids, and what the graph's nodes registered
// with graph.WithSessionForget (the agent's, an adapter graph's).
//
// # Replicas
//
// Harnesses of several processes on one shared store serialize a
// session's turns through a [Locker]; a resumed turn reaches the
// listeners of every process through a [ResumeFeed] (Config.Feed, with
// [Harness.Follow] running in each): its completed or suspended outcome
// is recorded with its session write and announced, and each other
// harness reads it back for its own listeners.
//
// # Idempotency
//
// A Send given [WithMessageID] records its outcome with the turn's
// session write, in the same transaction, when the session store records
// marks (session.Marker: the memory and SQLite stores): a retransmission
// with the same session and id — before or after a restart, on any
// worker sharing the store — returns the recorded outcome (Replayed)
// without running a second turn (a retransmission arriving while the
// first still runs waits for it). Records are per session (so per tenant
// where sessions are per tenant) and kept for the store's mark retention
// (24 hours by default: sqlite.Config.MarkRetention,
// session.MemoryConfig.MarkRetention). Signal.RequestID does the same
// for signals, and [WithRecordKey] / Signal.RecordKey record an outcome
// under a caller's key for [Harness.Recorded] (a server reconciling its
// run records after a crash); [Harness.RecordKeys] lists the keys a
// session recorded (where the store lists marks: session.MarkLister),
// as a server deleting the session does to find the runs that committed
// to it. Ids are at most [MaxIDLength] bytes.
// Errored turns store nothing and are not recorded: a retransmission
// runs them again. The record locates the turn's replies in the history
// the same write stored (their position and a digest) rather than
// copying them: a replay reads them back, and if the history was
// rewritten since (a caller replacing it) the replay still runs nothing
// but answers without them. On a warm session the lookup costs no read
// where the store indexes its marks (session.VersionedMarker: the SQLite
// store); if another writer moved the session on since, the turn's load
// looks again at the version it read.
//
// # Example
//
//	schema, _ := chat.NewSchema()
//	g, _ := graph.NewBuilder(schema).
//		AddNode("model", callModel).
//		AddEdge("model", graph.End).
//		SetEntry("model").
//		Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
//	h, _ := chat.New(chat.Config{Graph: g})
//	out, err := h.Send(ctx, "user-42", llm.UserText("Hello"))
//	if c, ok := out.(*chat.Completed); ok {
//		fmt.Println(c.Replies[0].Text())
//	}
package chat
