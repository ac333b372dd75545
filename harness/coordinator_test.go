package harness_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/store/sqlite"
)

// coordinated returns a harness whose graph suspends for signal "go",
// over the named coordinator.
func coordinated(t *testing.T, kind string) *harness.Harness {
	t.Helper()
	switch kind {
	case "memory":
		return newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, suspending("go")), Coordinator: harness.NewMemoryCoordinator()})
	case "store":
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return newHarness(t, harness.Config{Graph: newGraph(t, s, s.Checkpoints(), suspending("go")), Coordinator: harness.NewStoreCoordinator(s.Checkpoints())})
	}
	t.Fatalf("unknown coordinator %q", kind)
	return nil
}

func TestCoordinators(t *testing.T) {
	for _, kind := range []string{"memory", "store"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			h := coordinated(t, kind)
			invo := map[string]string{}
			for _, sid := range []string{"s1", "s2"} {
				o, err := h.Handle(ctx, harness.Transmission{SessionID: sid})
				if err != nil || o.Status != graph.Suspended {
					t.Fatalf("turn of %s: %v %v", sid, o.Status, err)
				}
				if o.Subscription == nil || o.Subscription.SignalID != "go" || o.Subscription.SessionID != sid || o.Subscription.InvocationID != o.InvocationID {
					t.Fatalf("subscription %+v", o.Subscription)
				}
				invo[sid] = o.InvocationID
			}

			tests := []struct {
				name     string
				ref      harness.SignalRef
				wantInvo string
				wantErr  error
			}{
				{name: "ambiguous without session", ref: harness.SignalRef{SignalID: "go"}, wantErr: harness.ErrAmbiguousSignal},
				{name: "scoped s1", ref: harness.SignalRef{SignalID: "go", SessionID: "s1"}, wantInvo: invo["s1"]},
				{name: "scoped s2", ref: harness.SignalRef{SignalID: "go", SessionID: "s2"}, wantInvo: invo["s2"]},
				{name: "by invocation", ref: harness.SignalRef{InvocationID: invo["s2"]}, wantInvo: invo["s2"]},
				{name: "by invocation and signal", ref: harness.SignalRef{InvocationID: invo["s1"], SignalID: "go"}, wantInvo: invo["s1"]},
				{name: "invocation awaits another signal", ref: harness.SignalRef{InvocationID: invo["s1"], SignalID: "other"}, wantErr: harness.ErrNoSubscription},
				{name: "unknown signal", ref: harness.SignalRef{SignalID: "other"}, wantErr: harness.ErrNoSubscription},
				{name: "unknown session", ref: harness.SignalRef{SignalID: "go", SessionID: "s3"}, wantErr: harness.ErrNoSubscription},
				{name: "unknown invocation", ref: harness.SignalRef{InvocationID: "nope"}, wantErr: harness.ErrNoSubscription},
				{name: "by invocation in its session", ref: harness.SignalRef{InvocationID: invo["s1"], SessionID: "s1"}, wantInvo: invo["s1"]},
				// Another session's invocation (another tenant's): resolves
				// nothing, as an unknown one.
				{name: "invocation of another session", ref: harness.SignalRef{InvocationID: invo["s1"], SessionID: "s2"}, wantErr: harness.ErrNoSubscription},
				{name: "invocation and signal of another session", ref: harness.SignalRef{InvocationID: invo["s2"], SignalID: "go", SessionID: "s1"}, wantErr: harness.ErrNoSubscription},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					sub, err := h.Resolve(ctx, tt.ref)
					if tt.wantErr != nil {
						if !errors.Is(err, tt.wantErr) || !errors.Is(err, errcat.HarnessSignalCorrelationFailed) || errcat.Of(err) != errcat.HarnessSignalCorrelationFailed {
							t.Fatalf("Resolve: %v, want %v as harness_signal_correlation_failed", err, tt.wantErr)
						}
						// Through Handle, the same failure is an Errored outcome.
						o, herr := h.Handle(ctx, harness.Transmission{Signal: &tt.ref, Payload: Approved.Set(true)})
						if o.Status != graph.Errored || !errors.Is(herr, tt.wantErr) || o.Category != errcat.HarnessSignalCorrelationFailed || o.Bucket != harness.UserCorrectable {
							t.Fatalf("Handle: %+v", o)
						}
						return
					}
					if err != nil || sub.InvocationID != tt.wantInvo || sub.SignalID != "go" {
						t.Fatalf("Resolve = %+v, %v; want invocation %q", sub, err, tt.wantInvo)
					}
				})
			}

			// Resuming spends the subscription: s1's signal resolves no more,
			// and the unscoped signal now names s2 alone.
			o, err := h.Handle(ctx, harness.Transmission{Signal: &harness.SignalRef{SignalID: "go", SessionID: "s1"}, Payload: Approved.Set(true)})
			if err != nil || o.Status != graph.Completed || o.SessionID != "s1" || o.InvocationID != invo["s1"] {
				t.Fatalf("resume: %+v, %v", o, err)
			}
			if _, err := h.Resolve(ctx, harness.SignalRef{SignalID: "go", SessionID: "s1"}); !errors.Is(err, harness.ErrNoSubscription) {
				t.Errorf("a spent subscription resolves: %v", err)
			}
			sub, err := h.Resolve(ctx, harness.SignalRef{SignalID: "go"})
			if err != nil || sub.InvocationID != invo["s2"] {
				t.Errorf("Resolve = %+v, %v; want s2's invocation", sub, err)
			}
			// Pending lists a session's awaited signals, and only its own.
			pl := h.Coordinator().(harness.PendingLister)
			for sid, want := range map[string]int{"s1": 0, "s2": 1, "s3": 0} {
				subs, err := pl.Pending(ctx, sid)
				if err != nil || len(subs) != want {
					t.Errorf("Pending(%s) = %+v, %v; want %d", sid, subs, err, want)
				}
				for _, sub := range subs {
					if sub.SessionID != sid || sub.InvocationID != invo[sid] || sub.SignalID != "go" {
						t.Errorf("Pending(%s) = %+v", sid, sub)
					}
				}
			}
		})
	}
}

