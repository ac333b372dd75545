package postgres

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

// Config configures a Store.
type Config struct {
	// URL is the database's connection string (postgres://…, or a
	// key=value DSN). Required.
	URL string
	// Schema, when set, holds the store's tables: it is created if
	// missing and put first on every connection's search_path (how tests,
	// or several deployments sharing a database, keep apart). Default:
	// the connection's search_path (usually public); the schema it names
	// first, when a plain name, is created if missing.
	Schema string
	// MarkRetention is how long a mark is kept; default
	// session.DefaultMarkRetention.
	MarkRetention time.Duration
	// MaxConns bounds the pool; default pgxpool's (max(4, CPUs)).
	MaxConns int32
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives migration messages; default discards.
	Logger *slog.Logger
	// OwnerGrace is how long a replica's lock must stay free before its
	// started runs count as a gone replica's (RunStore.UnfinishedRuns
	// probes the lock twice, OwnerGrace apart): a replica whose lock's
	// connection dropped takes the lock again meanwhile (see Ping).
	// Default DefaultOwnerGrace; negative: probe once.
	OwnerGrace time.Duration
}

// DefaultOwnerGrace is Config.OwnerGrace's default.
const DefaultOwnerGrace = 2 * time.Second

// replicaProbe is how often the connection holding the replica's lock
// is checked when nothing else reports its loss (a terminated backend
// reports it at once).
const replicaProbe = 5 * time.Second

// ErrInvalidConfig is wrapped by Open's error for an unusable Config.
var ErrInvalidConfig = errors.New("postgres: invalid config")

// Store is a session.Store (with session.Appender and session.Marker) on
// PostgreSQL. It is safe for concurrent use by many goroutines and many
// processes sharing the database.
type Store struct {
	// Locks serializes a session's turns across every chat harness over
	// the store in this process (chat.Locker; across processes, a
	// SessionLocker).
	session.Locks

	pool      *pgxpool.Pool
	now       func() time.Time
	log       *slog.Logger
	retention time.Duration
	schema    string
	// pc is the pool configuration, for the locker's own pool.
	pc *pgxpool.Config
	// replica identifies this Store among the database's users: the
	// owner of the runs it starts, alive while it holds the advisory
	// lock of that id on alive (see RunStore.UnfinishedRuns).
	replica int64
	// ownerGrace is Config.OwnerGrace (0: probe once).
	ownerGrace time.Duration
	// lockSecret keys the session locks' hash (see Locker), the same
	// for every replica of the schema.
	lockSecret []byte
	// alive is the connection holding the replica's lock; held is false
	// while keepReplica takes it again after its connection was lost.
	aliveMu sync.Mutex
	alive   *pgx.Conn
	held    atomic.Bool
	// stopKeep ends keepReplica; kept is closed once it has.
	stopKeep context.CancelFunc
	kept     chan struct{}
	// events and resumed are the NOTIFY channels of this schema's run
	// events and resume announcements: channels are per database, so
	// their names carry the schema's (deployments in other schemas of
	// the database do not hear them).
	events, resumed string
	// cancels is the NOTIFY channel of this schema's cancel requests;
	// cancelsSent counts the requests made (every 64th prunes old rows).
	cancels     string
	cancelsSent atomic.Uint64
	// watches is the NOTIFY channel of this schema's watch
	// announcements (AnnounceWatch).
	watches string
}

var (
	_ session.Store    = (*Store)(nil)
	_ session.Appender = (*Store)(nil)
	_ session.Marker   = (*Store)(nil)
	_ session.Pager    = (*Store)(nil)
)

