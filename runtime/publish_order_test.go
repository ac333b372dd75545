package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// slowAfterAppend is a store whose Append of one run waits, after the
// events are stored (their ids assigned), until released.
type slowAfterAppend struct {
	runtime.Store
	run      string
	release  chan struct{}
	appended chan string // the runs whose Append was called
}

func (s *slowAfterAppend) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	s.appended <- req.RunID
	evs, err := s.Store.Append(ctx, req)
	if req.RunID == s.run {
		<-s.release
	}
	return evs, err
}

// TestPublishInIDOrder: two runs of one watched session write at once;
// the first one's write is slow to return after its events got their
// ids. The subscriber still gets the session's events in id order, so a
// stream (which skips an id below the last it sent) loses none. Before,
// the second run published first and the first run's events were
// skipped by every open stream of the session (the web page lost
// another tab's approval events).
func TestPublishInIDOrder(t *testing.T) {
	ctx := t.Context()
	store := &slowAfterAppend{Store: runtime.NewMemoryStore(runtime.MemoryConfig{}), release: make(chan struct{}),
		appended: make(chan string, 64)}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	events, cancel := rec.Subscribe(ctx, "acme", "s")
	defer cancel()
	begin := func() (*runtime.Turn, context.Context) {
		tr, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		return tr, tctx
	}
	a, actx := begin()
	b, bctx := begin()
	for len(store.appended) > 0 {
		<-store.appended
	}
	store.run = a.ID()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Adapter(actx, runtime.PhaseOutputDelta, map[string]any{"text": "first"}); err != nil {
			t.Error(err)
		}
	})
	if got := <-store.appended; got != a.ID() {
		t.Fatalf("appended %s first, want %s", got, a.ID())
	}
	wg.Go(func() {
		if err := b.Adapter(bctx, runtime.PhaseOutputDelta, map[string]any{"text": "second"}); err != nil {
			t.Error(err)
		}
	})
	// The second run's write is under way (before the fix it also
	// published) while the first run's has not returned.
	select {
	case <-store.appended:
	case <-time.After(200 * time.Millisecond):
	}
	close(store.release)
	wg.Wait()
	var last int64
	for range 4 { // each run's started event and its delta
		select {
		case ev := <-events:
			if ev.ID <= last {
				t.Fatalf("event %d (%s of run %s) published after event %d", ev.ID, ev.Type, ev.RunID, last)
			}
			last = ev.ID
		case <-time.After(5 * time.Second):
			t.Fatal("the subscriber did not get the runs' events")
		}
	}
}
