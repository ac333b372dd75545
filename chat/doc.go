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
// the Outcome.
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
// sessions. The Postgres store will provide a Locker on advisory locks,
// which queue fairly and cost no extra writes.
//
// # Idempotency
//
// A Send given [WithMessageID] is remembered per harness: a
// retransmission with the same session and id returns the first outcome
// without running a second turn (the retransmission waits for the first
// if it is still running).
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