// Open connects to the database, applies the migrations it lacks (under
// an advisory lock, so replicas starting together migrate once) and
// returns the Store. The error is categorized session_load_failed when
// the database cannot be reached.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("%w: a database URL is required", ErrInvalidConfig)
	}
	if cfg.Schema != "" && !validSchema(cfg.Schema) {
		return nil, fmt.Errorf("%w: schema %q must be 1-63 characters of [a-z0-9_], not starting with a digit", ErrInvalidConfig, cfg.Schema)
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, redact(err))
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if cfg.Schema != "" {
		pc.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	}
	s := &Store{now: cfg.Now, log: cfg.Logger, retention: cfg.MarkRetention, schema: cfg.Schema, pc: pc.Copy(), ownerGrace: cfg.OwnerGrace}
	switch {
	case s.ownerGrace == 0:
		s.ownerGrace = DefaultOwnerGrace
	case s.ownerGrace < 0:
		s.ownerGrace = 0
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.retention <= 0 {
		s.retention = session.DefaultMarkRetention
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, errcat.Wrap(errcat.SessionLoadFailed, "postgres: open", redact(err))
	}
	create := cfg.Schema
	if create == "" {
		// A schema the connection string's search_path names first is
		// created too: a deployment kept apart that way starts on an
		// empty database as one given Schema does.
		create = firstSchema(pc.ConnConfig.RuntimeParams["search_path"])
	}
	if err := s.migrate(ctx, create); err != nil {
		s.pool.Close()
		return nil, err
	}
	if err := s.claimReplica(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	var schema string
	if err := s.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		s.Close()
		return nil, errcat.Wrap(errcat.SessionLoadFailed, "postgres: open", redact(err))
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	suffix := "_" + strconv.FormatUint(h.Sum64(), 36)
	s.events, s.resumed, s.cancels, s.watches = eventsChannel+suffix, resumedChannel+suffix, cancelChannel+suffix, watchChannel+suffix
	kctx, stop := context.WithCancel(context.Background())
	s.stopKeep, s.kept = stop, make(chan struct{})
	go s.keepReplica(kctx)
	return s, nil
}

// keepReplica holds the replica's lock until ctx ends (Close). The lock
// lives as long as its connection: should the connection be lost (its
// backend terminated, a pooler or a failover closing it, the network),
// the database frees the lock, and other replicas would soon count the
// runs this one is running as a gone replica's and end them
// (run_interrupted) while they run on. So the connection is watched
// (its loss is reported at once when the server ends it, within
// replicaProbe otherwise), and the same lock is taken again on a new
// connection, with backoff, at once. Meanwhile Ping fails: the replica
// is not ready.
func (s *Store) keepReplica(ctx context.Context) {
	defer close(s.kept)
	for {
		s.aliveMu.Lock()
		conn := s.alive
		s.aliveMu.Unlock()
		err := watchConn(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		s.held.Store(false)
		s.log.WarnContext(ctx, "postgres: the connection holding the replica's lock was lost; taking the lock again", "replica", s.replica, "error", redact(err).Error())
		stale := conn.PgConn().PID() // its backend may live on, holding the lock
		_ = conn.Close(context.WithoutCancel(ctx))
		backoff := 50 * time.Millisecond
		for {
			tctx, cancel := context.WithTimeout(ctx, replicaProbe)
			conn, err = s.takeReplica(tctx, s.replica)
			if errors.Is(err, errLockTaken) {
				// A connection lost without the server seeing it (a
				// partition, a dropped NAT entry): its backend holds
				// the lock until its keepalives give up. It is this
				// replica's own: ended, it frees the lock.
				s.endStale(tctx, stale)
			}
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			s.log.WarnContext(ctx, "postgres: taking the replica's lock again failed; retrying", "replica", s.replica, "error", redact(err).Error(), "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			// Well within OwnerGrace: the others must find the lock held
			// again on their second probe.
			backoff = min(2*backoff, 500*time.Millisecond)
		}
		s.aliveMu.Lock()
		s.alive = conn
		s.aliveMu.Unlock()
		s.held.Store(true)
		s.log.InfoContext(ctx, "postgres: the replica's lock is held again", "replica", s.replica)
	}
}

// endStale ends backend pid when it still holds this replica's lock: the
// backend of the replica's own lost connection (pg_terminate_backend; a
// role may end its own backends).
func (s *Store) endStale(ctx context.Context, pid uint32) {
	if pid == 0 {
		return
	}
	_, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = $1
			AND classid::bigint = $2 AND objid::bigint = $3`, int32(pid), uint32(uint64(s.replica)>>32), uint32(s.replica))
	if err != nil {
		s.log.WarnContext(ctx, "postgres: ending the replica's stale lock connection failed", "replica", s.replica, "pid", pid, "error", redact(err).Error())
	}
}

// lockConnConfig is the configuration of the connection holding the
// replica's lock: with TCP keepalives the server sends (unless the URL
// sets them), so that a connection lost without a word is ended by the
// server within about 25 s, its lock with it, rather than the system's
// default of hours.
func (s *Store) lockConnConfig() *pgx.ConnConfig {
	cc := s.pc.ConnConfig.Copy()
	for k, v := range map[string]string{"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		if _, set := cc.RuntimeParams[k]; !set {
			cc.RuntimeParams[k] = v
		}
	}
	return cc
}

// errLockTaken: the replica's lock is held by another session.
var errLockTaken = errors.New("postgres: the replica's lock is held by another session")

// takeReplica takes the advisory lock id on a new connection.
func (s *Store) takeReplica(ctx context.Context, id int64) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.lockConnConfig())
	if err != nil {
		return nil, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, id).Scan(&ok); err != nil || !ok {
		_ = conn.Close(context.WithoutCancel(ctx))
		if err == nil {
			// Another replica's probe of it (UnfinishedRuns), for an
			// instant: the backoff's next try takes it.
			err = errLockTaken
		}
		return nil, err
	}
	return conn, nil
}

// watchConn returns once conn is lost (with why) or ctx ends. It waits
// on the connection, which reports the server ending it at once, and
// probes it every replicaProbe.
func watchConn(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, replicaProbe)
		_, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			continue // a notification nobody asked for
		case !timedOut || conn.IsClosed():
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, replicaProbe)
		_, err = conn.Exec(pctx, `SELECT 1`)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
}

// claimReplica picks the Store's replica id and holds its advisory lock
// on a connection of its own until Close: while the lock is held, the
// runs the Store started are a live replica's.
func (s *Store) claimReplica(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.lockConnConfig())
	if err != nil {
		return errcat.Wrap(errcat.SessionLoadFailed, "postgres: open", redact(err))
	}
	for {
		id := int64(rand.Uint64() >> 1)
		if id == 0 {
			continue
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, id).Scan(&ok); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return errcat.Wrap(errcat.SessionLoadFailed, "postgres: open", redact(err))
		}
		if ok {
			s.replica, s.alive = id, conn
			s.held.Store(true)
			return nil
		}
	}
}

// validSchema reports whether name is a plain lower-case identifier.
// firstSchema returns the schema search_path names first, "$user" left
// out, as PostgreSQL reads it: a quoted name as written, an unquoted one
// folded to lower case; "" when there is none, or the entry is not a
// name PostgreSQL would read.
func firstSchema(searchPath string) string {
	for entry := range strings.SplitSeq(searchPath, ",") {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "" || entry == "$user" || entry == `"$user"`:
			continue
		case len(entry) >= 2 && entry[0] == '"' && entry[len(entry)-1] == '"':
			name := strings.ReplaceAll(entry[1:len(entry)-1], `""`, `"`)
			if name == "" || strings.Count(entry[1:len(entry)-1], `"`)%2 != 0 {
				return ""
			}
			return name
		default:
			if name := strings.ToLower(entry); plainIdentifier(name) {
				return name
			}
			return ""
		}
	}
	return ""
}

// plainIdentifier reports whether s reads as an unquoted SQL identifier
// (lower case): a letter or underscore, then letters, digits,
// underscores or dollar signs, at most 63 bytes.
func plainIdentifier(s string) bool {
	if s == "" || len(s) > 63 || !(s[0] == '_' || s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func validSchema(name string) bool {
	if len(name) == 0 || len(name) > 63 || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// redact drops what a connection error may say about credentials: pgx
// errors can quote the connection string.
func redact(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "://"); i >= 0 {
		if j := strings.IndexByte(msg[i+3:], '@'); j >= 0 {
			msg = msg[:i+3] + "…" + msg[i+3+j:]
		}
	}
	return &redacted{msg: msg, unavailable: session.Unavailable(err)}
}

// redacted is a driver's error as redact leaves it: its text, and
// whether the database could not be reached (session.Unavailable), so
// that the fact outlives the redaction wherever the error goes (a lock,
// a load, a run record's read): a caller tells a database that is down
// for now (session_store_unavailable, a 503) from a bad session.
type redacted struct {
	msg         string
	unavailable bool
}

func (e *redacted) Error() string { return e.msg }

// Is reports session.ErrUnavailable for an error of a database that
// could not be reached.
func (e *redacted) Is(target error) bool { return e.unavailable && target == session.ErrUnavailable }

// Schema returns Config.Schema ("" when the store uses the connection's
// search_path).
func (s *Store) Schema() string { return s.schema }

// Close closes the pool. Operations after Close fail.
func (s *Store) Close() {
	s.pool.Close()
	if s.stopKeep != nil {
		s.stopKeep()
		<-s.kept
	}
	s.aliveMu.Lock()
	defer s.aliveMu.Unlock()
	if s.alive != nil {
		_ = s.alive.Close(context.Background()) // frees the replica's lock: its started runs are a dead replica's
		s.alive = nil
	}
	s.held.Store(false)
}

// Ping reports whether the database answers and the replica holds its
// lock (a readiness probe): while the lock's connection is being
// replaced (see Config.OwnerGrace), the replica is not ready.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return errcat.Wrap(errcat.SessionLoadFailed, "postgres: ping", redact(err))
	}
	if !s.held.Load() {
		return errcat.New(errcat.SessionLoadFailed, "postgres: ping: the replica's lock is not held (its connection was lost; taking it again)")
	}
	return nil
}

// fail categorizes a database error of op on session id.
func (s *Store) fail(ctx context.Context, op, id string, cat errcat.Category, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("postgres: %s %q: %w", op, id, ctx.Err())
	}
	cause := redact(err) // keeps session.ErrUnavailable (session_store_unavailable upstream)
	s.log.WarnContext(ctx, "postgres: operation failed", "op", op, "error", cause.Error())
	return errcat.Wrap(cat, fmt.Sprintf("postgres: %s %q", op, id), cause)
}

