package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

// Store is a session.Store and session.Appender backed by one SQLite
// file; [Store.Checkpoints] is the checkpoint.Store on the same file. It
// is safe for concurrent use. See the package documentation for the
// durability and concurrency contract.
type Store struct {
	// Locks serializes a session's turns across every chat harness over
	// the store in this process (chat.Locker; across processes, a
	// SessionLocker).
	session.Locks

	now    func() time.Time
	log    *slog.Logger
	path   string
	writer *sql.DB // one connection: SQLite has a single writer
	reader *sql.DB // a pool of query_only connections
	ckpt   *sql.DB // one connection for WAL checkpoints, off the writer's path
	st     statements
	mst    markStatements
	cst    checkpointStatements
	rst    runStatements
	bst    batchStmts
	heads  runHeads // of the started runs this Store wrote last
	// sole is set for a sole writer (Config.SoleWriter), whose vers
	// knows every session's version; lock holds the Store's advisory
	// lock on its file.
	sole bool
	vers versions
	lock *os.File
	wq   writeQueue
	wal  *walSyncer // DurabilityFull: the WAL fsyncs (nil: NORMAL)

	retention time.Duration // of marks
	marks     markIndex     // the live mark keys of recently used sessions
	sweepStop chan struct{} // closed by Close: stop the marks sweeper
	sweepDone chan struct{}
	runSize   runSize // estimated size of the runs and events, for pruning

	// corruptErr is the first error of an operation that found the
	// file damaged (SQLITE_CORRUPT, SQLITE_NOTADB): Ping reports it.
	corruptErr atomic.Pointer[error]

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ session.Store           = (*Store)(nil)
	_ session.Appender        = (*Store)(nil)
	_ session.Marker          = (*Store)(nil)
	_ session.VersionedMarker = (*Store)(nil)
	_ session.Pager           = (*Store)(nil)
)

// statements are prepared once on Open. Writer statements run inside
// write transactions via tx.StmtContext, which reuses the preparation
// on the single writer connection.
type statements struct {
	// writer
	bump        *sql.Stmt // conditional version bump for Append
	version     *sql.Stmt // version of a session, in a write tx
	versionAt   *sql.Stmt // version and update time of a session, on the writer
	newSession  *sql.Stmt // insert a version 1 header unless the session exists
	insField    *sql.Stmt // a field of a new session
	probe       *sql.Stmt // a field's stored value and its last item seq
	upsertField *sql.Stmt
	delField    *sql.Stmt
	delItems    *sql.Stmt // one field's items
	delAllField *sql.Stmt // all fields of a session
	delAllItems *sql.Stmt // all items of a session
	putSession  *sql.Stmt // insert or replace a header, keeping created_at
	delSession  *sql.Stmt
	delCkpts    *sql.Stmt // the checkpoint and paused records of a session
	savepoint   *sql.Stmt // a write's own savepoint inside a batch
	release     *sql.Stmt
	rollbackTo  *sql.Stmt
	// reader
	readVersion *sql.Stmt
	readHeader  *sql.Stmt
	readFields  *sql.Stmt
	readItems   *sql.Stmt
	// a tail load: the last items of one list field, and the items of
	// the fields outside the tailed ones, by ranges of field names
	readTail         *sql.Stmt
	readItemsBelow   *sql.Stmt
	readItemsBetween *sql.Stmt
	readItemsAbove   *sql.Stmt
	loadTail         *sql.Stmt // a whole load with one tail, in one statement
	loadPage         *sql.Stmt // a window of one list field and the header (page.go)
}

