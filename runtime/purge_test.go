package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// TestRecorderPurgeSession: a purge deletes the session's runs,
// including a turn's records still queued for the group commit (they
// are not written after it), keeps the runs a turn began once the purge
// started (a new conversation's) and other sessions', and deletes
// nothing when the caller's deletion of the history fails or the store
// cannot purge.
func TestRecorderPurgeSession(t *testing.T) {
	ctx := t.Context()
	var tick atomic.Int64
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	// An hour's linger: the turns' records stay queued until something
	// waits for them.
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Now: clock, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	turn := func(session string) string {
		t.Helper()
		tr, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: session, AgentID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "the secret"}); err != nil {
			t.Fatal(err)
		}
		if err := tr.Complete(tctx, map[string]any{"text": "the secret"}); err != nil {
			t.Fatal(err)
		}
		return tr.ID()
	}
	old1, old2, other := turn("s1"), turn("s1"), turn("s2")

	// A turn in flight once the history is deleted (it waited for the
	// delete): kept, as its records written after the purge are.
	var (
		later *runtime.Turn
		lctx  context.Context
	)
	res, err := rec.PurgeSession(ctx, "acme", "s1", func(context.Context) error {
		later, lctx, err = rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s1", AgentID: "a"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 2 || res.Events != 6 {
		t.Fatalf("PurgeSession = %+v, want the 2 earlier runs with their 6 events", res)
	}
	if err := later.Complete(lctx, map[string]any{"text": "new"}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{old1, old2} {
		if _, err := store.Run(ctx, "acme", id); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("purged run %s after the flush: %v (its queued records were written after the purge)", id, err)
		}
	}
	for _, id := range []string{later.ID(), other} {
		if _, err := store.Run(ctx, "acme", id); err != nil {
			t.Fatalf("run %s: %v, want kept", id, err)
		}
	}

	// The caller's deletion fails: its error, nothing purged.
	boom := errors.New("boom")
	if _, err := rec.PurgeSession(ctx, "acme", "s2", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("PurgeSession with a failing delete = %v, want it", err)
	}
	if _, err := store.Run(ctx, "acme", other); err != nil {
		t.Fatalf("run %s after a failed purge: %v", other, err)
	}
	if _, err := rec.PurgeSession(ctx, "acme", "", nil); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("PurgeSession without a session = %v, want ErrInvalidRequest", err)
	}

	// A store without the capability: ErrInvalidConfig before anything.
	plain, err := runtime.NewRecorder(runtime.RecorderConfig{Store: storeOnly{store}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close(context.Background()) })
	called := false
	if _, err := plain.PurgeSession(ctx, "acme", "s2", func(context.Context) error { called = true; return nil }); !errors.Is(err, runtime.ErrInvalidConfig) || called {
		t.Fatalf("PurgeSession on a store that cannot = %v (history deleted: %v), want ErrInvalidConfig first", err, called)
	}
}

// storeOnly hides a store's optional capabilities.
type storeOnly struct{ runtime.Store }
