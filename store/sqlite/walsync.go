package sqlite

import (
	"errors"
	"fmt"
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
	closed    bool  // close ran: no more fsyncs
	syncs     int64 // fsyncs run, for tests
}

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
func (w *walSyncer) sync() error {
	if w.f == nil {
		f, err := os.OpenFile(w.path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(w.path)); err != nil {
			f.Close()
			return err
		}
		w.f = f
	}
	w.syncs++
	return w.f.Sync()
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
	if w.committed > w.synced {
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