// Open opens (creating if needed) the database file at cfg.Path, puts it
// in WAL mode and migrates its schema to the version this code knows.
// It fails with ErrSchemaTooNew for a file written by a newer version.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", cfg.Path, err)
	}
	s := &Store{now: cfg.Now, log: cfg.Logger, path: path, retention: cfg.MarkRetention}
	s.runSize.shared = cfg.Shared
	s.marks.init()
	ok := false
	defer func() {
		if !ok {
			s.closeDBs()
		}
	}()

	if err := emptyBesideWAL(path); err != nil {
		return nil, corruptFile(path, err)
	}
	busy := cfg.BusyTimeout.Milliseconds()
	// Both levels run synchronous=NORMAL; DurabilityFull adds the store's
	// own fsync of the WAL before a write returns (walSyncer).
	synchronous := "synchronous(NORMAL)"
	if cfg.Durability == DurabilityFull {
		s.wal = newWALSyncer(path)
	}
	vfs := exclusiveVFS
	if cfg.Shared {
		vfs = ""
	}
	// Per-connection settings go in the DSN so that a connection the pool
	// reopens gets them too. _txlock=immediate makes every write
	// transaction take the write lock at BEGIN, so two processes never
	// deadlock upgrading a read lock. temp_store(2) keeps the statement
	// journal of each group-commit savepoint in memory: in a file it
	// cost a write system call for every page a turn first touched.
	s.writer, err = sql.Open("sqlite", dsn(path, vfs,
		fmt.Sprintf("busy_timeout(%d)", busy), "foreign_keys(1)", synchronous, "temp_store(2)",
		fmt.Sprintf("wal_autocheckpoint(%d)", writerAutoCheckpoint))+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	var mode string
	if err := s.writer.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
		if isCorruptFile(err) {
			return nil, corruptFile(path, err)
		}
		if isBusy(err) {
			err = errcat.Wrap(errcat.SessionLoadFailed, "", fmt.Errorf("%w: %w", ErrLocked, err))
		}
		if isCantOpen(err) {
			return nil, fmt.Errorf("sqlite: open %q: the file or its write-ahead log (%s-wal) cannot be opened for writing by this process (check the owners and modes of the file and its directory, and that the file system is not read-only): %w", path, filepath.Base(path), err)
		}
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, fmt.Errorf("sqlite: open %q: journal mode is %q, WAL could not be enabled", path, mode)
	}
	if s.lock, err = lockFile(path, cfg.SoleWriter, cfg.BusyTimeout); err != nil {
		if errors.Is(err, ErrLocked) {
			err = errcat.Wrap(errcat.SessionLoadFailed, "", err)
		}
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	s.sole = cfg.SoleWriter && soleWriterSupported
	if err := s.checkIntegrity(ctx, cfg.IntegrityCheck); err != nil {
		return nil, err
	}
	if err := migrate(ctx, s.writer, s.now, s.log); err != nil {
		if isCorruptFile(err) {
			return nil, corruptFile(path, err)
		}
		// A file this code cannot read is a load failure of every
		// record in it.
		return nil, fmt.Errorf("sqlite: open %q: %w", path, errcat.Wrap(errcat.SessionLoadFailed, "", err))
	}
	if err := s.probeWrite(ctx); err != nil {
		return nil, err
	}

	s.reader, err = sql.Open("sqlite", dsn(path, vfs,
		fmt.Sprintf("busy_timeout(%d)", busy), "foreign_keys(1)", "query_only(1)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	s.reader.SetMaxOpenConns(cfg.ReadConns)
	s.reader.SetMaxIdleConns(cfg.ReadConns)

	s.ckpt, err = sql.Open("sqlite", dsn(path, vfs,
		fmt.Sprintf("busy_timeout(%d)", busy), synchronous, "wal_autocheckpoint(0)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	s.ckpt.SetMaxOpenConns(1)
	s.ckpt.SetMaxIdleConns(1)

	if err := s.prepare(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	s.startWriter()
	s.startSweeper()
	ok = true
	return s, nil
}

// probeWrite begins a write transaction and rolls it back, writing
// nothing: a file the process may read but not write (restored by
// another user, on a file system mounted read-only) opens and reads
// well, and would fail every turn's save; it fails Open instead, saying
// why. (An up-to-date file needs no write to open.)
func (s *Store) probeWrite(ctx context.Context) error {
	tx, err := s.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock): the write lock
	if err == nil {
		// The lock is not enough: a read-only file is found at the
		// first write. This one changes nothing (the user_version it
		// sets is the one it has) and is rolled back.
		var v int
		if err = tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err == nil {
			_, err = tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v))
		}
		_ = tx.Rollback()
	}
	if err == nil {
		return nil
	}
	if isReadOnly(err) {
		return fmt.Errorf("sqlite: open %q: the file cannot be written by this process (check its owner, mode and file system): %w", s.path, err)
	}
	return fmt.Errorf("sqlite: open %q: %w", s.path, err)
}

// lockPath is the file beside the database file at path on which Stores
// hold their advisory lock (see Config.SoleWriter): path + "-flock".
func lockPath(path string) string { return path + "-flock" }

// checkIntegrity runs PRAGMA quick_check on the writer, for at most
// budget (negative: not at all): a file it finds damaged fails with
// ErrCorrupt; a check cut short by the budget is logged and passes. The
// caller's own cancellation is returned as it is.
func (s *Store) checkIntegrity(ctx context.Context, budget time.Duration) error {
	if budget < 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	start := time.Now()
	// quick_check(1) stops at the first problem: one row, "ok" or it.
	var res string
	err := s.writer.QueryRowContext(cctx, `PRAGMA quick_check(1)`).Scan(&res)
	switch {
	case err == nil && res == "ok":
		return nil
	case err == nil:
		return corruptFile(s.path, errors.New("PRAGMA quick_check: "+strings.ReplaceAll(strings.TrimSpace(res), "\n", "; ")))
	case isCorruptFile(err):
		return corruptFile(s.path, err)
	case ctx.Err() != nil:
		return fmt.Errorf("sqlite: open %q: %w", s.path, ctx.Err())
	case cctx.Err() != nil:
		s.log.InfoContext(ctx, "sqlite: the integrity check at open was cut short: only part of the file was checked",
			"path", s.path, "budget", budget, "elapsed", time.Since(start))
		return nil
	}
	return fmt.Errorf("sqlite: open %q: integrity check: %w", s.path, err)
}

// Ping reports whether the store can serve: nil, or the error that
// says why not (a readiness probe's question). It fails once the Store
// is closed, once an operation has found the file damaged
// (SQLITE_CORRUPT: every later turn would fail too; wrapping
// [ErrCorrupt]), and when the file's first page cannot be read. It
// does not check the whole file.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite: ping: %w", session.ErrClosed)
	}
	if p := s.corruptErr.Load(); p != nil {
		return fmt.Errorf("sqlite: ping %q: %w: %w", s.path, ErrCorrupt, *p)
	}
	if err := s.wal.failure(); err != nil {
		return fmt.Errorf("sqlite: ping %q: %w", s.path, err)
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		if isCorruptFile(err) {
			s.corruptErr.CompareAndSwap(nil, &err)
			return fmt.Errorf("sqlite: ping %q: %w: %w", s.path, ErrCorrupt, err)
		}
		return fmt.Errorf("sqlite: ping %q: %w", s.path, err)
	}
	return nil
}

