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

// TestPurgeSessionSettledTurn: a turn that settled (it was done with its
// session before the delete took it) but has not recorded its end when
// the purge runs is waited for and purged with its session, on the
// flusher's path and on its own path (a watched session, whose end is
// written by the turn itself); a turn in flight that has not settled (it
// waits behind the delete) is kept. Before, the settled turn was kept as
// in flight and its run outlived the delete once its end was written.
func TestPurgeSessionSettledTurn(t *testing.T) {
	for _, watched := range []bool{false, true} {
		ctx := t.Context()
		store := runtime.NewMemoryStore(runtime.MemoryConfig{})
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Linger: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if watched {
			_, stop := rec.Subscribe(ctx, "acme", "s")
			defer stop()
		}
		begin := func() (*runtime.Turn, context.Context) {
			tr, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "the secret"}); err != nil {
				t.Fatal(err)
			}
			return tr, tctx
		}
		settled, sctx := begin()
		settled.Settle()
		waiting, wctx := begin()
		go func() {
			time.Sleep(50 * time.Millisecond) // the server records the end a moment later
			_ = settled.Complete(sctx, map[string]any{"text": "the secret"})
		}()
		if _, err := rec.PurgeSession(ctx, "acme", "s", nil); err != nil {
			t.Fatal(err)
		}
		if err := waiting.Complete(wctx, map[string]any{"text": "a new conversation"}); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Run(ctx, "acme", settled.ID()); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("watched=%v: the settled turn's run outlived the purge: %v", watched, err)
		}
		if _, err := store.Run(ctx, "acme", waiting.ID()); err != nil {
			t.Errorf("watched=%v: the waiting turn's run was purged: %v", watched, err)
		}
	}
}
