//go:build !unix

package sqlite

import (
	"os"
	"time"
)

// exclusiveVFS is empty where SQLite has no "unix-excl" VFS: a Store then
// always uses the default VFS and its per-transaction locks, as with
// Config.Shared.
const exclusiveVFS = ""

// lockFile takes no lock where there is no flock: Config.SoleWriter has
// no effect there (see vfs_unix.go).
func lockFile(string, bool, time.Duration) (*os.File, error) { return nil, nil }

// soleWriterSupported reports whether Config.SoleWriter takes effect.
const soleWriterSupported = false
