package graph_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armature-go/armature/graph"
)

// storedSize is the encoded size of a session's stored fields.
func storedSize(t *testing.T, spy *spyStore, id string) int64 {
	t.Helper()
	var n int64
	for _, v := range stored(t, spy, id) {
		n += int64(len(v))
	}
	return n
}

// TestSessionCacheBytes checks the cache's byte bound: the running size
// of an entry kept from each turn's delta matches the stored record
// exactly, sessions are evicted least recently used beyond the budget,
// two graphs share one budget, and a session larger than the whole
// budget is not cached (its turns re-read it).
func TestSessionCacheBytes(t *testing.T) {
	spy := newSpy()
	const budget = 4096
	cache := graph.NewSessionCache(100, budget)
	cfg := graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}, Cache: cache}
	g1, g2 := chatGraph(t, cfg), chatGraph(t, cfg)
	msg := strings.Repeat("x", 600)

	// One session, several turns: the estimate tracks the store exactly.
	for range 3 {
		if _, err := turn(t, g1, "a", msg); err != nil {
			t.Fatal(err)
		}
	}
	if n, b := cache.Stats(); n != 1 || b != storedSize(t, spy, "a") {
		t.Fatalf("after 3 turns: Stats = %d sessions, %d bytes; want 1 and the stored size %d", n, b, storedSize(t, spy, "a"))
	}

	// More sessions over two graphs: the budget holds, and the least
	// recently used go first.
	for i, id := range []string{"b", "c", "d", "e", "f"} {
		g := g1
		if i%2 == 1 {
			g = g2
		}
		for range 2 {
			if _, err := turn(t, g, id, msg); err != nil {
				t.Fatal(err)
			}
		}
		if _, b := cache.Stats(); b > budget {
			t.Fatalf("after session %s the cache holds %d bytes, over its %d budget", id, b, budget)
		}
	}
	before := spy.notModified
	if _, err := turn(t, g1, "a", "hi"); err != nil { // evicted: a full load
		t.Fatal(err)
	}
	if spy.notModified != before {
		t.Error("the least recently used session was still cached")
	}
	before = spy.notModified
	if _, err := turn(t, g1, "f", "hi"); err != nil { // recent (f ran on g1): revalidated only
		t.Fatal(err)
	}
	if spy.notModified != before+1 {
		t.Error("the most recent session was not cached")
	}

	// A session bigger than the whole budget is never cached.
	huge := strings.Repeat("y", budget)
	for range 2 {
		if _, err := turn(t, g1, "huge", huge); err != nil {
			t.Fatal(err)
		}
	}
	before = spy.notModified
	if _, err := turn(t, g1, "huge", "hi"); err != nil {
		t.Fatal(err)
	}
	if spy.notModified != before {
		t.Error("a session over the budget was cached")
	}
	if _, b := cache.Stats(); b > budget {
		t.Fatalf("cache holds %d bytes, over its %d budget", b, budget)
	}
}

// TestSessionCacheSizeTracksSets checks the estimate when a field is
// replaced by a longer or shorter value on every turn.
func TestSessionCacheSizeTracksSets(t *testing.T) {
	spy := newSpy()
	cache := graph.NewSessionCache(10, -1)
	g := chatGraph(t, graph.SessionConfig{Store: spy, Cache: cache}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		n := chatTurns.Get(s)
		return chatScratch.Set(strings.Repeat("s", (n*37)%11)), nil
	})
	for i := range 9 {
		if _, err := turn(t, g, "s", strings.Repeat("m", i)); err != nil {
			t.Fatal(err)
		}
		if _, got := cache.Stats(); got != storedSize(t, spy, "s") {
			t.Fatalf("turn %d: cached size %d, stored %d", i, got, storedSize(t, spy, "s"))
		}
	}
}