// dsn builds a modernc.org/sqlite data source name for a file path, on
// the named VFS ("" for SQLite's default), with the given pragmas.
func dsn(path, vfs string, pragmas ...string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	if vfs != "" {
		q.Set("vfs", vfs)
	}
	u := url.URL{Path: filepath.ToSlash(path)}
	return "file:" + u.EscapedPath() + "?" + q.Encode()
}

func (s *Store) prepare(ctx context.Context) error {
	var err error
	p := func(db *sql.DB, query string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.PrepareContext(ctx, query)
		return st
	}
	w, r := s.writer, s.reader
	s.st = statements{
		bump: p(w, `UPDATE sessions SET version = version + 1, updated_at = ?1,
			schema_version = CASE WHEN ?2 = '' THEN schema_version ELSE ?2 END
			WHERE id = ?3 AND version = ?4`),
		version:   p(w, `SELECT version FROM sessions WHERE id = ?`),
		versionAt: p(w, `SELECT version, updated_at FROM sessions WHERE id = ?`),
		newSession: p(w, `INSERT INTO sessions (id, schema_version, version, created_at, updated_at)
			VALUES (?1, ?2, 1, ?3, ?3) ON CONFLICT (id) DO NOTHING`),
		insField: p(w, `INSERT INTO session_fields (session_id, field, value) VALUES (?, ?, ?)`),
		probe: p(w, `SELECT
			(SELECT value FROM session_fields WHERE session_id = ?1 AND field = ?2),
			(SELECT max(seq) FROM session_items WHERE session_id = ?1 AND field = ?2)`),
		upsertField: p(w, `INSERT INTO session_fields (session_id, field, value) VALUES (?, ?, ?)
			ON CONFLICT (session_id, field) DO UPDATE SET value = excluded.value`),
		delField:    p(w, `DELETE FROM session_fields WHERE session_id = ? AND field = ?`),
		delItems:    p(w, `DELETE FROM session_items WHERE session_id = ? AND field = ?`),
		delAllField: p(w, `DELETE FROM session_fields WHERE session_id = ?`),
		delAllItems: p(w, `DELETE FROM session_items WHERE session_id = ?`),
		putSession: p(w, `INSERT INTO sessions (id, schema_version, version, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, ?4)
			ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version,
				version = excluded.version, updated_at = excluded.updated_at`),
		delSession:  p(w, `DELETE FROM sessions WHERE id = ?`),
		delCkpts:    p(w, `DELETE FROM checkpoint_records WHERE session_id = ?`),
		savepoint:   p(w, `SAVEPOINT write`),
		release:     p(w, `RELEASE write`),
		rollbackTo:  p(w, `ROLLBACK TO write`),
		readVersion: p(r, `SELECT version, updated_at FROM sessions WHERE id = ?`),
		readHeader:  p(r, `SELECT schema_version, version, created_at, updated_at FROM sessions WHERE id = ?`),
		readFields:  p(r, `SELECT field, value FROM session_fields WHERE session_id = ?`),
		readItems:   p(r, `SELECT field, value FROM session_items WHERE session_id = ? ORDER BY field, seq`),
		// The primary key (session_id, field, seq) answers max(seq) with
		// one probe and the tail with a range: O(max), not O(list).
		readTail: p(r, `SELECT seq, value FROM session_items WHERE session_id = ?1 AND field = ?2
			AND seq > (SELECT max(seq) FROM session_items WHERE session_id = ?1 AND field = ?2) - ?3
			ORDER BY seq`),
		readItemsBelow: p(r, `SELECT field, value FROM session_items WHERE session_id = ?1 AND field < ?2
			ORDER BY field, seq`),
		readItemsBetween: p(r, `SELECT field, value FROM session_items WHERE session_id = ?1 AND field > ?2 AND field < ?3
			ORDER BY field, seq`),
		readItemsAbove: p(r, `SELECT field, value FROM session_items WHERE session_id = ?1 AND field > ?2
			ORDER BY field, seq`),
		loadTail: p(r, loadTailSQL),
		loadPage: p(r, loadPageSQL),
	}
	s.rst = s.prepareRuns(p)
	s.mst = s.prepareMarks(p)
	s.cst = checkpointStatements{
		upsert: p(w, cpUpsertSQL),
		take:   p(w, cpTakeSQL),
		del:    p(w, cpDeleteSQL),
		load:   p(r, cpLoadSQL),

		bySessionR: p(r, cpBySessionSQL),
		bySessionW: p(w, cpBySessionSQL),
	}
	return err
}