// migration is one numbered schema change.
type migration struct {
	version int
	stmts   []string
}

// migrations are applied in order; a released version never changes.
// Ids are TEXT COLLATE "C" so that sessions list in byte order. Times
// are UTC unix nanoseconds. Values are the JSON bytes as written
// (BYTEA): JSONB would reformat them.
var migrations = []migration{
	{1, []string{
		`CREATE TABLE sessions (
			id             TEXT COLLATE "C" PRIMARY KEY,
			schema_version TEXT   NOT NULL,
			version        BIGINT NOT NULL,
			created_at     BIGINT NOT NULL,
			updated_at     BIGINT NOT NULL)`,
		`CREATE TABLE session_fields (
			session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			field      TEXT  NOT NULL,
			value      BYTEA NOT NULL,
			PRIMARY KEY (session_id, field))`,
		`CREATE TABLE session_items (
			session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			field      TEXT   NOT NULL,
			seq        BIGINT NOT NULL,
			value      BYTEA  NOT NULL,
			PRIMARY KEY (session_id, field, seq))`,
		`CREATE TABLE session_marks (
			session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			key        TEXT   NOT NULL,
			created_at BIGINT NOT NULL,
			value      BYTEA  NOT NULL,
			PRIMARY KEY (session_id, key))`,
	}},
	{2, []string{
		// Checkpoint and paused-invocation records (CheckpointStore);
		// each filter of List has a partial index. data is the engine's
		// payload, opaque to the store.
		`CREATE TABLE checkpoint_records (
			invocation_id        TEXT COLLATE "C" NOT NULL,
			kind                 TEXT   NOT NULL,
			correlation_id       TEXT   NOT NULL,
			session_id           TEXT COLLATE "C" NOT NULL,
			signal_id            TEXT   NOT NULL,
			schema_version       TEXT   NOT NULL,
			completed_node_count BIGINT NOT NULL,
			saved_at             BIGINT NOT NULL,
			data                 BYTEA  NOT NULL,
			PRIMARY KEY (kind, invocation_id))`,
		`CREATE INDEX checkpoint_records_signal ON checkpoint_records (kind, signal_id, invocation_id) WHERE signal_id <> ''`,
		`CREATE INDEX checkpoint_records_session ON checkpoint_records (kind, session_id, invocation_id) WHERE session_id <> ''`,
		`CREATE INDEX checkpoint_records_correlation ON checkpoint_records (kind, correlation_id, invocation_id) WHERE correlation_id <> ''`,
	}},
	{3, []string{
		// Run records (RunStore): pos orders runs as they were started;
		// events are numbered from one sequence under an advisory lock,
		// so their ids follow commit order. Deleting a run deletes its
		// events.
		`CREATE TABLE runs (
			pos             BIGSERIAL PRIMARY KEY,
			tenant          TEXT COLLATE "C" NOT NULL,
			id              TEXT COLLATE "C" NOT NULL,
			session_id      TEXT COLLATE "C" NOT NULL,
			agent_id        TEXT   NOT NULL,
			parent_id       TEXT   NOT NULL,
			correlation_id  TEXT   NOT NULL,
			invocation_id   TEXT   NOT NULL,
			conversation_id TEXT   NOT NULL DEFAULT '',
			status          TEXT   NOT NULL,
			last_seq        BIGINT NOT NULL,
			started_at      BIGINT NOT NULL,
			ended_at        BIGINT NOT NULL,
			error_bucket    TEXT,
			error_category  TEXT,
			error_message   TEXT,
			output          BYTEA,
			UNIQUE (tenant, id))`,
		`CREATE INDEX runs_tenant ON runs (tenant, pos)`,
		`CREATE INDEX runs_session ON runs (tenant, session_id, pos)`,
		`CREATE INDEX runs_unfinished ON runs (pos) WHERE status = 'started'`,
		`CREATE SEQUENCE run_event_ids`,
		`CREATE TABLE run_events (
			id         BIGINT PRIMARY KEY,
			tenant     TEXT COLLATE "C" NOT NULL,
			run_id     TEXT COLLATE "C" NOT NULL,
			seq        BIGINT NOT NULL,
			session_id TEXT COLLATE "C" NOT NULL,
			type       TEXT   NOT NULL,
			time       BIGINT NOT NULL,
			data       BYTEA,
			FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id) ON DELETE CASCADE)`,
		`CREATE INDEX run_events_run ON run_events (tenant, run_id, seq)`,
		`CREATE INDEX run_events_session ON run_events (tenant, session_id, id)`,
	}},
	{4, []string{
		// The replica (Store) that started a run: its runs left started
		// are reconciled only once its advisory lock is free.
		`ALTER TABLE runs ADD COLUMN owner BIGINT NOT NULL DEFAULT 0`,
	}},
	{5, []string{
		// ResumeFeed announcements, kept for a while so that a feed whose
		// listening connection dropped reads what it missed.
		`CREATE TABLE resume_announcements (
			id         BIGSERIAL PRIMARY KEY,
			origin     TEXT   NOT NULL,
			session_id TEXT COLLATE "C" NOT NULL,
			key        TEXT   NOT NULL,
			at         BIGINT NOT NULL)`,
		`CREATE INDEX resume_announcements_at ON resume_announcements (at)`,
	}},
	{6, []string{
		// Cancel requests (RequestCancel), kept as the announcements
		// are, so that a replica whose listening connection dropped
		// reads those it missed.
		`CREATE TABLE cancel_requests (
			id     BIGSERIAL PRIMARY KEY,
			tenant TEXT COLLATE "C" NOT NULL,
			run_id TEXT COLLATE "C" NOT NULL,
			at     BIGINT NOT NULL)`,
		`CREATE INDEX cancel_requests_at ON cancel_requests (at)`,
	}},
	{7, []string{
		// The runs that resumed a suspended run, or ended its
		// suspension (ListRunsRequest.ParentID).
		`CREATE INDEX runs_parent ON runs (tenant, parent_id, pos) WHERE parent_id <> ''`,
	}},
	{8, []string{
		// Keys every replica shares (lockSecret).
		`CREATE TABLE secrets (name TEXT COLLATE "C" PRIMARY KEY, value BYTEA NOT NULL)`,
	}},
	{9, []string{
		// runtime.Run.MessageID, '' when the turn had none (a constant
		// default rewrites no row), and the runs of a message id prefix
		// (ListRunsRequest.MessageIDPrefix): a key range within the
		// tenant, in byte order (COLLATE "C"). Partial: runs without a
		// message id cost no entry.
		`ALTER TABLE runs ADD COLUMN message_id TEXT COLLATE "C" NOT NULL DEFAULT ''`,
		`CREATE INDEX runs_message ON runs (tenant, message_id, pos) WHERE message_id <> ''`,
	}},
}

