package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// walSyncer makes commits durable under DurabilityFull. The connections
// run synchronous=NORMAL, so a COMMIT appends its frames to the WAL file
// without an fsync; a write then waits, before it returns, until an
// fsync of the WAL file that began after its commit has completed. The
// first waiter to find no fsync in progress runs one, covering every
// commit made so far; the others wait for it, or for the next. So the
// fsync of one group overlaps the commit of the next (the writer never
// waits for the disk), and one fsync acknowledges every write committed
// while the previous one ran: a pipelined group commit.
//
// This is as durable as synchronous=FULL: a frame reaches the disk
// before its write is acknowledged, SQLite's WAL checksums discard a
// torn tail after a power loss, and checkpoints (synchronous=NORMAL)
// fsync the WAL before copying it and the database after, so a WAL that
// restarts over old frames holds nothing unsynced that was acknowledged.
type walSyncer struct {
	path string // the WAL file

	mu        sync.Mutex
	cond      sync.Cond
	committed int64 // commits so far
	synced    int64 // commits known durable
	syncing   bool  // an fsync is in progress
	f         *os.File
	fi        os.FileInfo // f's, to tell whether the path still names it
	lost      error       // set once the WAL file was found deleted
	closed    bool        // close ran: no more fsyncs
	syncs     int64       // fsyncs run, for tests
}

// errWALDeleted fails the writes of a Store whose WAL file was deleted
// (by hand) while the Store had it open: SQLite goes on appending to the
// deleted file, which no fsync can make durable (what a checkpoint
// copied into the database file before a crash survives, the rest is
// lost), so they are not acknowledged, and the Store reports it (Ping)
// until it is reopened.
var errWALDeleted = errors.New("the WAL file was deleted while the store had it open: writes can no longer be made durable; restart the server")

func newWALSyncer(dbPath string) *walSyncer {
	w := &walSyncer{path: dbPath + "-wal"}
	w.cond.L = &w.mu
	return w
}

// commit records a commit and returns its sequence number, for wait.
func (w *walSyncer) commit() int64 {
	w.mu.Lock()
	w.committed++
	n := w.committed
	w.mu.Unlock()
	return n
}

// wait returns once commit seq is on the disk, running the fsync itself
// when none is in progress.
func (w *walSyncer) wait(seq int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.synced < seq {
		if w.syncing {
			w.cond.Wait()
			continue
		}
		if w.closed {
			return os.ErrClosed
		}
		w.syncing = true
		target := w.committed
		w.mu.Unlock()
		err := w.sync()
		w.mu.Lock()
		w.syncing = false
		if err == nil && target > w.synced {
			w.synced = target
		}
		if errors.Is(err, errWALDeleted) {
			w.lost = err
		}
		w.cond.Broadcast()
		if err != nil {
			return fmt.Errorf("syncing the WAL: %w", err)
		}
	}
	return nil
}

// sync fsyncs the WAL file, opening it the first time (and then
// fsyncing its directory, so that the file's entry is durable too). It
// runs without w.mu; only one sync runs at a time.
//
// Each sync checks that the path still names the file it holds: a WAL
// file deleted meanwhile fails this and every later sync
// (errWALDeleted); one SQLite created anew (the last connection closed,
// then one reopened) is synced along with the held one, then held
// instead.
func (w *walSyncer) sync() error {
	if w.lost != nil {
		return w.lost
	}
	if w.f != nil {
		cur, err := os.Stat(w.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errWALDeleted // wait records it (w.lost), under w.mu
		case err != nil:
			return err
		case !os.SameFile(cur, w.fi):
			err := w.f.Sync()
			w.f.Close()
			w.f, w.fi = nil, nil
			if err != nil {
				return err
			}
		}
	}
	if w.f == nil {
		f, err := os.OpenFile(w.path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			err = syncDir(filepath.Dir(w.path))
		}
		if err != nil {
			f.Close()
			return err
		}
		w.f, w.fi = f, fi
	}
	w.syncs++
	return w.f.Sync()
}

// failure is the error that keeps the syncer from making commits
// durable (errWALDeleted), or nil.
func (w *walSyncer) failure() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// close makes every commit so far durable and closes the WAL file. A
// write still waiting (its caller had not reached wait when the Store
// closed) then finds its commit synced; one that arrives later fails.
func (w *walSyncer) close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.syncing {
		w.cond.Wait()
	}
	var err error
	if w.committed > w.synced && w.lost == nil {
		if err = w.sync(); err == nil {
			w.synced = w.committed
		}
	}
	if w.f != nil {
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
		w.f = nil
	}
	w.closed = true
	w.cond.Broadcast()
	return err
}

// syncDir fsyncs a directory. Filesystems that cannot (EINVAL) are
// taken as having nothing to sync.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for sync there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
