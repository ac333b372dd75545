package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/store/sqlite"
)

// TestSessionLockerExcludesAcrossStores runs critical sections on one
// session from two Stores opened on the same file and checks they never
// overlap; a second session is not blocked by the first.
func TestSessionLockerExcludesAcrossStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease.db")
	var lockers []*sqlite.Locker
	for range 2 {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(ctx) })
		lockers = append(lockers, s.SessionLocker(sqlite.LockerConfig{MaxPoll: 5 * time.Millisecond}))
	}
	var inside, overlaps, done atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 10 {
				release, err := lockers[i%2].Lock(ctx, "conv")
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				release()
				release() // idempotent
				done.Add(1)
			}
		})
	}
	// Another session is free while "conv" is contended.
	other, err := lockers[1].Lock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	other()
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping critical sections", overlaps.Load())
	}
	if done.Load() != 80 {
		t.Fatalf("%d sections ran, want 80", done.Load())
	}
}

// TestSessionLockerWaitHonorsContext: a waiter gives up when its context
// ends; a lapsed lease (its holder stopped renewing) is taken over.
func TestSessionLockerWaitHonorsContext(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	l := s.SessionLocker(sqlite.LockerConfig{TTL: time.Hour, MaxPoll: time.Millisecond})
	release, err := l.Lock(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(wctx, "conv"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held session = %v, want a deadline error", err)
	}
	release()
	r2, err := l.Lock(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	r2()

	// A holder that crashed stops renewing: its lapsed lease is taken
	// over. (The row is written as a crashed process would leave it.)
	if _, err := rawDB(t, path).Exec(`INSERT INTO session_leases (session_id, owner, expires_at) VALUES ('crashed', 'gone', 1)`); err != nil {
		t.Fatal(err)
	}
	r3, err := l.Lock(ctx, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	r3()
}
