// Package runtime is Armature's runtime event model and run records
// (PROTOCOLS §3, the stable-harness runtime event model): every turn is
// a [Run] with an ordered list of [Event]s under stable names
// (runtime.request.started, runtime.adapter.event with agent.* phases,
// runtime.request.completed / failed / cancelled, and the suspension
// extensions runtime.request.suspended and runtime.approval.*). Run
// records back the inspector endpoints, the trace views and SSE replay.
//
// The package name shadows the standard library's runtime package.
// Import it as is; a file that needs both renames the standard one
// (goruntime "runtime"), since this one is the domain vocabulary.
//
// # Pieces
//
//   - [Store] persists runs and events; [MemoryStore] is the in-memory
//     backend, store/sqlite the embedded one. Every backend passes the
//     conformance suite in package runtimetest. Tenants are isolated:
//     another tenant's run is [ErrNotFound].
//   - [Pruner] is the optional capability of a store that deletes
//     old finished runs with their events, by age and beyond a size cap
//     (estimated with [RunSize] and [EventSize]); [Prune] runs it on a
//     schedule. [SessionPurger] deletes one session's runs with their
//     events, for [Recorder.PurgeSession] when a session is deleted.
//   - [Recorder] turns a turn into a run: [Recorder.Begin] starts it and
//     returns a [Turn]; [Turn.Accept] records runtime.request.started
//     once the turn holds its session (PROTOCOLS §3: a turn waiting
//     behind another starts after it), Emit / Adapter calls buffer
//     events, and Complete / Fail / Suspend / Cancelled end it (a
//     cancelled run says why in its end's cause, a [CancelCause], given by
//     [Turn.CancelledFor]). Writes are
//     group-committed: a turn nobody watches live writes nothing on its
//     own path; its start, its events and its end are handed to a
//     background flusher that writes many turns of many sessions in one
//     transaction through the optional [BatchWriter] capability. A
//     turn's records reach the store a bounded delay (about a
//     millisecond plus one commit) after they are handed over;
//     [Turn.Flush] waits for one turn's (a server answers a turn only
//     after it, so that an acknowledged turn always has its run record
//     and final status), [Recorder.Flush] for all, [Recorder.Store]
//     reads with read-your-writes, and [Recorder.Close] drains the
//     queue at shutdown. A turn whose session is watched live writes
//     each event as it happens. See Recorder for the cost and the
//     back-pressure.
//   - [Recorder.Reconcile], at startup, ends the runs a crash left in
//     status started as their turns really ended: a [Resolver] (the
//     server asks the session store, where the chat harness records
//     each turn's outcome atomically with its session write) tells
//     whether the turn committed, completed or suspended; the others
//     fail with [CategoryInterrupted]. It needs no subscriber. Such a
//     failure is a guess made without the run's owner: should the owner
//     be alive after all (another process's turn), the turn's own end
//     replaces it ([Writable]).
//   - [Broker] fans stored events out to live subscribers of a session.
//     A subscriber that falls behind is disconnected, not silently
//     skipped, so that it reconnects and replays from the store.
//     [Recorder.Subscribe] subscribes and brings the session's turn in
//     flight live, so that a subscriber joining mid-turn finds the
//     turn's events so far in the store replay and gets the rest live.
//
// # IDs and replay
//
// An event's ID is assigned by the store and increases across the whole
// store in commit order; it is the SSE event id. Seq numbers a run's
// events from 1. An SSE handler streams a session without gaps so:
//
//	events, cancel := rec.Subscribe(ctx, tenant, sessionID) // 1. subscribe
//	defer cancel()
//	past, err := rec.Store().Events(ctx, runtime.EventsRequest{ // 2. replay
//		Tenant: tenant, SessionID: sessionID, AfterID: lastEventID})
//	// ... send past (page with Limit until fewer come back), remember the last ID ...
//	for e := range events { // 3. live, skipping what the replay sent
//		if e.ID <= last {
//			continue
//		}
//		// ... send e ...
//	}
//	// the channel closed: the client fell behind or the server is
//	// shutting down; end the stream, and the client reconnects with
//	// Last-Event-ID.
//
// # Concurrency
//
// Stores, the Recorder, Turns and the Broker are safe for concurrent
// use. A Turn stores its events in the order its calls return, whichever
// path writes them. The Recorder publishes a turn's events in ID order,
// after they are committed; the turns of one session are serialized by the
// harness, its queued records are written in FIFO order, and a turn
// that writes live first waits for its session's queued records, so a
// session's event IDs increase in the order its turns ran and its
// subscribers see increasing IDs. The Recorder owns one flusher
// goroutine at a time, started on demand and stopped when the queue is
// empty; Close waits for it.
package runtime
