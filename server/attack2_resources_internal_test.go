package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitQueued waits until the limiter has n requests waiting (no timing
// assert: the test's own deadline bounds it).
func waitQueued(t *testing.T, l *limiter, n int) {
	t.Helper()
	for {
		if _, q := l.counts(); q == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A unit that frees goes to the tenant that waits for one, however
// many requests other tenants keep queued or send: tenant a holds the
// whole capacity with more of its requests queued, tenant e waits with
// one; when one of a's units frees, e gets it, before a's waiters and
// before the request a sends at once. Before, every waiter was woken to
// race for the unit and whoever took the lock first won: a's new
// request (or one of its many waiters) took e's unit, round after round,
// until e's wait ran out (429/503: starved while its share was open).
func TestLimiterHandsFreedUnitToWaitingTenant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		aQueued  int  // a's requests queued before e's
		newcomer bool // a sends a request right after the release
	}{
		{"newcomer", 0, true},
		{"many waiters", 6, false},
		{"both", 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter("turn", 2, 2, 16, 8, time.Minute, &refusals{n: map[[2]string]int64{}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var held []func()
			for range 2 {
				rel, err := l.acquire(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, rel)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel() // the waiters still queued give up
			got := make(chan string, 16)
			queue := func(tenant string) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rel, err := l.acquire(ctx, tenant)
					if err != nil {
						return
					}
					got <- tenant
					<-ctx.Done()
					rel()
				}()
			}
			for i := range tc.aQueued {
				queue("a")
				waitQueued(t, l, i+1)
			}
			queue("e")
			waitQueued(t, l, tc.aQueued+1)
			held[0]()
			if tc.newcomer {
				nctx, ncancel := context.WithTimeout(ctx, 50*time.Millisecond)
				rel, err := l.acquire(nctx, "a")
				ncancel()
				if err == nil {
					rel()
					t.Fatal("tenant a's new request took the unit tenant e waited for")
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("refusal %v is not an *Error", err)
				}
			}
			if first := <-got; first != "e" {
				t.Fatalf("the freed unit went to tenant %s, want e (waiting with none in use)", first)
			}
			if n, _ := l.counts(); n != 2 {
				t.Fatalf("%d units in use, want 2", n)
			}
		})
	}
}

// Units are handed on in order: among tenants with equal units in use,
// the one waiting longest; within a tenant, its requests in arrival
// order; a tenant at its share waits even when it waited longest.
func TestLimiterHandOnOrder(t *testing.T) {
	l := newLimiter("turn", 3, 2, 16, 8, time.Minute, &refusals{n: map[[2]string]int64{}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := func(tenant string) func() {
		rel, err := l.acquire(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	a1, a2, b1 := hold("a"), hold("a"), hold("b")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	order := make(chan string, 8)
	rels := make(chan func(), 8)
	queued := 0
	queue := func(tenant string, i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := l.acquire(ctx, tenant)
			if err != nil {
				return
			}
			order <- fmt.Sprint(tenant, i)
			rels <- rel
		}()
		queued++
		waitQueued(t, l, queued)
	}
	queue("a", 1) // a holds its share: waits until one of its own frees
	queue("c", 1)
	queue("b", 1)
	queue("c", 2)
	// b's unit frees: c (none in use) before b (one) and a (at its share).
	b1()
	if g := <-order; g != "c1" {
		t.Fatalf("first hand-on went to %s, want c1", g)
	}
	// a frees one: b and c hold one each now, a one; b waited before c's
	// second request: b1.
	a1()
	if g := <-order; g != "b1" {
		t.Fatalf("second hand-on went to %s, want b1", g)
	}
	a2()
	if g := <-order; g != "a1" {
		t.Fatalf("third hand-on went to %s, want a1 (none in use, waiting longest)", g)
	}
	// The last waiter gets the next unit; then every unit is given back
	// and nothing stays in the maps.
	(<-rels)()
	if g := <-order; g != "c2" {
		t.Fatalf("fourth hand-on went to %s, want c2", g)
	}
	for range 3 {
		(<-rels)()
	}
	if n, q := l.counts(); n != 0 || q != 0 || len(l.used) != 0 || len(l.waiting) != 0 || len(l.waiters) != 0 {
		t.Fatalf("after all releases: %d in use, %d queued, maps %v %v %v", n, q, l.used, l.waiting, l.waiters)
	}
}
