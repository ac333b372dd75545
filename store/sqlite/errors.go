package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// Sentinel errors. Check with errors.Is. Store operations also wrap the
// session sentinels (session.ErrNotFound, session.ErrWriteConflict, ...)
// and the errcat categories session_load_failed and session_save_failed;
// CheckpointStore operations wrap checkpoint.ErrNotFound,
// checkpoint.ErrInvalidRequest and the categories checkpoint_save_failed
// and checkpoint_record_invalid.
var (
	// ErrInvalidConfig: Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("sqlite: invalid config")
	// ErrCorrupt: a stored row cannot be decoded (a value that is not
	// valid JSON, an impossible version, a field stored both as a value
	// and as list items, a checkpoint record of an unknown kind or with
	// an invalid invocation id, a run event chunk that does not decode). The session operations wrap it in
	// category session_load_failed, the checkpoint operations in
	// checkpoint_record_invalid. Open wraps it, in session_load_failed,
	// for a file that is corrupt itself: not a database, or damaged
	// pages (SQLite's SQLITE_NOTADB and SQLITE_CORRUPT, or a problem
	// PRAGMA quick_check reports; see Config.IntegrityCheck).
	ErrCorrupt = errors.New("sqlite: corrupt stored data")
	// ErrSchemaTooNew: the database file was migrated by a newer version
	// of this package than the running one; Open refuses it rather than
	// guess at a layout it does not know. Open wraps it (and
	// ErrMigration) in category session_load_failed.
	ErrSchemaTooNew = errors.New("sqlite: database schema is newer than this code")
	// ErrMigration: applying the schema migrations failed, or the
	// recorded migrations are inconsistent.
	ErrMigration = errors.New("sqlite: schema migration failed")
	// ErrLocked: Open found the file held by another process: a Store
	// that owns its file (the default; see Config.Shared), or a process
	// holding a lock longer than Config.BusyTimeout. Open wraps it in
	// category session_load_failed.
	ErrLocked = errors.New("sqlite: database file is in use by another process")
)

// errNotModified is what a conditional Load returns when the caller's
// copy is current. It is never modified.
var errNotModified = fmt.Errorf("sqlite: load: %w", session.ErrNotModified)

// fail wraps an error from the database for operation op on session id.
// A closed store yields session.ErrClosed; a done context yields the
// context's error (uncategorized, so callers see the cancellation, with
// the driver's error as text); anything else is categorized cat, or only
// wrapped when cat is "".
func (s *Store) fail(ctx context.Context, op, id string, cat errcat.Category, err error) error {
	if isCorruptFile(err) {
		s.corruptErr.CompareAndSwap(nil, &err)
	}
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrClosed)
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
		}
		return fmt.Errorf("sqlite: %s %q: %w (%v)", op, id, cerr, err)
	}
	if cat == "" {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	return fmt.Errorf("sqlite: %s %q: %w", op, id, errcat.Wrap(cat, "", err))
}

// corrupt returns a categorized ErrCorrupt for operation op on id.
func corrupt(op, id string, cat errcat.Category, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return fmt.Errorf("sqlite: %s %q: %w", op, id, errcat.Wrap(cat, msg, ErrCorrupt))
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended
// code): a lock held by another process outlasted the busy timeout.
func isBusy(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// isCantOpen reports whether err is SQLite's SQLITE_CANTOPEN (any
// extended code): a file it needs could not be opened.
func isCantOpen(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN
}

// isReadOnly reports whether err is SQLite's SQLITE_READONLY (any
// extended code): the file cannot be written.
func isReadOnly(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY
}

// isCorruptFile reports whether err is SQLite's SQLITE_CORRUPT or
// SQLITE_NOTADB (any extended code): the file itself is damaged.
func isCorruptFile(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB
}

// corruptFile wraps err, the failure of Open on a damaged file, in
// ErrCorrupt and category session_load_failed.
func corruptFile(path string, err error) error {
	return fmt.Errorf("sqlite: open %q: %w", path, errcat.Wrap(errcat.SessionLoadFailed, "the database file is corrupt",
		fmt.Errorf("%w: %w", ErrCorrupt, err)))
}

// emptyBesideWAL reports a database file of length zero beside a
// write-ahead log that is not empty: SQLite writes the file's first
// page when it creates it, so the file was truncated or replaced (a
// botched copy or restore), and SQLite would discard the log, and every
// write in it, and start an empty database.
func emptyBesideWAL(path string) error {
	db, err := os.Stat(path)
	if err != nil || db.Size() != 0 {
		return nil
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil || wal.Size() == 0 {
		return nil
	}
	return fmt.Errorf("the database file is empty but its write-ahead log holds %d bytes: the file was truncated or replaced", wal.Size())
}
