package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/store/postgres"
)

// After a burst of turns of many sessions, the locker's connections
// that hold no lock are closed once idle for IdleTimeout: before, the
// pool kept up to MaxHeld (64) open for pgxpool's 30 minutes, and with a
// few replicas doing the same the database refused connections to the
// replicas' statements ("too many clients").
func TestLockerClosesIdleConnections(t *testing.T) {
	st := open(t)
	l := st.SessionLocker(postgres.LockerConfig{IdleTimeout: 300 * time.Millisecond})
	t.Cleanup(l.Close)
	ctx := t.Context()
	// The pool is made on the first lock (and read by LockConns after).
	unlock, err := l.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	const sessions = 12
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for i := range sessions {
		wg.Go(func() {
			unlock, err := l.Lock(ctx, fmt.Sprint("s", i))
			if err != nil {
				t.Error(err)
				return
			}
			<-hold
			unlock()
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for postgres.LockConns(l) < sessions && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := postgres.LockConns(l); n != sessions {
		t.Fatalf("%d lock connections while %d sessions are held, want %d", n, sessions, sessions)
	}
	close(hold)
	wg.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for postgres.LockConns(l) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := postgres.LockConns(l); n != 0 {
		t.Fatalf("%d lock connections stay open 10 s after the locks were released, want none", n)
	}
	// The locker still works after its pool emptied.
	unlock, err = l.Lock(ctx, "s0")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}
