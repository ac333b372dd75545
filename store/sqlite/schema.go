package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/armature-go/armature/internal/nanotime"
)

// migration is one numbered schema step. Migrations are append-only:
// once released, a migration's number and statements must not change;
// later features (checkpoints, paused invocations, run records) add new
// entries at the end.
type migration struct {
	version int64
	name    string
	stmts   []string
	// fn, when set, runs after stmts: a step SQL alone cannot express
	// (re-encoding rows). post runs after fn.
	fn   func(ctx context.Context, tx *sql.Tx) error
	post []string
}

// migrations is the schema history, in order; versions are 1, 2, 3, ...
var migrations = []migration{
	{
		version: 1,
		name:    "sessions",
		stmts: []string{
			// sessions is the record header: one small row per session,
			// keyed by id (WITHOUT ROWID: the id is the b-tree key).
			// Timestamps are UTC unix nanoseconds.
			`CREATE TABLE sessions (
				id             TEXT    NOT NULL PRIMARY KEY,
				schema_version TEXT    NOT NULL,
				version        INTEGER NOT NULL,
				created_at     INTEGER NOT NULL,
				updated_at     INTEGER NOT NULL
			) STRICT, WITHOUT ROWID`,
			// session_fields holds replaced (Save/Set) fields, one JSON
			// value per row.
			`CREATE TABLE session_fields (
				session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
				field      TEXT NOT NULL,
				value      BLOB NOT NULL,
				PRIMARY KEY (session_id, field)
			) STRICT`,
			// session_items holds list fields written by Append, one JSON
			// item per row, ordered by seq. A field lives in exactly one
			// of session_fields and session_items.
			`CREATE TABLE session_items (
				session_id TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
				field      TEXT    NOT NULL,
				seq        INTEGER NOT NULL,
				value      BLOB    NOT NULL,
				PRIMARY KEY (session_id, field, seq)
			) STRICT`,
			`CREATE INDEX sessions_updated_at ON sessions (updated_at)`,
		},
	},
	{
		version: 2,
		name:    "checkpoint_records",
		stmts: []string{
			// checkpoint_records holds checkpoint and paused-invocation
			// records (package checkpoint), told apart by kind. The key is
			// (invocation_id, kind), declared kind first so that the
			// primary-key index also serves List's kind-only, invocation-id
			// ordered scan. A rowid table rather than WITHOUT ROWID: data
			// is kilobytes, far above the row size WITHOUT ROWID suits.
			// data is the engine's JSON payload and comes last, so reading
			// the metadata (List) never touches its overflow pages. Empty
			// strings stand for absent ids. saved_at is UTC unix
			// nanoseconds.
			`CREATE TABLE checkpoint_records (
				invocation_id        TEXT    NOT NULL,
				kind                 TEXT    NOT NULL,
				correlation_id       TEXT    NOT NULL,
				session_id           TEXT    NOT NULL,
				signal_id            TEXT    NOT NULL,
				schema_version       TEXT    NOT NULL,
				completed_node_count INTEGER NOT NULL,
				saved_at             INTEGER NOT NULL,
				data                 BLOB    NOT NULL,
				PRIMARY KEY (kind, invocation_id)
			) STRICT`,
			// One index per List filter, ending in invocation_id so a
			// filtered page is an ordered index range (no sort). Partial:
			// records without the id (a checkpoint has no signal, an
			// invocation may have no session) cost no index entry; List
			// repeats the "<> ''" condition so the planner may use them.
			`CREATE INDEX checkpoint_records_signal ON checkpoint_records (kind, signal_id, invocation_id)
				WHERE signal_id <> ''`,
			`CREATE INDEX checkpoint_records_session ON checkpoint_records (kind, session_id, invocation_id)
				WHERE session_id <> ''`,
			`CREATE INDEX checkpoint_records_correlation ON checkpoint_records (kind, correlation_id, invocation_id)
				WHERE correlation_id <> ''`,
		},
	},
	{
		version: 3,
		name:    "session_leases",
		stmts: []string{
			// session_leases serializes the turns of one session across
			// processes sharing the file (Store.SessionLocker): a row is a
			// held lease, owned by one Lock call until it is released or
			// expires (UTC unix nanoseconds); the holder renews it.
			`CREATE TABLE session_leases (
				session_id TEXT    NOT NULL PRIMARY KEY,
				owner      TEXT    NOT NULL,
				expires_at INTEGER NOT NULL
			) STRICT, WITHOUT ROWID`,
		},
	},
	{
		version: 4,
		name:    "runs",
		stmts: []string{
			// runs holds run records (package runtime), keyed by (tenant,
			// id). pos, the rowid, numbers runs in the order they were
			// started: ListRuns pages by it. last_seq is the Seq of the
			// run's last event. Empty strings stand for absent ids; the
			// error columns are NULL when the run has no error, output is
			// NULL when empty; times are UTC unix nanoseconds, ended_at 0
			// while the run is started.
			`CREATE TABLE runs (
				pos            INTEGER NOT NULL PRIMARY KEY,
				tenant         TEXT    NOT NULL,
				id             TEXT    NOT NULL,
				session_id     TEXT    NOT NULL,
				agent_id       TEXT    NOT NULL,
				parent_id      TEXT    NOT NULL,
				correlation_id TEXT    NOT NULL,
				invocation_id  TEXT    NOT NULL,
				status         TEXT    NOT NULL,
				last_seq       INTEGER NOT NULL,
				started_at     INTEGER NOT NULL,
				ended_at       INTEGER NOT NULL,
				error_bucket   TEXT,
				error_category TEXT,
				error_message  TEXT,
				output         BLOB,
				UNIQUE (tenant, id)
			) STRICT`,
			`CREATE INDEX runs_tenant ON runs (tenant, pos)`,
			`CREATE INDEX runs_session ON runs (tenant, session_id, pos)`,
			// Recover's scan: only started runs have an entry.
			`CREATE INDEX runs_unfinished ON runs (pos) WHERE status = 'started'`,
			// run_events holds the runs' events. id is the store-wide
			// event id (the SSE id): AUTOINCREMENT so that an id is never
			// reused, even after the newest rows are deleted, and,
			// assigned under SQLite's single write lock, increasing in
			// commit order. data is NULL when empty. (Migration 9
			// replaces it with run_event_chunks and run_event_ids.)
			`CREATE TABLE run_events (
				id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
				tenant     TEXT    NOT NULL,
				run_id     TEXT    NOT NULL,
				seq        INTEGER NOT NULL,
				session_id TEXT    NOT NULL,
				type       TEXT    NOT NULL,
				time       INTEGER NOT NULL,
				data       BLOB,
				FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id) ON DELETE CASCADE
			) STRICT`,
			`CREATE UNIQUE INDEX run_events_run ON run_events (tenant, run_id, seq)`,
			`CREATE INDEX run_events_session ON run_events (tenant, session_id, id)`,
		},
	},
	{
		version: 5,
		name:    "fewer_pages_per_turn",
		stmts: []string{
			// Every page a turn dirties is a WAL frame written at commit,
			// the largest part of a turn's cost. sessions_updated_at cost
			// each turn a page of its own while serving only List's
			// UpdatedAfter filter, which pages by id anyway: List now
			// filters the headers as it walks them in id order, as it
			// always did for CreatedAfter.
			`DROP INDEX sessions_updated_at`,
			// session_fields becomes a WITHOUT ROWID table: its primary
			// key is then the b-tree itself instead of a second index
			// beside a rowid table, so writing a field (a new session's
			// first save, AppendRequest.Set) dirties one page fewer.
			`CREATE TABLE session_fields_v5 (
				session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
				field      TEXT NOT NULL,
				value      BLOB NOT NULL,
				PRIMARY KEY (session_id, field)
			) STRICT, WITHOUT ROWID`,
			`INSERT INTO session_fields_v5 (session_id, field, value)
				SELECT session_id, field, value FROM session_fields`,
			`DROP TABLE session_fields`,
			`ALTER TABLE session_fields_v5 RENAME TO session_fields`,
		},
	},
	{
		version: 6,
		name:    "session_marks",
		stmts: []string{
			// session_marks holds the marks recorded with session writes
			// (session.Mark: idempotency keys and the outcomes they
			// produced, run records), written in the write's own
			// transaction. Deleting the session deletes its marks.
			// created_at (UTC unix nanoseconds) drives retention: a
			// periodic sweep deletes older marks. No index on it: the
			// sweep is rare and a turn should dirty no extra page for it.
			`CREATE TABLE session_marks (
				session_id TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
				key        TEXT    NOT NULL,
				created_at INTEGER NOT NULL,
				value      BLOB    NOT NULL,
				PRIMARY KEY (session_id, key)
			) STRICT, WITHOUT ROWID`,
		},
	},
	{
		version: 7,
		name:    "marks_on_item_rows",
		stmts: []string{
			// A write's marks ride on its last item row (see marks.go):
			// a page the turn dirties anyway, where a session_marks row
			// cost every marked turn a WAL frame of its own. marked_at
			// (UTC unix nanoseconds) drives retention like
			// session_marks.created_at. Adding NULL columns rewrites no
			// row.
			`ALTER TABLE session_items ADD COLUMN marks BLOB`,
			`ALTER TABLE session_items ADD COLUMN marked_at INTEGER`,
		},
	},
	{
		version: 8,
		name:    "run_conversation_id",
		stmts: []string{
			// runtime.Run.ConversationID (OpenHarness
			// context.conversation_id); '' when the caller named none.
			`ALTER TABLE runs ADD COLUMN conversation_id TEXT NOT NULL DEFAULT ''`,
		},
	},
	{
		version: 9,
		name:    "run_event_chunks",
		stmts: []string{
			// run_event_ids allocates the store-wide event ids (the SSE
			// ids), in place of run_events' AUTOINCREMENT: its one row
			// holds the next id. A write transaction takes all the ids
			// it needs with one UPDATE under SQLite's write lock, so ids
			// increase in commit order across every process sharing the
			// file, and, never decremented, are never reused, even after
			// the newest events are deleted. It starts above every id
			// run_events ever assigned (its sqlite_sequence entry).
			`CREATE TABLE run_event_ids (
				id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
				next INTEGER NOT NULL
			) STRICT`,
			`INSERT INTO run_event_ids (id, next) VALUES (1, 1 + max(
				coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'run_events'), 0),
				coalesce((SELECT max(id) FROM run_events), 0)))`,
			// run_event_chunks holds the runs' events, one row per run
			// per write (an Append, a WriteTurns record) instead of one
			// row per event: a turn's events then cost one row in each
			// of three b-trees rather than one per event in each (and
			// repeat their tenant, run and session ids once). Event i of
			// a chunk has id first_id+i and seq first_seq+i; n counts
			// them; data encodes their types, times and payloads (see
			// runchunk.go); size is the sum of their types' and
			// payloads' lengths, for the prune's size estimate.
			`CREATE TABLE run_event_chunks (
				first_id   INTEGER NOT NULL PRIMARY KEY,
				tenant     TEXT    NOT NULL,
				run_id     TEXT    NOT NULL,
				session_id TEXT    NOT NULL,
				first_seq  INTEGER NOT NULL,
				n          INTEGER NOT NULL,
				size       INTEGER NOT NULL,
				data       BLOB    NOT NULL,
				FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id) ON DELETE CASCADE
			) STRICT`,
			// A run's events in seq order (and the cascade's lookup); a
			// session's events in id order.
			`CREATE UNIQUE INDEX run_event_chunks_run ON run_event_chunks (tenant, run_id, first_seq)`,
			`CREATE INDEX run_event_chunks_session ON run_event_chunks (tenant, session_id, first_id)`,
		},
		// The run_events rows move into chunks with their ids, seqs,
		// types, times and data.
		fn:   copyRunEvents,
		post: []string{`DROP TABLE run_events`},
	},
	{
		version: 10,
		name:    "runs_parent",
		stmts: []string{
			// The runs that resumed a suspended run, or ended its
			// suspension (ListRunsRequest.ParentID).
			`CREATE INDEX runs_parent ON runs (tenant, parent_id, pos) WHERE parent_id <> ''`,
		},
	},
	{
		version: 11,
		name:    "runs_message_id",
		stmts: []string{
			// runtime.Run.MessageID: the client's message id (an
			// idempotency key, or an official OpenAI SDK's implicit
			// key); '' when the turn had none. Adding a column with a
			// constant default rewrites no row.
			`ALTER TABLE runs ADD COLUMN message_id TEXT NOT NULL DEFAULT ''`,
			// The runs of a message id prefix
			// (ListRunsRequest.MessageIDPrefix): a key range within the
			// tenant. Partial: runs without a message id cost no entry.
			`CREATE INDEX runs_message ON runs (tenant, message_id, pos) WHERE message_id <> ''`,
		},
	},
}