// lockSecret names the key of the session locks' keyed hash (see
// Locker): made once, by the first replica to open the schema, and read
// by every replica.
const lockSecret = "session_lock_key"

// migrateLockKey is the advisory lock migrations run under.
const migrateLockKey = 0x61726d61747572 // "armatur"

// migrate applies the missing migrations in one transaction, under a
// transaction-scoped advisory lock.
func (s *Store) migrate(ctx context.Context, schema string) error {
	fail := func(err error) error {
		return errcat.Wrap(errcat.SessionLoadFailed, "postgres: migrate", redact(err))
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
		return fail(err)
	}
	if schema != "" {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fail(err)
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fail(err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fail(err)
	}
	latest := migrations[len(migrations)-1].version
	if current > latest {
		return errcat.Wrap(errcat.SessionLoadFailed, "postgres: migrate",
			fmt.Errorf("the database is at schema version %d, newer than this build's %d", current, latest))
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		for _, st := range m.stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return fail(fmt.Errorf("migration %d: %w", m.version, err))
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.version); err != nil {
			return fail(err)
		}
		s.log.InfoContext(ctx, "postgres: migrated", "version", m.version)
	}
	secret := make([]byte, 32)
	_, _ = cryptorand.Read(secret) // never fails (crypto/rand)
	if _, err := tx.Exec(ctx, `INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, lockSecret, secret); err != nil {
		return fail(err)
	}
	if err := tx.QueryRow(ctx, `SELECT value FROM secrets WHERE name = $1`, lockSecret).Scan(&s.lockSecret); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}

// Load returns the session's record (sessions §5).
func (s *Store) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	const op = "load"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if req.IfVersionNot > 0 {
		var v, updated int64
		switch err := s.pool.QueryRow(ctx, `SELECT version, updated_at FROM sessions WHERE id = $1`, id).Scan(&v, &updated); {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("postgres: %s %q: %w", op, id, session.ErrNotFound)
		case err != nil:
			return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
		case v == req.IfVersionNot && (req.IfUpdatedAt.IsZero() || nanotime.Of(req.IfUpdatedAt) == updated):
			return nil, fmt.Errorf("postgres: %s %q: %w", op, id, session.ErrNotModified)
		}
	}
	rec, err := s.loadOne(ctx, req)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, fmt.Errorf("postgres: %s %q: %w", op, id, session.ErrNotFound)
	case err != nil && errcat.Of(err) != "":
		return nil, err
	case err != nil:
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	return rec, nil
}

// loadSQL reads a session whole in one statement (one round trip, one
// snapshot): its header (kind 0), its value fields (kind 1) and its list
// fields (kind 2), each list's items joined into a JSON array in order by
// the server.
const loadSQL = `SELECT 0, '', NULL::bytea, schema_version, version, created_at, updated_at
		FROM sessions WHERE id = $1
	UNION ALL SELECT 1, field, value, '', 0, 0, 0 FROM session_fields WHERE session_id = $1
	UNION ALL SELECT 2, field, '['::bytea || string_agg(value, ','::bytea ORDER BY seq) || ']'::bytea, '', 0, 0, 0
		FROM session_items WHERE session_id = $1 GROUP BY field`

// loadTailSQL is loadSQL for a load with tail hints ($2 the fields, $3
// their maxima): the session's list fields are found by a loose index
// scan (one probe of the primary key per field, never a pass over the
// items), and each is read by a range of the primary key, limited to its
// tail when it has one (LIMIT NULL is no limit). A list's rows carry its
// first and last seq and its item count; seqs run from 0 without gaps,
// so the first is the count of items left out.
const loadTailSQL = `WITH RECURSIVE lists(field) AS (
		(SELECT field FROM session_items WHERE session_id = $1 ORDER BY field LIMIT 1)
		UNION ALL
		SELECT (SELECT i.field FROM session_items i WHERE i.session_id = $1 AND i.field > l.field ORDER BY i.field LIMIT 1)
		FROM lists l WHERE l.field IS NOT NULL)
	SELECT 0, '', NULL::bytea, schema_version, version, created_at, updated_at
		FROM sessions WHERE id = $1
	UNION ALL SELECT 1, field, value, '', 0, 0, 0 FROM session_fields WHERE session_id = $1
	UNION ALL SELECT 2, l.field, '['::bytea || string_agg(i.value, ','::bytea ORDER BY i.seq) || ']'::bytea, '',
			min(i.seq), max(i.seq), count(*)
		FROM lists l CROSS JOIN LATERAL (SELECT seq, value FROM session_items
			WHERE session_id = $1 AND field = l.field ORDER BY seq DESC
			LIMIT (SELECT t.max FROM unnest($2::text[], $3::bigint[]) AS t(field, max) WHERE t.field = l.field)) AS i
		WHERE l.field IS NOT NULL
		GROUP BY l.field`

// loadOne reads the record in one snapshot: the header, the fields, and
// the list fields as JSON arrays (their tails, for a load with tail
// hints).
func (s *Store) loadOne(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	id := req.SessionID
	rec := &session.Record{SessionID: id, State: map[string]json.RawMessage{}}
	var (
		rows pgx.Rows
		err  error
	)
	if len(req.Tail) == 0 {
		rows, err = s.pool.Query(ctx, loadSQL, id)
	} else {
		fields, maxes := make([]string, len(req.Tail)), make([]int64, len(req.Tail))
		for i, t := range req.Tail {
			fields[i], maxes[i] = t.Field, int64(t.Max)
		}
		rows, err = s.pool.Query(ctx, loadTailSQL, id, fields, maxes)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	header := false
	for rows.Next() {
		var (
			kind             int
			field, schema    string
			value            []byte
			version          int64
			created, updated int64
		)
		if err := rows.Scan(&kind, &field, &value, &schema, &version, &created, &updated); err != nil {
			return nil, err
		}
		switch kind {
		case 0:
			header = true
			rec.SchemaVersion, rec.Version = schema, version
			rec.CreatedAt, rec.UpdatedAt = nanotime.Time(created), nanotime.Time(updated)
			continue
		}
		if _, dup := rec.State[field]; dup {
			return nil, errcat.Wrap(errcat.SessionLoadFailed, "postgres: load",
				fmt.Errorf("session %q: field %q is stored both as a value and as list items", id, field))
		}
		rec.State[field] = value
		if len(req.Tail) == 0 || kind != 2 {
			continue
		}
		first, last, n := version, created, updated
		if first < 0 || last-first+1 != n || (first > 0 && req.TailMax(field) == 0) {
			return nil, errcat.Wrap(errcat.SessionLoadFailed, "postgres: load",
				fmt.Errorf("session %q: list field %q has a gap in its item numbers (%d items from %d to %d)", id, field, n, first, last))
		}
		if first > 0 {
			if rec.Skipped == nil {
				rec.Skipped = map[string]int{}
			}
			rec.Skipped[field] = int(first)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !header {
		return nil, session.ErrNotFound
	}
	return rec, nil
}

// Save writes the whole record, replacing the stored one (its marks stay).
func (s *Store) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	const op = "save"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return session.WriteResult{}, fmt.Errorf("postgres: %s %q: %w", op, id, err)
	}
	if req.ExpectedVersion == nil || *req.ExpectedVersion == 0 {
		if res, ok, err := s.createOne(ctx, req); err != nil {
			return session.WriteResult{}, s.writeErr(ctx, op, id, req.ExpectedVersion, err)
		} else if ok {
			return res, nil
		}
	}
	var res session.WriteResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		res, err = s.saveTx(ctx, tx, req)
		return err
	})
	if err != nil {
		return session.WriteResult{}, s.writeErr(ctx, op, id, req.ExpectedVersion, err)
	}
	return res, nil
}

// createOneSQL is a Save of a session that does not exist yet — a
// conversation's first turn — as one statement: the header's insert,
// skipped when the id exists, gates the fields' and marks' inserts.
const createOneSQL = `WITH created AS (
		INSERT INTO sessions (id, schema_version, version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)
		ON CONFLICT (id) DO NOTHING
		RETURNING id),
	fields AS (
		INSERT INTO session_fields (session_id, field, value)
		SELECT $1, t.field, t.value FROM created, unnest($4::text[], $5::bytea[]) AS t(field, value)),
	marks AS (
		INSERT INTO session_marks (session_id, key, created_at, value)
		SELECT $1, m.key, $3, m.value FROM created, unnest($6::text[], $7::bytea[]) AS m(key, value))
	SELECT count(*) FROM created` // data-modifying CTEs run to completion, read or not

// createOne writes req with createOneSQL; ok is false when the session
// exists (saveTx then replaces it or explains the conflict).
func (s *Store) createOne(ctx context.Context, req session.SaveRequest) (session.WriteResult, bool, error) {
	fields := make([]string, 0, len(req.State))
	values := make([][]byte, 0, len(req.State))
	for f, v := range req.State {
		fields, values = append(fields, f), append(values, v)
	}
	keys, marks := markColumns(req.Marks)
	now := nanotime.Of(s.now())
	var created int64
	if err := s.pool.QueryRow(ctx, createOneSQL, req.SessionID, req.SchemaVersion, now, fields, values, keys, marks).Scan(&created); err != nil {
		return session.WriteResult{}, false, err
	}
	if created == 0 {
		return session.WriteResult{}, false, nil
	}
	return session.WriteResult{Version: 1, UpdatedAt: nanotime.Time(now)}, true, nil
}

// markColumns returns the marks' keys and values, for unnest.
func markColumns(ms []session.Mark) ([]string, [][]byte) {
	keys, values := make([]string, len(ms)), make([][]byte, len(ms))
	for i, m := range ms {
		keys[i], values[i] = m.Key, m.Value
	}
	return keys, values
}

// saveTx is Save inside an open transaction.
func (s *Store) saveTx(ctx context.Context, tx pgx.Tx, req session.SaveRequest) (session.WriteResult, error) {
	const op = "save"
	id := req.SessionID
	now := nanotime.Of(s.now())
	var stored int64
	switch err := tx.QueryRow(ctx, `SELECT version FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&stored); {
	case errors.Is(err, pgx.ErrNoRows):
		stored = 0
	case err != nil:
		return session.WriteResult{}, err
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != stored {
		return session.WriteResult{}, conflict(op, id, *req.ExpectedVersion, stored)
	}
	version := stored + 1
	var err error
	if stored == 0 {
		// A concurrent first save of the id loses on the key.
		_, err = tx.Exec(ctx, `INSERT INTO sessions (id, schema_version, version, created_at, updated_at)
			VALUES ($1, $2, 1, $3, $3)`, id, req.SchemaVersion, now)
	} else {
		_, err = tx.Exec(ctx, `UPDATE sessions SET schema_version = $2, version = $3, updated_at = $4 WHERE id = $1`,
			id, req.SchemaVersion, version, now)
	}
	if err != nil {
		return session.WriteResult{}, err
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM session_items WHERE session_id = $1`, id)
	b.Queue(`DELETE FROM session_fields WHERE session_id = $1`, id)
	for field, v := range req.State {
		b.Queue(`INSERT INTO session_fields (session_id, field, value) VALUES ($1, $2, $3)`, id, field, []byte(v))
	}
	s.queueMarks(b, id, req.Marks, now)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return session.WriteResult{}, err
	}
	return session.WriteResult{Version: version, UpdatedAt: nanotime.Time(now)}, nil
}

// conflictErr is a conditional write that found another version.
type conflictErr struct {
	op, id          string
	expected, found int64
}

func conflict(op, id string, expected, found int64) error {
	return &conflictErr{op: op, id: id, expected: expected, found: found}
}

func (e *conflictErr) Error() string {
	return fmt.Sprintf("postgres: %s %q: expected version %d, found %d: %v", e.op, e.id, e.expected, e.found, session.ErrWriteConflict)
}

func (e *conflictErr) Unwrap() error { return session.ErrWriteConflict }

// writeErr maps a failed write transaction's error: a conflict (also a
// concurrent first save losing on the primary key, or a serialization
// failure) is session_write_conflict, anything else session_save_failed.
func (s *Store) writeErr(ctx context.Context, op, id string, expected *int64, err error) error {
	var ce *conflictErr
	if errors.As(err, &ce) {
		return ce
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "40001" || pe.Code == "40P01") {
		var want int64
		if expected != nil {
			want = *expected
		}
		return conflict(op, id, want, -1)
	}
	if errors.Is(err, session.ErrInvalidRequest) {
		return err
	}
	return s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
}

// queueMarks queues the marks' upserts: a key written again takes the
// newer value.
func (s *Store) queueMarks(b *pgx.Batch, id string, marks []session.Mark, now int64) {
	for _, m := range marks {
		b.Queue(`INSERT INTO session_marks (session_id, key, created_at, value) VALUES ($1, $2, $3, $4)
			ON CONFLICT (session_id, key) DO UPDATE SET created_at = excluded.created_at, value = excluded.value`,
			id, m.Key, now, []byte(m.Value))
	}
}

// Append writes a delta against ExpectedVersion: fields set, items
// appended to list fields, marks recorded, in one transaction whose cost
// does not grow with the stored lists (a list saved whole is split into
// item rows once, on its first append).
func (s *Store) Append(ctx context.Context, req session.AppendRequest) (session.WriteResult, error) {
	const op = "append"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return session.WriteResult{}, fmt.Errorf("postgres: %s %q: %w", op, id, err)
	}
	if res, ok, err := s.appendOne(ctx, req); err != nil {
		return session.WriteResult{}, s.writeErr(ctx, op, id, &req.ExpectedVersion, err)
	} else if ok {
		return res, nil
	}
	var res session.WriteResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		res, err = s.appendTx(ctx, tx, req)
		return err
	})
	if err != nil {
		return session.WriteResult{}, s.writeErr(ctx, op, id, &req.ExpectedVersion, err)
	}
	return res, nil
}

// appendOneSQL is the common append — items after the lists' last ones
// and marks, no field set — as one statement, so one round trip and one
// (implicit) transaction: the version bump, guarded by the expected
// version and by no appended list being stored as a value (a list saved
// whole, moved to item rows by appendTx), gates every insert; each
// field's items take the seqs after its last one, read by a backward
// key scan.
const appendOneSQL = `WITH bump AS (
		UPDATE sessions SET version = version + 1, updated_at = $1,
			schema_version = CASE WHEN $2 = '' THEN schema_version ELSE $2 END
		WHERE id = $3 AND version = $4
			AND NOT EXISTS (SELECT 1 FROM session_fields WHERE session_id = $3 AND field = ANY($5::text[]))
		RETURNING id),
	items AS (
		INSERT INTO session_items (session_id, field, seq, value)
		SELECT $3, t.field,
			coalesce((SELECT i.seq FROM session_items i WHERE i.session_id = $3 AND i.field = t.field ORDER BY i.seq DESC LIMIT 1), -1)
				+ row_number() OVER (PARTITION BY t.field ORDER BY t.ord),
			t.value
		FROM bump, unnest($5::text[], $6::bytea[]) WITH ORDINALITY AS t(field, value, ord)),
	marks AS (
		INSERT INTO session_marks (session_id, key, created_at, value)
		SELECT $3, m.key, $1, m.value FROM bump, unnest($7::text[], $8::bytea[]) AS m(key, value)
		ON CONFLICT (session_id, key) DO UPDATE SET created_at = excluded.created_at, value = excluded.value)
	SELECT count(*) FROM bump` // data-modifying CTEs run to completion, read or not

// appendOne writes req with appendOneSQL when it is the common append;
// ok is false when it did not write: a field is set, a list gets no
// items (it may need storing as an empty value), a list is stored as a
// value, or the version is not the expected one — appendTx then does
// the write or explains the conflict.
func (s *Store) appendOne(ctx context.Context, req session.AppendRequest) (session.WriteResult, bool, error) {
	if len(req.Set) > 0 {
		return session.WriteResult{}, false, nil
	}
	var fields []string
	var values [][]byte
	for field, items := range req.Append {
		if len(items) == 0 {
			return session.WriteResult{}, false, nil
		}
		for _, it := range items {
			fields = append(fields, field)
			values = append(values, it)
		}
	}
	keys, marks := markColumns(req.Marks)
	now := nanotime.Of(s.now())
	var bumped int64
	if err := s.pool.QueryRow(ctx, appendOneSQL, now, req.SchemaVersion, req.SessionID, req.ExpectedVersion,
		fields, values, keys, marks).Scan(&bumped); err != nil {
		return session.WriteResult{}, false, err
	}
	if bumped == 0 {
		return session.WriteResult{}, false, nil
	}
	return session.WriteResult{Version: req.ExpectedVersion + 1, UpdatedAt: nanotime.Time(now)}, true, nil
}

// appendTx is Append inside an open transaction.
func (s *Store) appendTx(ctx context.Context, tx pgx.Tx, req session.AppendRequest) (session.WriteResult, error) {
	const op = "append"
	id := req.SessionID
	now := nanotime.Of(s.now())
	tag, err := tx.Exec(ctx, `UPDATE sessions SET version = version + 1, updated_at = $1,
		schema_version = CASE WHEN $2 = '' THEN schema_version ELSE $2 END
		WHERE id = $3 AND version = $4`, now, req.SchemaVersion, id, req.ExpectedVersion)
	if err != nil {
		return session.WriteResult{}, err
	}
	if tag.RowsAffected() == 0 {
		var found int64
		if err := tx.QueryRow(ctx, `SELECT version FROM sessions WHERE id = $1`, id).Scan(&found); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return session.WriteResult{}, err
		}
		return session.WriteResult{}, conflict(op, id, req.ExpectedVersion, found)
	}
	b := &pgx.Batch{}
	for field, v := range req.Set {
		b.Queue(`DELETE FROM session_items WHERE session_id = $1 AND field = $2`, id, field)
		b.Queue(`INSERT INTO session_fields (session_id, field, value) VALUES ($1, $2, $3)
			ON CONFLICT (session_id, field) DO UPDATE SET value = excluded.value`, id, field, []byte(v))
	}
	for field, items := range req.Append {
		if err := s.appendItems(ctx, tx, b, id, field, items); err != nil {
			return session.WriteResult{}, err
		}
	}
	s.queueMarks(b, id, req.Marks, now)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return session.WriteResult{}, err
	}
	return session.WriteResult{Version: req.ExpectedVersion + 1, UpdatedAt: nanotime.Time(now)}, nil
}

// appendItems queues the inserts of items after the field's last one; a
// field stored as a value (a list saved whole) is moved to item rows
// first.
func (s *Store) appendItems(ctx context.Context, tx pgx.Tx, b *pgx.Batch, id, field string, items []json.RawMessage) error {
	var stored []byte
	var last *int64
	// The last seq is read by a backward scan of the primary key that
	// stops at the first row; max(seq) can be planned as a scan of every
	// item of the field (a generic plan, or statistics that predate a
	// session's growth), which grows with the history.
	err := tx.QueryRow(ctx, `SELECT
		(SELECT value FROM session_fields WHERE session_id = $1 AND field = $2),
		(SELECT seq FROM session_items WHERE session_id = $1 AND field = $2 ORDER BY seq DESC LIMIT 1)`, id, field).Scan(&stored, &last)
	if err != nil {
		return err
	}
	next := int64(0)
	if last != nil {
		next = *last + 1
	}
	if stored != nil {
		if last != nil {
			return errcat.Wrap(errcat.SessionSaveFailed, "postgres: append",
				fmt.Errorf("session %q: field %q is stored both as a value and as list items", id, field))
		}
		var old []json.RawMessage
		if err := json.Unmarshal(stored, &old); err != nil {
			return fmt.Errorf("%w: field %q is not a list: items cannot be appended to it", session.ErrInvalidRequest, field)
		}
		b.Queue(`DELETE FROM session_fields WHERE session_id = $1 AND field = $2`, id, field)
		items = append(old[:len(old):len(old)], items...)
	}
	for _, it := range items {
		b.Queue(`INSERT INTO session_items (session_id, field, seq, value) VALUES ($1, $2, $3, $4)`, id, field, next, []byte(it))
		next++
	}
	if stored != nil && len(items) == 0 {
		// An empty list moved to items has none: keep it a value.
		b.Queue(`INSERT INTO session_fields (session_id, field, value) VALUES ($1, $2, $3)`, id, field, stored)
	}
	return nil
}

// Delete removes the session with its fields, items and marks.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := session.ValidateID(id); err != nil {
		return fmt.Errorf("postgres: delete: %w", err)
	}
	// The session's checkpoint and paused records go with it, in the same
	// transaction: no signal resumes a turn of a deleted session.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM checkpoint_records WHERE session_id = $1 AND session_id <> ''`, id)
		b.Queue(`DELETE FROM sessions WHERE id = $1`, id)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.fail(ctx, "delete", id, errcat.SessionSaveFailed, err)
	}
	return nil
}

