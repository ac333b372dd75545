package sqlite

import "fmt"

// Durability is what a committed write survives. Both levels run the
// connections with PRAGMA synchronous=NORMAL in WAL mode (checkpoints
// fsync the WAL before copying it and the database after); they differ
// in whether a write waits for an fsync of the WAL. Every level survives a crash of the
// process; they differ on a power loss or an operating-system crash.
// The zero value is [DurabilityNormal].
//
// Durability implements encoding.TextMarshaler and TextUnmarshaler
// ("normal", "full"), so it can be a flag (flag.TextVar) or a
// configuration field.
type Durability int

const (
	// DurabilityNormal is PRAGMA synchronous=NORMAL: a commit appends to
	// the WAL without an fsync; the WAL is synced at WAL checkpoints
	// (at most every 200ms after commits). A write that returned survives
	// a crash of the process, and the database is never corrupted; a
	// power loss or operating-system crash may lose the writes committed
	// since the last checkpoint (tens of milliseconds' worth), and the
	// file reopens at an earlier committed state. It is SQLite's
	// recommended setting for WAL and the zero value, the behaviour of
	// every release before the setting existed.
	DurabilityNormal Durability = iota
	// DurabilityFull: a write returns only once its commit is on the
	// disk, so it survives a power loss or operating-system crash as
	// well (as far as the disk honours fsync). The store fsyncs the WAL
	// itself after commits rather than inside them (PRAGMA
	// synchronous=FULL would hold the single writer for every fsync):
	// the first write to wait runs an fsync covering every commit made
	// so far, the others wait for it or the next, and the writer goes on
	// committing meanwhile — a pipelined group commit, one fsync for all
	// the writes committed while the previous one ran. armature serve
	// runs with it by default.
	DurabilityFull
)

// String returns "normal" or "full" (or "Durability(n)" for others).
func (d Durability) String() string {
	switch d {
	case DurabilityNormal:
		return "normal"
	case DurabilityFull:
		return "full"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// MarshalText implements encoding.TextMarshaler. An unknown level is an
// error wrapping [ErrInvalidConfig].
func (d Durability) MarshalText() ([]byte, error) {
	if d.pragma() == "" {
		return nil, fmt.Errorf("%w: unknown durability %d", ErrInvalidConfig, int(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: "normal" or "full".
// Anything else is an error wrapping [ErrInvalidConfig].
func (d *Durability) UnmarshalText(text []byte) error {
	switch string(text) {
	case "normal":
		*d = DurabilityNormal
	case "full":
		*d = DurabilityFull
	default:
		return fmt.Errorf("%w: durability %q: want full or normal", ErrInvalidConfig, text)
	}
	return nil
}

// pragma is the PRAGMA synchronous value of d, "" for an unknown level.
func (d Durability) pragma() string {
	switch d {
	case DurabilityNormal:
		return "NORMAL"
	case DurabilityFull:
		return "FULL"
	}
	return ""
}