// Close closes the database. It is idempotent; operations after Close
// fail with session.ErrClosed. Close first commits every write already
// queued (their callers get their results as usual); if ctx ends before
// the queue is drained, writes not yet begun fail with
// session.ErrClosed instead. Close waits for in-flight operations. ctx
// also bounds the final "PRAGMA optimize" housekeeping.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.sweepStop != nil {
			close(s.sweepStop)
			<-s.sweepDone
		}
		s.stopWriter(ctx)
		s.closed.Store(true)
		if err := s.wal.close(); err != nil {
			s.log.WarnContext(ctx, "sqlite: closing the WAL file failed", "path", s.path, "err", err)
		}
		if _, err := s.writer.ExecContext(ctx, `PRAGMA optimize`); err != nil {
			s.log.WarnContext(ctx, "sqlite: optimize on close failed", "path", s.path, "err", err)
		}
		if err := s.closeDBs(); err != nil {
			s.closeErr = fmt.Errorf("sqlite: close %q: %w", s.path, err)
		}
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	// Statements close with their DB.
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	if s.lock != nil { // last: the file is no longer written
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(errs...)
}

// Load returns the record. With IfVersionNot set it first reads only the
// version and returns session.ErrNotModified when it matches. State,
// header and list items are read in one read transaction, so the record
// is a consistent snapshot.
func (s *Store) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	const op = "load"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	if len(req.Tail) == 1 && req.IfVersionNot == 0 {
		// A cold load by its tail (a session outside the engine's
		// cache): one statement.
		return s.loadByTail(ctx, req)
	}
	changed := false // a sole writer knows the stored version differs
	if s.sole && req.IfVersionNot > 0 {
		if v, ok := s.vers.get(id); ok {
			if v.is(req) {
				return nil, errNotModified // a sole writer knows: no query
			}
			changed = true
		}
	}
	if !changed {
		// One small autocommit read first: it answers a warm turn's
		// revalidation (not modified) and a new session's miss without a
		// read transaction; only a record to read whole takes one.
		v, err := s.readVersion(ctx, id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrNotFound)
		case err != nil:
			return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
		case req.IfVersionNot > 0 && v.is(req):
			return nil, errNotModified // the hot path of a warm turn: no allocation
		}
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to commit
	rec, err := s.loadTx(ctx, tx, req)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// readVersion reads a session's version: on the write connection when
// the writer is idle (its page cache survives its own commits, while a
// reader's is dropped after every commit and read again from the file),
// on the reader pool otherwise.
func (s *Store) readVersion(ctx context.Context, id string) (verStamp, error) {
	var v verStamp
	stmt, release := s.warm(s.st.readVersion, s.st.versionAt)
	defer release()
	err := stmt.QueryRowContext(ctx, id).Scan(&v.version, &v.updated)
	return v, err
}

func (s *Store) loadTx(ctx context.Context, tx *sql.Tx, req session.LoadRequest) (*session.Record, error) {
	const op = "load"
	id := req.SessionID
	rec := &session.Record{SessionID: id}
	var created, updated int64
	switch err := tx.StmtContext(ctx, s.st.readHeader).QueryRowContext(ctx, id).
		Scan(&rec.SchemaVersion, &rec.Version, &created, &updated); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrNotFound)
	case err != nil:
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	if rec.Version < 1 {
		return nil, corrupt(op, id, errcat.SessionLoadFailed, "version %d", rec.Version)
	}
	if req.IfVersionNot > 0 && (verStamp{rec.Version, updated}).is(req) {
		return nil, errNotModified
	}
	rec.CreatedAt, rec.UpdatedAt = nanotime.Time(created), nanotime.Time(updated)
	rec.State = map[string]json.RawMessage{}

	rows, err := tx.StmtContext(ctx, s.st.readFields).QueryContext(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	for rows.Next() {
		var field string
		var value []byte
		if err := rows.Scan(&field, &value); err != nil {
			return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
		}
		if !jsonvalid.Valid(value) {
			return nil, corrupt(op, id, errcat.SessionLoadFailed, "field %q is not valid JSON", field)
		}
		rec.State[field] = value
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	_ = rows.Close()

	if len(req.Tail) == 0 {
		lists := listReader{rec: rec, op: op}
		if err := lists.read(ctx, s, tx, s.st.readItems, id); err != nil {
			return nil, err
		}
		return rec, nil
	}
	return s.loadTailTx(ctx, tx, req, rec)
}

// loadTailTx reads the list items of a load with tail hints: each tailed
// field's last items by a range on seq, and the other fields' items
// whole, by the ranges of field names between the tailed ones. Item
// seqs of a field run from 0 without gaps (Append numbers them so and
// only Save or Set, which delete them all, remove any), so the first seq
// of a tail is the count of items before it.
func (s *Store) loadTailTx(ctx context.Context, tx *sql.Tx, req session.LoadRequest, rec *session.Record) (*session.Record, error) {
	const op = "load"
	id := req.SessionID
	tails := slices.Clone(req.Tail)
	slices.SortFunc(tails, func(a, b session.ListTail) int { return strings.Compare(a.Field, b.Field) })
	lists := listReader{rec: rec, op: op}
	for i, t := range tails {
		var err error
		if i == 0 {
			err = lists.read(ctx, s, tx, s.st.readItemsBelow, id, t.Field)
		} else {
			err = lists.read(ctx, s, tx, s.st.readItemsBetween, id, tails[i-1].Field, t.Field)
		}
		if err != nil {
			return nil, err
		}
		if err := s.readTail(ctx, tx, rec, t); err != nil {
			return nil, err
		}
	}
	if err := lists.read(ctx, s, tx, s.st.readItemsAbove, id, tails[len(tails)-1].Field); err != nil {
		return nil, err
	}
	return rec, nil
}

// loadTailSQL is a load with one tail hint as one statement (one
// snapshot, no read transaction): the header (k 0), the fields (k 1),
// the items of the lists named before the tailed one (k 2), the tail (k
// 3) and the items of the lists after it (k 4), each a range of a
// primary key, so its cost does not grow with the tailed list. It has
// no ORDER BY, which SQLite would answer with a sort per
// arm: SQLite runs UNION ALL arms in order and each arm's index search
// yields its rows in key order, and loadByTail checks that order on
// every row, reading the record the long way if it ever differs.
const loadTailSQL = `SELECT 0, schema_version, version, created_at, updated_at, NULL
		FROM sessions WHERE id = ?1
	UNION ALL SELECT 1, field, 0, 0, 0, value FROM session_fields WHERE session_id = ?1
	UNION ALL SELECT 2, field, seq, 0, 0, value FROM session_items WHERE session_id = ?1 AND field < ?2
	UNION ALL SELECT 3, field, seq, 0, 0, value FROM session_items WHERE session_id = ?1 AND field = ?2
		AND seq > (SELECT max(seq) FROM session_items WHERE session_id = ?1 AND field = ?2) - ?3
	UNION ALL SELECT 4, field, seq, 0, 0, value FROM session_items WHERE session_id = ?1 AND field > ?2`

// errUnordered reports that loadTailSQL's rows came out of the order
// loadByTail reads them in.
var errUnordered = errors.New("sqlite: load: rows out of order")

// loadByTail is a load with one tail hint and no version to compare, in
// one statement (loadTailSQL). It checks what loadTx checks. When the
// rows are not in the order it expects (the header first, then fields,
// then items by field and seq), it reads the record as loadTx does.
func (s *Store) loadByTail(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	rec, err := s.readByTail(ctx, req)
	if errors.Is(err, errUnordered) {
		tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, s.fail(ctx, "load", req.SessionID, errcat.SessionLoadFailed, err)
		}
		defer func() { _ = tx.Rollback() }() // read-only: nothing to commit
		return s.loadTx(ctx, tx, req)
	}
	return rec, err
}

