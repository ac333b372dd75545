package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// watchClock is a clock the test moves.
type watchClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *watchClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Microsecond)
	return c.now
}

func (c *watchClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// storedEvents counts the session's events in the store.
func storedEvents(t *testing.T, st runtime.Store, tenant, session string) int {
	t.Helper()
	evs, err := st.Events(context.Background(), runtime.EventsRequest{Tenant: tenant, SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// A session watched on another server (WatchElsewhere) has its turn in
// flight write what it holds at once and each later event as it comes,
// as a local subscriber's does; other sessions' turns stay batched; the
// watch ends when its time has passed, and the session's turns are
// batched again.
func TestRecorderWatchElsewhere(t *testing.T) {
	ctx := t.Context()
	clock := &watchClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	mem := runtime.NewMemoryStore(runtime.MemoryConfig{Now: clock.Now})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: mem, Now: clock.Now, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	delta := func(turn *runtime.Turn, tctx context.Context) {
		t.Helper()
		if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	watched, wctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	other, octx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	delta(watched, wctx)
	delta(other, octx)
	if n := storedEvents(t, mem, "acme", "s"); n != 0 {
		t.Fatalf("before any watch, a turn's events are batched behind it: %d stored", n)
	}
	// Another tenant's session of the same id is not the one watched.
	rec.WatchElsewhere(ctx, "other", "s", time.Minute)
	if n := storedEvents(t, mem, "acme", "s"); n != 0 {
		t.Fatalf("another tenant's watch brought the turn live: %d stored", n)
	}
	rec.WatchElsewhere(ctx, "acme", "s", time.Minute)
	if n := storedEvents(t, mem, "acme", "s"); n != 2 {
		t.Fatalf("watched elsewhere, the turn writes what it holds at once: %d events stored, want 2", n)
	}
	delta(watched, wctx)
	if n := storedEvents(t, mem, "acme", "s"); n != 3 {
		t.Fatalf("watched elsewhere, each event is written as it comes: %d stored, want 3", n)
	}
	// (The other turn's start, queued before, may be written with the
	// queue; its delta waits for the batch.)
	if n := storedEvents(t, mem, "acme", "t"); n > 1 {
		t.Fatalf("an unwatched session's turn went live: %d stored", n)
	}
	if err := watched.Complete(wctx, nil); err != nil {
		t.Fatal(err)
	}
	// A turn begun while the watch lasts is live from its start.
	next, nctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	delta(next, nctx)
	if n := storedEvents(t, mem, "acme", "s"); n != 4+2 {
		t.Fatalf("a turn begun while watched: %d stored, want 6", n)
	}
	if err := next.Complete(nctx, nil); err != nil {
		t.Fatal(err)
	}
	// Past the watch's time, without another announcement, turns are
	// batched again.
	clock.advance(time.Minute)
	late, lctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	before := storedEvents(t, mem, "acme", "s")
	delta(late, lctx)
	if n := storedEvents(t, mem, "acme", "s"); n != before {
		t.Fatalf("an expired watch kept the session's turns live: %d stored, want %d", n, before)
	}
	if err := late.Complete(lctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := other.Complete(octx, nil); err != nil {
		t.Fatal(err)
	}
	// A watch of no time, or of a time gone, changes nothing.
	rec.WatchElsewhere(ctx, "acme", "s", 0)
	rec.WatchElsewhere(ctx, "acme", "s", -time.Second)
	idle, ictx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	before = storedEvents(t, mem, "acme", "s")
	delta(idle, ictx)
	if n := storedEvents(t, mem, "acme", "s"); n != before {
		t.Fatalf("a watch of no time brought the turn live: %d stored, want %d", n, before)
	}
	if err := idle.Complete(ictx, nil); err != nil {
		t.Fatal(err)
	}
}
