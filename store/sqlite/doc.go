// Package sqlite is Armature's embedded storage backend: one SQLite file
// holding session records, checkpoint records, paused-invocation
// records and run records. It uses
// modernc.org/sqlite, a pure Go driver, so no cgo is needed.
//
// [Store] implements [session.Store] and the optional [session.Appender]:
// a chat turn is persisted as the items it appended plus a version bump,
// in one transaction whose cost does not grow with the conversation, and
// a conditional load (LoadRequest.IfVersionNot) reads one small row. It
// is a [session.Pager] too: a page of a history is one statement over a
// range of the list's item numbers, wherever the page stands.
//
// [Store.Checkpoints] returns a [CheckpointStore], the [checkpoint.Store]
// on the same file: checkpoint records (pipeline-utilities §10) and
// paused-invocation records of suspended invocations (suspension §2),
// told apart by their [checkpoint.Kind]. Its Take is atomic across
// goroutines, Stores and (with Config.Shared) processes sharing the
// file, so of two workers resuming one paused invocation exactly one
// gets it.
//
// [Store.Runs] returns a [RunStore], the runtime.Store on the same
// file: run records and their runtime events, for the inspector, trace
// views and SSE replay. Appending a batch of events (and finishing the
// run with it) is one transaction.
//
//	s, err := sqlite.Open(ctx, sqlite.Config{Path: "/var/lib/app/armature.db"})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	sessionStore := session.Store(s)
//	checkpointStore := checkpoint.Store(s.Checkpoints())
//	runStore := runtime.Store(s.Runs())
//
// # Durability
//
// The file runs in WAL journal mode. Every write (Save, Append, Delete;
// a checkpoint record's Save, Take or Delete; the combined
// WriteSuspended and WriteResumed; a run store write) is atomic: it is
// applied entirely or not at all, and a crash never leaves part of one.
// Concurrent writes may share one transaction (see Concurrency), but a
// write returns success only after the transaction holding it
// committed. What a committed write survives is Config.Durability,
// SQLite's synchronous setting on the write connection and the
// checkpointer's:
//
//   - [DurabilityNormal] (synchronous=NORMAL, the zero value): a write
//     that returned successfully survives a crash of the process (the
//     durability pipeline-utilities §10.1 asks of a checkpoint save).
//     After a power loss or operating-system crash the most recent
//     committed transactions may be lost (the WAL is synced at WAL
//     checkpoints, at most every 200ms after commits, not at every
//     commit), but the database is never corrupted and always reopens
//     at some earlier committed state. This is the trade-off SQLite
//     recommends for WAL; it costs one fsync per WAL checkpoint instead
//     of one per commit. The zero value keeps it because it is what
//     every earlier release did and what embedded uses (tests, tools,
//     single-user apps) want; a server that acknowledges turns to
//     clients should choose full, as armature serve does by default.
//   - [DurabilityFull]: a write returns only once the WAL holding its
//     commit is fsynced, so it survives a power loss or operating-system
//     crash too, provided the disk honours fsync. The store fsyncs the
//     WAL itself, outside the commit: the single writer goes on
//     committing the next group while the previous group's fsync runs,
//     and one fsync acknowledges every write committed before it began
//     (a pipelined group commit; SQLite's synchronous=FULL would fsync
//     inside each commit, holding the writer for it).
//
// Checkpoints (copying the WAL into the database file, and its fsyncs)
// run on a connection and goroutine of their own, as passive checkpoints
// at most every 200ms after commits, so a commit does not wait for them;
// the writer checkpoints by itself only if the WAL outgrows 16384 pages.
//
// # Concurrency
//
// A Store is safe for concurrent use. SQLite allows one writer at a time,
// so every write of a Store (sessions, checkpoint and paused records,
// runs, session leases) is queued to one writer goroutine owned by the
// Store, which alone uses the write connection; callers never see
// SQLITE_BUSY from each other. The writer commits in groups: it takes
// the first queued write and whatever else is queued behind it (at most
// 128), and runs them in one transaction (BEGIN IMMEDIATE), each inside
// its own SAVEPOINT. A write that fails (a version conflict, a missing
// paused record, a run in the wrong state, ...) is rolled back to its
// savepoint and reported to its own caller alone; the others commit
// with one COMMIT, and each caller gets its result (the version it
// wrote) once that COMMIT succeeded. If the transaction itself fails (BEGIN,
// COMMIT, or an error that aborts it), every write of the group that
// had not failed on its own fails with it, categorized as a failed save
// (session_save_failed for session writes). The writer never waits for
// more writes to arrive: a lone write is committed at once, and groups
// form from the writes that queue up while a commit is in progress, so
// group commit adds no latency to a lone writer and lets throughput
// grow with concurrency. Writes are taken in queue order.
//
// A caller whose context ends while its write is still queued gets the
// context's error at once, and its write is never applied. Once the
// writer has taken a write, it is run to completion (with the caller's
// context values but not its cancellation) and the caller waits for its
// outcome. [Store.Close] stops accepting writes, commits those already
// queued and only then closes the file.
//
// Reads use a separate pool of read-only connections and, thanks to
// WAL, never wait for writes: each Load reads a consistent snapshot. The
// one exception is Load's first, one-row read of a session's version
// (all a warm turn's revalidation or a new session's miss needs): when
// the writer is idle, the write connection answers it, because its page
// cache survives its own commits while a reader's is dropped after each
// commit and read again from the file.
//
// # Owning the file
//
// By default a Store owns its file: the first access takes one lock on
// the database file for the whole process (SQLite's "unix-excl" VFS).
// Transactions then take no file locks of their own and the WAL index
// lives in the process's memory instead of a shared "-shm" file, which
// saves about ten system calls per turn. Any number of Stores in one
// process share the file, but another process cannot open it while it
// is open: its Open waits Config.BusyTimeout and fails with [ErrLocked].
//
// With Config.SoleWriter a Store goes further: it is the only Store with
// the file open, in this process or any other. Every Store holds an
// advisory lock (flock) on a lock file beside it (the file's path,
// symbolic links resolved, with "-flock" appended; created when missing
// and left in place), shared,
// and a sole writer holds it exclusive, so each Open that would break
// the promise fails with [ErrLocked]. Every session write then goes through the sole writer,
// which applies each committed transaction's effect on the sessions'
// versions to a map in memory before any of its writers returns; a
// Load with IfVersionNot (a warm turn's cache revalidation) is answered
// from that map, without the version query. This is how armature serve
// runs (one process, one Store per data directory).
//
// With Config.Shared set in every process that opens it, the file is
// shared across processes with SQLite's default locking: their writers
// wait on each other up to Config.BusyTimeout, optimistic concurrency
// (ExpectedVersion) and [CheckpointStore.Take] work across all of them,
// and [Store.SessionLocker] serializes a session's turns across them.
// Stores of one file must agree on Shared. Where SQLite has no
// "unix-excl" VFS (Windows) every Store is shared.
//
// # Layout
//
// Schema changes are numbered migrations recorded in schema_migrations
// and applied by [Open]; a file migrated by a newer version of this
// package is refused with [ErrSchemaTooNew]; an older file is upgraded
// in place. Migration 1 creates the session tables:
//
//	sessions        (id TEXT PRIMARY KEY, schema_version TEXT, version INTEGER,
//	                 created_at INTEGER, updated_at INTEGER)
//	session_fields  (session_id, field, value BLOB)           PRIMARY KEY (session_id, field)
//	session_items   (session_id, field, seq INTEGER, value BLOB)
//	                                                          PRIMARY KEY (session_id, field, seq)
//
// Migration 2 creates the checkpoint table:
//
//	checkpoint_records (invocation_id TEXT, kind TEXT, correlation_id TEXT,
//	                    session_id TEXT, signal_id TEXT, schema_version TEXT,
//	                    completed_node_count INTEGER, saved_at INTEGER, data BLOB)
//	                                                          PRIMARY KEY (kind, invocation_id)
//
// Later migrations add the run tables (runs, run_events, later replaced
// by run_event_chunks and run_event_ids), make session_fields a WITHOUT
// ROWID table, add session_marks (session_id, key, created_at, value)
// and give session_items two nullable columns, marks BLOB and marked_at
// INTEGER.
//
// [RunStore.Prune] (runtime.Pruner) deletes old finished runs, a batch of
// 256 runs per write transaction so turns interleave with it; their
// event chunks go by the foreign key's cascade. The size it prunes to is an
// estimate kept from this process's writes, recounted from the tables at
// the first prune and hourly after (on every prune of a Shared store).
// [RunStore.PurgeSession] (runtime.SessionPurger) deletes one session's
// runs and their event chunks in one write transaction.
//
// # Marks
//
// A session write's marks (session.Mark: idempotency keys with the
// outcomes they produced, run records) are committed in the write's own
// transaction and cost it no page of its own: an append that adds items
// stores them on its last item row, a page the write dirties anyway.
// Only a write that adds no item (a Save, an append that only sets
// fields) gives them session_marks rows, and so do the marks of item
// rows a later write replaces (a Set of the list, a full Save): a mark
// lives as long as its retention (Config.MarkRetention), whatever
// happens to the rows around it, and is deleted with its session.
// [Store.LoadMark] needs no index on mark keys: the Store keeps the live
// keys of the sessions it wrote or read lately (bounded by bytes), valid
// for one version of one incarnation of a session, so a lookup costs a
// header probe; a session it does not hold is indexed from one read
// transaction, at the cost of a cold load. Expired marks are swept
// hourly, a batch of rows per write.
//
// kind is "checkpoint" (a checkpoint record) or "suspended" (a
// paused-invocation record): an invocation may have one of each. data is
// the engine's JSON payload, opaque to the store and stored last in the
// row so listings do not read it. Absent ids are empty strings. Partial
// indexes on (kind, signal_id, invocation_id), (kind, session_id,
// invocation_id) and (kind, correlation_id, invocation_id), over rows
// where that id is set, serve the List filters; the primary key serves
// an unfiltered List and every single-record operation.
//
// Migration 3 adds session_leases (see SessionLocker). Migration 5
// (below) reshapes the session tables. Migration 4 creates the run
// tables:
//
//	runs       (pos INTEGER PRIMARY KEY, tenant, id, session_id, agent_id, parent_id,
//	            correlation_id, invocation_id, status, last_seq, started_at, ended_at,
//	            error_bucket, error_category, error_message, output BLOB)
//	                                                          UNIQUE (tenant, id)
//	run_events (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant, run_id, seq,
//	            session_id, type, time, data BLOB)            UNIQUE (tenant, run_id, seq)
//
// pos numbers runs in start order (ListRuns pages by it, newest first);
// indexes on (tenant, pos) and (tenant, session_id, pos) serve the
// listings, a partial index over started runs serves Recover, and
// migration 10 adds a partial index on (tenant, parent_id, pos) over the
// runs that have a parent (ListRunsRequest.ParentID: a suspended run's
// resumes). Migration 11 adds runs.message_id (runtime.Run.MessageID,
// empty for none) and a partial index on (tenant, message_id, pos) over the
// runs that have one (ListRunsRequest.MessageIDPrefix: a key range).
//
// Migration 9 replaces run_events, one row per event, with event
// chunks, one row per run per write (an Append, a WriteTurns record):
//
//	run_event_ids    (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER)
//	run_event_chunks (first_id INTEGER PRIMARY KEY, tenant, run_id, session_id,
//	                  first_seq, n, size, data BLOB)      UNIQUE (tenant, run_id, first_seq)
//
// A chunk holds n events: event i has id first_id+i and seq
// first_seq+i, and data encodes their types, times and payloads in a
// small versioned binary format (a version byte, then per event varints
// for the type's length, the time's delta from the previous event's and
// the payload's length, with the type and payload bytes; a chunk that
// does not decode to exactly n events reads as [ErrCorrupt]). size sums
// the types' and payloads' lengths, for the prune's size estimate. A
// turn's events thus cost one row in each of the table and its two
// indexes instead of one per event, and name their run, tenant and
// session once. (tenant, session_id, first_id) serves a session's replay
// after an event id, (tenant, run_id, first_seq) a run's. A read may
// end within a chunk; the next page, after the last id it returned,
// resumes there. Event ids come from run_event_ids' one row, which a
// write transaction advances by all the ids it needs under SQLite's
// write lock: they increase in commit order across the processes
// sharing the file and are never reused, even after the newest events
// are deleted. The migration moves every run_events row into chunks
// with its id, seq, type, time and data, and starts run_event_ids above
// every id run_events assigned.
//
// Migration 5 cuts the pages a turn writes, since every page a
// transaction dirties is a WAL frame written at its commit: it drops
// the index on sessions.updated_at (List's UpdatedAfter filter, like
// CreatedAfter, is applied to the headers as List walks them in id
// order) and makes session_fields a WITHOUT ROWID table (one b-tree
// instead of a table and its primary-key index). A new session is
// created by a single insert. A first turn then writes three pages (the
// header, its field, and rarely a b-tree split), a warm turn four.
//
// Timestamps are UTC unix nanoseconds (INTEGER), so they sort and compare
// as numbers and round-trip exactly. Values are JSON, stored as BLOBs.
// A field lives either in session_fields (written by Save or
// AppendRequest.Set) or, once items have been appended to it, as one
// session_items row per item; Load joins the items, ordered by seq, into
// a JSON array. Child rows are deleted with their session (ON DELETE
// CASCADE). Tables are STRICT, so SQLite itself rejects mistyped values.
//
// # Errors
//
// Errors carry the "sqlite:" prefix and wrap the session sentinels
// (session.ErrNotFound, ErrNotModified, ErrWriteConflict,
// ErrInvalidRequest, ErrClosed). Storage failures are categorized
// session_load_failed or session_save_failed (see package errcat); data
// that cannot be decoded wraps [ErrCorrupt] in category
// session_load_failed rather than panicking. A done context yields its
// own error.
//
// A damaged file is found at [Open]: one that is not a database, or
// whose pages PRAGMA quick_check finds damaged (within
// Config.IntegrityCheck, 2 seconds by default: a 100 MB file takes about
// 0.3 s), or an empty file beside a write-ahead log that is not (SQLite
// would discard the log and start an empty database), fails Open with
// [ErrCorrupt] in session_load_failed, before any turn reads it. Damage an operation runs into later makes
// [Store.Ping], a readiness probe, fail from then on.
//
// A file the process can read but not write (restored by another user,
// on a file system mounted read-only) fails [Open] too, saying so: Open
// begins a write transaction and rolls it back, changing nothing; a
// file whose write-ahead log cannot be created (a read-only directory or
// file system) fails it saying that.
// Under DurabilityFull, a write-ahead log deleted by hand while the Store
// is open (SQLite goes on writing the deleted file, which no fsync can
// make durable) fails every write from then on, and [Store.Ping], until
// the Store is opened again.
//
// [CheckpointStore] errors wrap checkpoint.ErrNotFound and
// checkpoint.ErrInvalidRequest (and session.ErrClosed after Close).
// Failed writes are categorized checkpoint_save_failed; a row that
// cannot be decoded wraps [ErrCorrupt] in category
// checkpoint_record_invalid. Failed reads (Load, List) are not
// categorized: the spec defines no checkpoint load-failure category.
//
// [RunStore] errors wrap runtime.ErrNotFound, runtime.ErrInvalidRequest
// and runtime.ErrConflict (and session.ErrClosed after Close); a row that
// cannot be decoded wraps [ErrCorrupt]; storage failures are not
// categorized.
package sqlite