func (s *Store) readByTail(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	const op = "load"
	id, t := req.SessionID, req.Tail[0]
	rows, err := s.st.loadTail.QueryContext(ctx, id, t.Field, t.Max)
	if err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	var (
		rec      *session.Record
		k, lastK int
		name     sql.RawBytes // no allocation per row
		seq      int64
		c, u     int64
		value    sql.RawBytes
		cur      string // the list being read
		lastSeq  int64
		buf      []byte
		open     bool
		first    int64 // the first tail item's seq
		n        int64 // tail items read
	)
	flush := func() {
		if open {
			rec.State[cur] = append(buf, ']')
			open = false
		}
	}
	for rows.Next() {
		if err := rows.Scan(&k, &name, &seq, &c, &u, &value); err != nil {
			return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
		}
		if (rec == nil) != (k == 0) || k < lastK {
			return nil, errUnordered
		}
		lastK = k
		switch k {
		case 0:
			if seq < 1 {
				return nil, corrupt(op, id, errcat.SessionLoadFailed, "version %d", seq)
			}
			rec = &session.Record{SessionID: id, SchemaVersion: string(name), Version: seq,
				CreatedAt: nanotime.Time(c), UpdatedAt: nanotime.Time(u), State: map[string]json.RawMessage{}}
			continue
		case 1:
			if !jsonvalid.Valid(value) {
				return nil, corrupt(op, id, errcat.SessionLoadFailed, "field %q is not valid JSON", name)
			}
			rec.State[string(name)] = bytes.Clone(value)
			continue
		}
		if !jsonvalid.Valid(value) {
			return nil, corrupt(op, id, errcat.SessionLoadFailed, "an item of list field %q is not valid JSON", name)
		}
		if open && string(name) == cur {
			if seq <= lastSeq {
				return nil, errUnordered
			}
			buf = append(buf, ',')
		} else {
			if open && string(name) < cur {
				return nil, errUnordered
			}
			flush()
			cur, open = string(name), true
			if _, dup := rec.State[cur]; dup {
				return nil, corrupt(op, id, errcat.SessionLoadFailed, "field %q is stored both as a value and as list items", cur)
			}
			size := 64 + len(value)
			if k == 3 {
				first, size = seq, 64+len(value)*t.Max
			}
			buf = append(make([]byte, 0, size), '[')
		}
		if k == 3 {
			if seq != first+n || first < 0 {
				return nil, corrupt(op, id, errcat.SessionLoadFailed, "list field %q has a gap in its item numbers at %d", t.Field, seq)
			}
			n++
		}
		lastSeq = seq
		buf = append(buf, value...)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	if rec == nil {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrNotFound)
	}
	flush()
	if first > 0 {
		rec.Skipped = map[string]int{t.Field: int(first)}
	}
	return rec, nil
}

