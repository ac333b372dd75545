package sqlite

import (
	"fmt"
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
	}
	return nil
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
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
	return c
}
