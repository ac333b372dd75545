package sqlite

import (
	"fmt"

	"github.com/armature-go/armature/session"
	"log/slog"
	"runtime"
	"strings"
	"time"
)

// Defaults applied by [Open] to zero [Config] fields.
const (
	// DefaultBusyTimeout is how long a connection waits for a lock held
	// by another connection (another process on the same file) before
	// failing.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultIntegrityCheck bounds the integrity check of Open (see
	// Config.IntegrityCheck): a 100 MB file is checked in about 0.3s.
	DefaultIntegrityCheck = 2 * time.Second
	// minReadConns is the smallest default reader pool.
	minReadConns = 4
)

// Config configures a [Store]. The zero value is not usable on its own
// (Path is required); every other field has a documented default.
type Config struct {
	// Path is the database file, created if missing. Required. It is a
	// plain file path, not a URI: it must not start with "file:" and must
	// not be ":memory:" (the store uses several connections, which would
	// each see their own in-memory database).
	Path string
	// Now is the clock for record timestamps; default time.Now.
	Now func() time.Time
	// BusyTimeout bounds the wait for a lock held by another connection
	// or process; default DefaultBusyTimeout. Writes from one Store never
	// contend with each other: they are serialized through one
	// connection.
	BusyTimeout time.Duration
	// ReadConns is the size of the reader pool; default
	// max(4, GOMAXPROCS).
	ReadConns int
	// Logger receives migration and shutdown messages; default discards.
	Logger *slog.Logger
	// Shared lets other processes open the file while this Store has it
	// open. By default a Store owns its file: the first access takes one
	// lock on it for the whole process (SQLite's "unix-excl" VFS), so a
	// transaction takes no file locks of its own and the WAL index lives
	// in this process's memory instead of a shared "-shm" file. That makes
	// every read and write cheaper (about ten fewer system calls per
	// turn), but another process (another Store, the sqlite3 shell, a
	// backup tool) cannot open the file until this Store closes: its
	// Open fails with [ErrLocked]. Any number of Stores in one process
	// share the file either way. Set Shared in every process that opens
	// the file to share it across processes (the [Locker] then serializes
	// turns across them); Stores of one file must agree on it. Shared has
	// no effect where SQLite has no "unix-excl" VFS (Windows): there a
	// Store is always shared.
	Shared bool
	// SoleWriter declares this Store the only one with the file open: no
	// other Store, in this process or another, opens it meanwhile. Open
	// holds it to that with an advisory lock on the file (flock): while
	// a sole writer has the file open every other Store's Open fails
	// with [ErrLocked], and a sole writer's Open fails while any other
	// Store has it open. In return the Store knows every session's
	// version from its own commits, and answers a warm turn's version
	// check (Load with IfVersionNot, the engine's cache revalidation)
	// from memory instead of with a query. armature serve sets it. It
	// cannot be combined with Shared; it has no effect where there is no
	// flock (Windows).
	SoleWriter bool
	// MarkRetention is how long a mark recorded with a session write
	// (session.Mark: an idempotency key and its outcome, a run's record)
	// is kept; default session.DefaultMarkRetention (24 hours). Expired
	// marks are no longer returned and are deleted by a sweep at Open
	// and then hourly.
	MarkRetention time.Duration
	// Durability is what a committed write survives (PRAGMA synchronous
	// on the WAL): [DurabilityNormal] (the zero value) survives a crash
	// of the process, [DurabilityFull] a power loss too, at one fsync per
	// group commit. See the package doc's Durability section.
	Durability Durability
	// IntegrityCheck bounds the integrity check Open runs (SQLite's
	// PRAGMA quick_check: every page and record of the file read once,
	// without the index cross-checks of integrity_check); default
	// DefaultIntegrityCheck. A file found corrupt fails Open with
	// [ErrCorrupt]. A check that outlasts the bound (a file of several
	// hundred megabytes) stops there, Open goes on and logs that only
	// part of the file was checked. Negative skips the check.
	IntegrityCheck time.Duration
}

// Validate reports whether the configuration is usable. Errors wrap
// [ErrInvalidConfig].
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return fmt.Errorf("%w: Path is required", ErrInvalidConfig)
	case c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:"):
		return fmt.Errorf("%w: Path must be a file path, not %q", ErrInvalidConfig, c.Path)
	case strings.ContainsRune(c.Path, 0):
		return fmt.Errorf("%w: Path contains a NUL byte", ErrInvalidConfig)
	case c.BusyTimeout < 0:
		return fmt.Errorf("%w: negative BusyTimeout %v", ErrInvalidConfig, c.BusyTimeout)
	case c.ReadConns < 0:
		return fmt.Errorf("%w: negative ReadConns %d", ErrInvalidConfig, c.ReadConns)
	case c.MarkRetention < 0:
		return fmt.Errorf("%w: negative MarkRetention %v", ErrInvalidConfig, c.MarkRetention)
	case c.Durability.pragma() == "":
		return fmt.Errorf("%w: unknown Durability %d", ErrInvalidConfig, int(c.Durability))
	case c.SoleWriter && c.Shared:
		return fmt.Errorf("%w: SoleWriter and Shared exclude each other", ErrInvalidConfig)
	}
	return nil
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MarkRetention == 0 {
		c.MarkRetention = session.DefaultMarkRetention
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.ReadConns == 0 {
		c.ReadConns = max(minReadConns, runtime.GOMAXPROCS(0))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.IntegrityCheck == 0 {
		c.IntegrityCheck = DefaultIntegrityCheck
	}
	return c
}