func TestMemoryCoordinator(t *testing.T) {
	ctx := context.Background()
	var c harness.MemoryCoordinator // the zero value is ready
	if _, err := c.Resolve(ctx, harness.SignalRef{SignalID: "x"}); !errors.Is(err, harness.ErrNoSubscription) {
		t.Fatalf("empty Resolve: %v", err)
	}
	if err := c.Subscribe(ctx, harness.Subscription{SignalID: "x"}); err == nil {
		t.Error("a subscription without an invocation id was accepted")
	}
	a := harness.Subscription{SignalID: "x", InvocationID: "i1", SessionID: "s1"}
	if err := c.Subscribe(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Re-subscribing the invocation replaces its subscription.
	b := harness.Subscription{SignalID: "y", InvocationID: "i1", SessionID: "s1"}
	if err := c.Subscribe(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, harness.SignalRef{SignalID: "x"}); !errors.Is(err, harness.ErrNoSubscription) {
		t.Errorf("the replaced subscription still resolves: %v", err)
	}
	if got, err := c.Resolve(ctx, harness.SignalRef{SignalID: "y"}); err != nil || got.InvocationID != "i1" {
		t.Errorf("Resolve = %+v, %v", got, err)
	}
	if err := c.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, harness.SignalRef{InvocationID: "i1"}); !errors.Is(err, harness.ErrNoSubscription) {
		t.Errorf("a released subscription resolves: %v", err)
	}
}

func TestStoreCoordinatorWithoutStore(t *testing.T) {
	ctx := context.Background()
	var c harness.StoreCoordinator
	if err := c.Subscribe(ctx, harness.Subscription{InvocationID: "i"}); err == nil {
		t.Error("Subscribe without a store succeeded")
	}
	if _, err := c.Resolve(ctx, harness.SignalRef{SignalID: "x"}); err == nil {
		t.Error("Resolve without a store succeeded")
	}
	// Over an empty in-memory record store nothing resolves.
	c = harness.NewStoreCoordinator(checkpoint.NewMemoryStore(nil))
	if _, err := c.Resolve(ctx, harness.SignalRef{InvocationID: "i"}); !errors.Is(err, harness.ErrNoSubscription) {
		t.Errorf("Resolve: %v", err)
	}
}
