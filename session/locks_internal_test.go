package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// waiters returns the number of queued waiters for key.
func (k *Locks) waiters(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.m[key]; e != nil {
		return len(e.waiters)
	}
	return 0
}

func (k *Locks) entries() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// waitQueued polls until key has n waiters.
func waitQueued(t *testing.T, k *Locks, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k.waiters(key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters queued on %q, want %d", k.waiters(key), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustLock(t *testing.T, k *Locks, key string) func() {
	t.Helper()
	unlock, err := k.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return unlock
}

func TestLocksFIFO(t *testing.T) {
	var k Locks
	unlock := mustLock(t, &k, "s")
	const n = 20
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			u, err := k.Lock(context.Background(), "s")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			u()
		})
		waitQueued(t, &k, "s", i+1) // start the next waiter only once this one is queued
	}
	unlock()
	wg.Wait()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("acquisition order (-want +got):\n%s", diff)
	}
	if e := k.entries(); e != 0 {
		t.Errorf("%d map entries left after every holder unlocked", e)
	}
}

func TestLocksCancelledWaiter(t *testing.T) {
	var k Locks
	unlock := mustLock(t, &k, "s")
	got := make(chan string, 3)
	var wg sync.WaitGroup
	start := func(name string, ctx context.Context, queued int) {
		wg.Go(func() {
			u, err := k.Lock(ctx, "s")
			if err != nil {
				got <- name + ": " + err.Error()
				return
			}
			got <- name
			u()
		})
		waitQueued(t, &k, "s", queued)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start("first", context.Background(), 1)
	start("cancelled", ctx, 2)
	start("third", context.Background(), 3)
	cancel()
	if g := <-got; g != "cancelled: "+context.Canceled.Error() {
		t.Fatalf("first result %q, want the cancelled waiter's error", g)
	}
	waitQueued(t, &k, "s", 2)
	unlock()
	wg.Wait()
	close(got)
	var rest []string
	for g := range got {
		rest = append(rest, g)
	}
	if diff := cmp.Diff([]string{"first", "third"}, rest); diff != "" {
		t.Errorf("handoff order (-want +got):\n%s", diff)
	}
	if e := k.entries(); e != 0 {
		t.Errorf("%d map entries left", e)
	}
}

// A waiter whose context ends just as the lock is handed to it passes the
// lock on instead of dropping it.
func TestLocksCancelRacesHandoff(t *testing.T) {
	var k Locks
	for range 200 {
		unlock := mustLock(t, &k, "s")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			u, err := k.Lock(ctx, "s")
			if err == nil {
				u()
			}
			done <- err
		}()
		waitQueued(t, &k, "s", 1)
		go cancel()
		unlock()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		// Whatever won, the key must be free again.
		lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
		u, err := k.Lock(lctx, "s")
		lcancel()
		if err != nil {
			t.Fatalf("the key stayed held after a cancel raced the handoff: %v", err)
		}
		u()
	}
	if e := k.entries(); e != 0 {
		t.Errorf("%d map entries left", e)
	}
}

func TestLocksKeysIndependent(t *testing.T) {
	var k Locks
	ua := mustLock(t, &k, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ub, err := k.Lock(ctx, "b")
	if err != nil {
		t.Fatalf("key b waited for key a: %v", err)
	}
	if e := k.entries(); e != 2 {
		t.Errorf("%d entries, want 2", e)
	}
	ua()
	ub()
	if e := k.entries(); e != 0 {
		t.Errorf("%d map entries left", e)
	}
}

func TestLocksMutualExclusion(t *testing.T) {
	var k Locks
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := range 400 {
		key := []string{"a", "b", "c", "d"}[i%4]
		wg.Go(func() {
			ctx := context.Background()
			if i%7 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(i%3)*time.Microsecond)
				defer cancel()
			}
			u, err := k.Lock(ctx, key)
			if err != nil {
				return
			}
			mu.Lock()
			inside[key]++
			if inside[key] != 1 {
				t.Errorf("%d holders of %q", inside[key], key)
			}
			mu.Unlock()
			time.Sleep(10 * time.Microsecond)
			mu.Lock()
			inside[key]--
			mu.Unlock()
			u()
		})
	}
	wg.Wait()
	if e := k.entries(); e != 0 {
		t.Errorf("%d map entries left after every holder unlocked", e)
	}
}