// readTail reads the last t.Max items of list field t.Field into rec,
// recording the items before them in rec.Skipped. A field with no item
// rows (stored as a value, or missing) is left as readFields found it.
func (s *Store) readTail(ctx context.Context, tx *sql.Tx, rec *session.Record, t session.ListTail) error {
	const op = "load"
	id := rec.SessionID
	rows, err := tx.StmtContext(ctx, s.st.readTail).QueryContext(ctx, id, t.Field, t.Max)
	if err != nil {
		return s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	var (
		buf   []byte
		first int64
		n     int64
		seq   int64
		value sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &value); err != nil {
			return s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
		}
		if !jsonvalid.Valid(value) {
			return corrupt(op, id, errcat.SessionLoadFailed, "an item of list field %q is not valid JSON", t.Field)
		}
		if n == 0 {
			if _, dup := rec.State[t.Field]; dup {
				return corrupt(op, id, errcat.SessionLoadFailed, "field %q is stored both as a value and as list items", t.Field)
			}
			first = seq
			buf = make([]byte, 0, 64+len(value)*t.Max)
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		if seq != first+n || first < 0 {
			return corrupt(op, id, errcat.SessionLoadFailed, "list field %q has a gap in its item numbers at %d", t.Field, seq)
		}
		buf = append(buf, value...)
		n++
	}
	if err := rows.Err(); err != nil {
		return s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	if n == 0 {
		return nil
	}
	rec.State[t.Field] = append(buf, ']')
	if first > 0 {
		if rec.Skipped == nil {
			rec.Skipped = map[string]int{}
		}
		rec.Skipped[t.Field] = int(first)
	}
	return nil
}

// listReader gathers list items, read in (field, seq) order, into their
// fields' JSON arrays.
type listReader struct {
	rec *session.Record
	op  string
}

// read runs stmt (a query of field, value rows ordered by field, seq)
// and adds each field's items to the record as one JSON array.
func (l *listReader) read(ctx context.Context, s *Store, tx *sql.Tx, stmt *sql.Stmt, args ...any) error {
	rec, op, id := l.rec, l.op, l.rec.SessionID
	items, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
	if err != nil {
		return s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer items.Close()
	var (
		cur          string
		buf          []byte
		open         bool
		field, value sql.RawBytes // no allocation per row
	)
	flush := func() {
		if open {
			rec.State[cur] = append(buf, ']')
		}
	}
	for items.Next() {
		if err := items.Scan(&field, &value); err != nil {
			return s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
		}
		if !jsonvalid.Valid(value) {
			return corrupt(op, id, errcat.SessionLoadFailed, "an item of list field %q is not valid JSON", field)
		}
		if !open || string(field) != cur {
			flush()
			cur, open = string(field), true
			if _, dup := rec.State[cur]; dup {
				return corrupt(op, id, errcat.SessionLoadFailed, "field %q is stored both as a value and as list items", cur)
			}
			buf = make([]byte, 0, 64+len(value))
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, value...)
	}
	if err := items.Err(); err != nil {
		return s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	flush()
	return nil
}

// Save replaces the record atomically: its fields and list items are
// deleted and the new fields written; the version is incremented and
// created_at kept. It returns once the write committed (see the
// package documentation on group commit).
func (s *Store) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	const op = "save"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return session.WriteResult{}, fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	var res session.WriteResult
	if err := s.write(ctx, op, id, errcat.SessionSaveFailed, func(ctx context.Context, tx *sql.Tx) (err error) {
		res, err = s.saveTx(ctx, tx, req)
		return err
	}); err != nil {
		return session.WriteResult{}, err
	}
	s.indexWrite(&req, nil, res, appendOut{})
	return res, nil
}

// indexWrite brings the mark index up to a committed session write, a
// save or an append (out is what appendTx reported), as Save and
// Append do and as the atomic suspension writes must too: an index left
// behind the session's version is read again whole (every mark of the
// session) by the next LoadMark.
func (s *Store) indexWrite(save *session.SaveRequest, app *session.AppendRequest, res session.WriteResult, out appendOut) {
	switch {
	case save != nil && res.Version == 1:
		// A new session: its marks are all it has.
		at := nanotime.Of(res.UpdatedAt)
		e := &markEntry{id: save.SessionID, version: 1, created: at, keys: make(map[string]markRef, len(save.Marks))}
		for _, m := range save.Marks {
			e.keys[m.Key] = markRef{at: at}
			e.size += len(m.Key) + markEntryOverhead
		}
		s.marks.put(e)
	case save != nil:
		s.marks.drop(save.SessionID)
	case out.moved:
		// A replaced list's marks moved to session_marks. (Setting a
		// field that held no marked item, as a turn's scalar fields,
		// moves none: the index advances.)
		s.marks.drop(app.SessionID)
	default:
		s.marks.committed(app.SessionID, app.ExpectedVersion, app.Marks, out.row, nanotime.Of(res.UpdatedAt))
	}
}

// saveTx is Save's work inside an open write transaction.
func (s *Store) saveTx(ctx context.Context, tx *sql.Tx, req session.SaveRequest) (session.WriteResult, error) {
	const op = "save"
	id := req.SessionID
	now := nanotime.Of(s.now())
	// A new session (a conversation's first turn) is created by one
	// insert; only an existing one has a header to read and old rows to
	// delete. A failed write is rolled back whole, insert included.
	created, err := tx.StmtContext(ctx, s.st.newSession).ExecContext(ctx, id, req.SchemaVersion, now)
	if err != nil {
		return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	}
	n, err := created.RowsAffected()
	if err != nil {
		return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	}
	var version int64
	if n == 0 {
		if err := tx.StmtContext(ctx, s.st.version).QueryRowContext(ctx, id).Scan(&version); err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != version {
		return session.WriteResult{}, fmt.Errorf("sqlite: %s %q: %w: stored version %d, expected %d",
			op, id, session.ErrWriteConflict, version, *req.ExpectedVersion)
	}
	fieldStmt := s.st.insField
	if n == 0 {
		// The item rows go: the marks they carry stay.
		if _, err := s.rescueMarksTx(ctx, tx, id, ""); err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
		for _, st := range []*sql.Stmt{s.st.delAllField, s.st.delAllItems} {
			if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, id); err != nil {
				return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
			}
		}
		if _, err := tx.StmtContext(ctx, s.st.putSession).ExecContext(ctx, id, req.SchemaVersion, version+1, now); err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
		fieldStmt = s.st.upsertField
	}
	if len(req.State) > 0 {
		ins := tx.StmtContext(ctx, fieldStmt)
		for _, k := range sortedKeys(req.State) {
			if _, err := ins.ExecContext(ctx, id, k, []byte(req.State[k])); err != nil {
				return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
			}
		}
	}
	// A Save writes no item rows: its marks get rows of their own.
	if err := s.putMarkRowsTx(ctx, tx, id, req.Marks, now); err != nil {
		return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	}
	if s.sole {
		s.vers.note(id, verStamp{version + 1, now})
	}
	return session.WriteResult{Version: version + 1, UpdatedAt: nanotime.Time(now)}, nil
}

// Append applies a delta atomically, committed before it returns, at a
// cost independent of the session's history: a conditional version bump, one index probe per
// appended field, one row per appended item and one per set field.
func (s *Store) Append(ctx context.Context, req session.AppendRequest) (session.WriteResult, error) {
	const op = "append"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return session.WriteResult{}, fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	var res session.WriteResult
	var out appendOut
	if err := s.write(ctx, op, id, errcat.SessionSaveFailed, func(ctx context.Context, tx *sql.Tx) (err error) {
		out = appendOut{}
		res, err = s.appendTx(ctx, tx, req, &out)
		return err
	}); err != nil {
		return session.WriteResult{}, err
	}
	s.indexWrite(nil, &req, res, out)
	return res, nil
}

// sessionWriteTx runs a save or an append inside an open transaction;
// out (reset first) is what an append reports for indexWrite.
func (s *Store) sessionWriteTx(ctx context.Context, tx *sql.Tx, save *session.SaveRequest, app *session.AppendRequest, out *appendOut) (session.WriteResult, error) {
	*out = appendOut{}
	if save != nil {
		return s.saveTx(ctx, tx, *save)
	}
	return s.appendTx(ctx, tx, *app, out)
}

// appendOut is what appendTx reports besides its result: the item row
// carrying the write's marks, and whether replacing a field moved marks
// to session_marks.
type appendOut struct {
	row   int64
	moved bool
}

// appendTx is Append's work inside an open write transaction. The
// write's marks ride on its last item row, whose rowid goes to out.row
// (when out is not nil).
func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, req session.AppendRequest, out *appendOut) (session.WriteResult, error) {
	const op = "append"
	id := req.SessionID
	now := nanotime.Of(s.now())
	res, err := tx.StmtContext(ctx, s.st.bump).ExecContext(ctx, now, req.SchemaVersion, id, req.ExpectedVersion)
	if err != nil {
		return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	} else if n == 0 {
		return session.WriteResult{}, s.conflict(ctx, tx, op, id, req.ExpectedVersion)
	}

	fields := sortedKeys(req.Append)
	ins := itemWriter{tx: tx, id: id}
	for _, field := range fields {
		items := req.Append[field]
		var stored any
		var last sql.NullInt64
		if err := tx.StmtContext(ctx, s.st.probe).QueryRowContext(ctx, id, field).Scan(&stored, &last); err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
		next := int64(0)
		switch {
		case stored != nil && last.Valid:
			return session.WriteResult{}, corrupt(op, id, errcat.SessionSaveFailed,
				"field %q is stored both as a value and as list items", field)
		case stored != nil:
			// A list written by Save: validate it, and move its items to
			// session_items once, when the first items are appended.
			b, _ := stored.([]byte)
			old, err := splitArray(b)
			if err != nil {
				return session.WriteResult{}, fmt.Errorf("sqlite: %s %q: %w: field %q is not a list",
					op, id, session.ErrInvalidRequest, field)
			}
			if len(items) == 0 {
				if old == nil { // null is the empty list: store it as one
					if _, err := tx.StmtContext(ctx, s.st.upsertField).ExecContext(ctx, id, field, []byte("[]")); err != nil {
						return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
					}
				}
				continue
			}
			if _, err := tx.StmtContext(ctx, s.st.delField).ExecContext(ctx, id, field); err != nil {
				return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
			}
			for _, it := range old {
				if err := ins.add(ctx, s, field, next, []byte(it)); err != nil {
					return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
				}
				next++
			}
		case last.Valid:
			next = last.Int64 + 1
		case len(items) == 0:
			// A new, empty list: it has no item rows, so store it as a value.
			if _, err := tx.StmtContext(ctx, s.st.upsertField).ExecContext(ctx, id, field, []byte("[]")); err != nil {
				return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
			}
			continue
		}
		for _, it := range items {
			if err := ins.add(ctx, s, field, next, []byte(it)); err != nil {
				return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
			}
			next++
		}
	}
	r, err := ins.finish(ctx, s, req.Marks, now)
	if err != nil {
		return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	}
	if out != nil {
		out.row = r
	}
	for _, field := range sortedKeys(req.Set) {
		// A replaced list's item rows go: the marks they carry stay.
		moved, err := s.rescueMarksTx(ctx, tx, id, field)
		if err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
		if out != nil && moved {
			out.moved = true
		}
		if _, err := tx.StmtContext(ctx, s.st.delItems).ExecContext(ctx, id, field); err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
		if _, err := tx.StmtContext(ctx, s.st.upsertField).ExecContext(ctx, id, field, []byte(req.Set[field])); err != nil {
			return session.WriteResult{}, s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
		}
	}
	if s.sole {
		s.vers.note(id, verStamp{req.ExpectedVersion + 1, now})
	}
	return session.WriteResult{Version: req.ExpectedVersion + 1, UpdatedAt: nanotime.Time(now)}, nil
}

// conflict explains a failed conditional bump: the session is missing or
// at another version.
func (s *Store) conflict(ctx context.Context, tx *sql.Tx, op, id string, expected int64) error {
	var v int64
	switch err := tx.StmtContext(ctx, s.st.version).QueryRowContext(ctx, id).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlite: %s %q: %w: session does not exist (expected version %d)",
			op, id, session.ErrWriteConflict, expected)
	case err != nil:
		return s.fail(ctx, op, id, errcat.SessionSaveFailed, err)
	}
	return fmt.Errorf("sqlite: %s %q: %w: stored version %d, expected %d",
		op, id, session.ErrWriteConflict, v, expected)
}