// migrate brings the database up to the newest schema version this code
// knows (the last of migrations) in one transaction on the writer. It
// fails with ErrSchemaTooNew when the file records a migration this code
// does not know.
func migrate(ctx context.Context, db *sql.DB, now func() time.Time, log *slog.Logger) error {
	return migrateTo(ctx, db, migrations, now, log)
}

// migrateTo applies ms, a prefix of migrations (tests build files at an
// older schema with it).
func migrateTo(ctx context.Context, db *sql.DB, ms []migration, now func() time.Time, log *slog.Logger) (err error) {
	latest := ms[len(ms)-1].version
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%w: begin: %w", ErrMigration, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("%w: create schema_migrations: %w", ErrMigration, err)
	}
	applied, err := appliedMigrations(ctx, tx)
	if err != nil {
		return err
	}
	for i, v := range applied {
		if v > latest {
			return fmt.Errorf("%w: the file is at schema version %d, this code knows up to %d",
				ErrSchemaTooNew, applied[len(applied)-1], latest)
		}
		if v != int64(i+1) {
			return fmt.Errorf("%w: recorded migrations %v are not 1..%d", ErrMigration, applied, len(applied))
		}
	}
	for _, m := range ms[len(applied):] {
		if err := applyMigration(ctx, tx, m); err != nil {
			return fmt.Errorf("%w: %d %s: %w", ErrMigration, m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, nanotime.Of(now())); err != nil {
			return fmt.Errorf("%w: record %d %s: %w", ErrMigration, m.version, m.name, err)
		}
		log.InfoContext(ctx, "sqlite: applied schema migration", "version", m.version, "name", m.name)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %w", ErrMigration, err)
	}
	return nil
}

// applyMigration runs m's statements, fn and post statements in tx.
func applyMigration(ctx context.Context, tx *sql.Tx, m migration) error {
	for _, stmt := range m.stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if m.fn != nil {
		if err := m.fn(ctx, tx); err != nil {
			return err
		}
	}
	for _, stmt := range m.post {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// appliedMigrations returns the recorded migration versions, ascending.
func appliedMigrations(ctx context.Context, tx *sql.Tx) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("%w: read schema_migrations: %w", ErrMigration, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("%w: read schema_migrations: %w", ErrMigration, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: read schema_migrations: %w", ErrMigration, err)
	}
	return out, nil
}
