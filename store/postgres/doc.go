// Package postgres is the PostgreSQL backend, for running Armature as
// several replicas on one database, on github.com/jackc/pgx/v5: a
// session.Store with session.Appender (delta appends whose cost does not
// grow with the history), session.Marker (marks recorded in the write's
// own transaction) and session.Pager (a page of a history in one
// statement, at a cost that follows the page), and [Store.Checkpoints], the
// checkpoint.Store of checkpoint and paused-invocation records, which is
// also a checkpoint.SessionWriter: a suspension's session write and its
// paused record commit in one transaction, as do a resume's session
// write and the record's deletion, so a turn suspended on one replica is
// resumed exactly once by a signal on any other (Take and the resume's
// delete are single statements), and deleting a session deletes its
// records.
//
// Open applies the numbered migrations it lacks in one transaction under
// a transaction-scoped advisory lock, so replicas starting together
// migrate once; a database migrated by a newer build is refused. Tables
// live in Config.Schema when it is set (created if missing), else on the
// connection's search_path:
//
//	sessions        (id TEXT COLLATE "C" PRIMARY KEY, schema_version, version, created_at, updated_at)
//	session_fields  (session_id, field, value BYTEA)        PRIMARY KEY (session_id, field)
//	session_items   (session_id, field, seq, value BYTEA)   PRIMARY KEY (session_id, field, seq)
//	session_marks   (session_id, key, created_at, value)    PRIMARY KEY (session_id, key)
//	runs            (pos BIGSERIAL, tenant, id, session_id, agent_id, parent_id, …, status, output,
//	                 message_id)                            partial index (tenant, message_id, pos)
//	                                                        UNIQUE (tenant, id)
//	run_events      (id from a sequence, tenant, run_id, seq, session_id, type, time, data)
//	                                                        REFERENCES runs ON DELETE CASCADE
//	checkpoint_records (invocation_id, kind, correlation_id, session_id, signal_id,
//	                    schema_version, completed_node_count, saved_at, data BYTEA)
//	                                                        PRIMARY KEY (kind, invocation_id)
//	                                                        partial indexes per List filter
//	resume_announcements (id BIGSERIAL, origin, session_id, key, at)
//	                                                        kept AnnouncementWindow (10 min)
//	cancel_requests (id BIGSERIAL, tenant, run_id, at)      kept AnnouncementWindow (10 min)
//
// Ids sort in byte order (COLLATE "C"), as sessions are listed; values
// are kept as the JSON bytes written (BYTEA, not JSONB, which would
// reformat them); times are UTC unix nanoseconds. Deleting a session
// deletes its fields, items and marks (ON DELETE CASCADE).
//
// Writes are conditional on the version (optimistic concurrency): a
// conditional Save locks the session's row, an Append bumps the version
// only where it is the expected one; a conflict, a concurrent first save
// of one id, or a serialization failure is session_write_conflict. A load
// is one statement, so one snapshot and one round trip: the header, the
// value fields, and each list field's items joined into a JSON array in
// order by the server. Database failures are
// session_load_failed or session_save_failed, without the connection
// string's credentials.
//
// [Store.SessionLocker] is the chat.Locker that serializes a session's
// turns across replicas: a session-level advisory lock, held for the turn
// on a connection of the locker's own pool (no write per turn), granted
// in arrival order to up to LockerConfig.MaxWaiting waiters (the rest
// poll), released by the server if the replica dies. A turn of a free
// session never waits behind the waits for held ones.
//
// [Store.Runs] is the runtime.Store of run records and events (with
// runtime.Recoverable and runtime.BatchWriter, the Recorder's group
// commit of many turns in one transaction), shared by the replicas; event ids are taken under
// a transaction-scoped advisory lock, so they follow commit order and a
// reader resuming after an id (an SSE Last-Event-ID, on any replica)
// misses nothing.
//
// Every commit of run events also NOTIFYs the schema's events channel
// (armature_events_ and a digest of the schema's name: channels are per
// database, so deployments in other schemas do not hear each other)
// with its tenant and session; [Store.Listen] (a server.EventNotifier)
// hears them on a connection of its own, and asks for a full re-read
// after each (re)connection, since notices name rows and the rows are the
// truth. A server's session event streams then carry the turns of every
// replica.
//
// armature serve --database (ARMATURE_DATABASE_URL) runs on this package.
// Each Store is a replica: it holds an advisory lock of a random id on a
// connection of its own until Close (the server drops it if the process
// dies) and stamps the runs it starts with that id, so
// RunStore.UnfinishedRuns lists for reconciliation only the runs of
// replicas that are gone (and its own).
//
// [Store.RequestCancel] and [Store.ListenCancels] (a server.CancelRelay)
// carry cancel requests between replicas on the schema's cancel
// channel, so that a live run is cancelled through any replica. Each
// request is a row as well as a notice: a replica whose listening
// connection dropped reads, once reconnected, those it missed (within
// AnnouncementWindow), so a cancel that answered true is not lost to a
// connection blip.
//
// [Store.AnnounceWatch] and [Store.ListenWatches] (a server.WatchRelay)
// tell the replicas which sessions each streams live, on the schema's
// watch channel (plain notices, repeated by the watching replica every
// server.WatchRefresh while it streams: one lost delays a turn's events
// to its end, no more): a replica that hears one writes that session's
// turns as they go, so a watcher on another replica has their text as
// it streams.
//
// [Store.ResumeFeed] is a chat.ResumeFeed over LISTEN/NOTIFY: give each
// chat harness one (chat.Config.Feed) and run its Follow, and a turn
// resumed on any replica reaches the listeners (Harness.Subscribe)
// subscribed on every other, once each. Each announcement is a row as
// well as a notice: a feed whose listening connection dropped reads, once
// reconnected, those it missed (within AnnouncementWindow).
//
// A replica that is serving reconciles the runs of replicas that are
// gone with runtime.Recorder.ReconcileAbandoned
// (UnfinishedRequest.Abandoned lists only theirs; armature serve does it
// every --reconcile-interval).
//
// RunStore.Prune (runtime.Pruner) deletes old finished runs with their
// events, in batches of 256, the size bound estimated from the shared
// tables. RunStore.PurgeSession (runtime.SessionPurger) deletes one
// session's runs with their events in one statement.
//
// # Example
//
//	st, err := postgres.Open(ctx, postgres.Config{URL: "postgres://app@db:5432/armature"})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	g, err := builder.Compile(graph.WithSessions(graph.SessionConfig{Store: st}),
//		graph.WithCheckpointStore(st.Checkpoints()))
//	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints()),
//		Locker: st.SessionLocker(postgres.LockerConfig{})})
package postgres