// List returns a page of summaries in ascending id (byte) order.
func (s *Store) List(ctx context.Context, req session.ListRequest) (session.ListResponse, error) {
	after, err := session.DecodePageToken(req.PageToken)
	if err != nil {
		return session.ListResponse{}, fmt.Errorf("postgres: list: %w", err)
	}
	size := req.EffectivePageSize()
	where, args := []string{"id > $1"}, []any{after}
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if req.IDPrefix != "" {
		arg(`starts_with(id, $%d)`, req.IDPrefix)
	}
	if !req.UpdatedAfter.IsZero() {
		arg(`updated_at > $%d`, nanotime.Of(req.UpdatedAfter))
	}
	if !req.CreatedAfter.IsZero() {
		arg(`created_at > $%d`, nanotime.Of(req.CreatedAfter))
	}
	if req.SchemaVersion != "" {
		arg(`schema_version = $%d`, req.SchemaVersion)
	}
	args = append(args, size+1)
	q := `SELECT id, schema_version, version, created_at, updated_at FROM sessions WHERE ` +
		strings.Join(where, " AND ") + fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return session.ListResponse{}, s.fail(ctx, "list", after, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	var resp session.ListResponse
	for rows.Next() {
		var sum session.Summary
		var created, updated int64
		if err := rows.Scan(&sum.SessionID, &sum.SchemaVersion, &sum.Version, &created, &updated); err != nil {
			return session.ListResponse{}, s.fail(ctx, "list", after, errcat.SessionLoadFailed, err)
		}
		if len(resp.Sessions) == size {
			resp.NextPageToken = session.EncodePageToken(resp.Sessions[size-1].SessionID)
			break
		}
		sum.CreatedAt, sum.UpdatedAt = nanotime.Time(created), nanotime.Time(updated)
		resp.Sessions = append(resp.Sessions, sum)
	}
	if err := rows.Err(); err != nil {
		return session.ListResponse{}, s.fail(ctx, "list", after, errcat.SessionLoadFailed, err)
	}
	return resp, nil
}

// LoadMark returns the value recorded under key in the session (an error
// wrapping session.ErrNotFound when there is none, or it expired).
func (s *Store) LoadMark(ctx context.Context, sessionID, key string) (json.RawMessage, error) {
	const op = "load mark"
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if err := session.ValidateMarkKey(key); err != nil {
		return nil, fmt.Errorf("postgres: %s %q: %w", op, sessionID, err)
	}
	var at int64
	var v []byte
	switch err := s.pool.QueryRow(ctx, `SELECT created_at, value FROM session_marks WHERE session_id = $1 AND key = $2`,
		sessionID, key).Scan(&at, &v); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("postgres: %s %q %q: %w", op, sessionID, key, session.ErrNotFound)
	case err != nil:
		return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
	}
	if nanotime.Of(s.now())-at > int64(s.retention) {
		return nil, fmt.Errorf("postgres: %s %q %q: %w (expired)", op, sessionID, key, session.ErrNotFound)
	}
	return v, nil
}
