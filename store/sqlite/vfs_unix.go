//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// exclusiveVFS is the SQLite VFS of a Store that owns its file
// (Config.Shared false): "unix-excl" takes one process-wide lock on the
// database file at first use and keeps the WAL index in heap memory, so
// transactions take no file locks of their own and need no shared-memory
// file, while every connection of this process still shares the file.
const exclusiveVFS = "unix-excl"

// lockFile takes an advisory lock (flock) on the lock file beside the
// database file at path (lockPath: created when missing, never
// removed), exclusive for a sole writer (Config.SoleWriter) and shared
// for any other Store, waiting up to wait for it. The lock belongs to
// the returned file, which the Store closes last: it keeps every other
// Store, in this process or another, from writing the file behind a
// sole writer's back. It fails with ErrLocked when the wait runs out.
//
// The lock is not taken on the database file itself: closing any
// descriptor of a file releases every POSIX lock the process holds on
// it, SQLite's included, so a descriptor of the database file closed by
// one Store (or by an Open that failed) would leave another Store of the
// process owning the file in name only.
func lockFile(path string, exclusive bool, wait time.Duration) (*os.File, error) {
	// Read-only: a flock needs no write access, so a lock file another
	// user created (a Store once opened as root) still serves.
	// The lock file is named after the database file, not after a
	// symbolic link to it: two paths of one file share one lock.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	f, err := os.OpenFile(lockPath(path), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline):
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				what := "another Store has it open"
				if !exclusive {
					what = "a sole writer has it open"
				}
				return nil, fmt.Errorf("%w: %s", ErrLocked, what)
			}
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// soleWriterSupported reports whether Config.SoleWriter takes effect.
const soleWriterSupported = true