// Delete removes the record, its fields, its items, its marks and the
// checkpoint and paused-invocation records of the session, in one
// transaction: a deleted session leaves nothing a signal could resume or
// a retransmission could replay. Deleting a missing record succeeds.
func (s *Store) Delete(ctx context.Context, sessionID string) error {
	const op = "delete"
	if err := session.ValidateID(sessionID); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer s.marks.drop(sessionID)
	return s.write(ctx, op, sessionID, errcat.SessionSaveFailed, func(ctx context.Context, tx *sql.Tx) error {
		if s.sole {
			s.vers.note(sessionID, verStamp{})
		}
		for _, st := range []*sql.Stmt{s.st.delSession, s.st.delCkpts} {
			if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, sessionID); err != nil {
				return s.fail(ctx, op, sessionID, errcat.SessionSaveFailed, err)
			}
		}
		return nil
	})
}

// List returns a page of summaries in ascending id order, paged by id
// (keyset pagination: a page token is the last id of the previous page).
func (s *Store) List(ctx context.Context, req session.ListRequest) (session.ListResponse, error) {
	const op = "list"
	after, err := session.DecodePageToken(req.PageToken)
	if err != nil {
		return session.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if s.closed.Load() {
		return session.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return session.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	var (
		where []string
		args  []any
	)
	if after != "" {
		where, args = append(where, "id > ?"), append(args, after)
	}
	if req.IDPrefix != "" {
		// A range on the primary key instead of LIKE: exact for ids
		// containing % or _, and it uses the index.
		where, args = append(where, "id >= ?"), append(args, req.IDPrefix)
		if succ, ok := prefixSuccessor(req.IDPrefix); ok {
			where, args = append(where, "id < ?"), append(args, succ)
		}
	}
	if !req.UpdatedAfter.IsZero() {
		where, args = append(where, "updated_at > ?"), append(args, nanotime.Of(req.UpdatedAfter))
	}
	if !req.CreatedAfter.IsZero() {
		where, args = append(where, "created_at > ?"), append(args, nanotime.Of(req.CreatedAfter))
	}
	if req.SchemaVersion != "" {
		where, args = append(where, "schema_version = ?"), append(args, req.SchemaVersion)
	}
	size := req.EffectivePageSize()
	q := `SELECT id, schema_version, version, created_at, updated_at FROM sessions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id LIMIT ?"
	args = append(args, size+1)

	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return session.ListResponse{}, s.fail(ctx, op, req.IDPrefix, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	var resp session.ListResponse
	for rows.Next() {
		var sum session.Summary
		var created, updated int64
		if err := rows.Scan(&sum.SessionID, &sum.SchemaVersion, &sum.Version, &created, &updated); err != nil {
			return session.ListResponse{}, s.fail(ctx, op, req.IDPrefix, errcat.SessionLoadFailed, err)
		}
		if sum.Version < 1 {
			return session.ListResponse{}, corrupt(op, sum.SessionID, errcat.SessionLoadFailed, "version %d", sum.Version)
		}
		if len(resp.Sessions) == size {
			resp.NextPageToken = session.EncodePageToken(resp.Sessions[size-1].SessionID)
			break
		}
		sum.CreatedAt, sum.UpdatedAt = nanotime.Time(created), nanotime.Time(updated)
		resp.Sessions = append(resp.Sessions, sum)
	}
	if err := rows.Err(); err != nil {
		return session.ListResponse{}, s.fail(ctx, op, req.IDPrefix, errcat.SessionLoadFailed, err)
	}
	return resp, nil
}

// prefixSuccessor returns the smallest string greater than every string
// with the given prefix, in byte order; false when there is none (the
// prefix is all 0xff bytes).
func prefixSuccessor(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 1 { // the common case: no allocation for sorting
		for k := range m {
			return []string{k}
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// splitArray decodes a stored list value into its items; null is the
// empty list (as in session.MemoryStore).
func splitArray(v []byte) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, err
	}
	return items, nil
}
