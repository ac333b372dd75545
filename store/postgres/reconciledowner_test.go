package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/postgres"
)

// A replica whose liveness lock is lost for longer than the others'
// grace is counted as gone, and another replica reconciles the run of
// its turn in flight: the turn has not committed yet, so the run fails
// run_interrupted. The turn then completes (its session write commits)
// and its replica writes the run's end: the record says completed, as
// the committed turn does, not failed for good (the end used to be
// refused as a conflict, and given up).
func TestOwnersEndReplacesAReconciliationThatLostTheRace(t *testing.T) {
	b := open(t, func(c *postgres.Config) { c.OwnerGrace = -1 })
	ctx := t.Context()
	a, err := postgres.Open(ctx, postgres.Config{URL: dbURL(), Schema: b.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	recA, err := runtime.NewRecorder(runtime.RecorderConfig{Store: a.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recA.Close(context.Background()) })
	recB, err := runtime.NewRecorder(runtime.RecorderConfig{Store: b.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recB.Close(context.Background()) })

	turn, tctx, err := recA.Begin(ctx, runtime.BeginRequest{SessionID: "s", AgentID: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Accept(tctx); err != nil {
		t.Fatal(err)
	}
	if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "hel"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// a's lock is lost, and stays lost while b reconciles: b finds the
	// turn uncommitted (it has not committed yet).
	postgres.LoseReplicaLock(a)
	lost(t, b, turn.ID())
	notYet := func(context.Context, runtime.Run) (runtime.Resolution, error) { return runtime.Resolution{}, nil }
	sum, err := recB.ReconcileAbandoned(ctx, notYet)
	if err != nil || sum.Failed != 1 {
		t.Fatalf("b's reconcile = %+v, %v; want a's run failed", sum, err)
	}
	run, err := b.Runs().Run(ctx, "", turn.ID())
	if err != nil || run.Status != runtime.StatusFailed || run.Error == nil || run.Error.Category != runtime.CategoryInterrupted {
		t.Fatalf("a's run after b's reconcile = %+v, %v", run, err)
	}
	if err := postgres.TakeReplicaLockAgain(ctx, a); err != nil {
		t.Fatal(err)
	}

	// a's turn commits and ends: its end is the run's.
	if err := turn.Complete(tctx, map[string]string{"text": "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Flush(ctx); err != nil {
		t.Fatalf("a's end of its run was refused: %v", err)
	}
	run, err = b.Runs().Run(ctx, "", turn.ID())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != runtime.StatusCompleted || run.Error != nil || string(run.Output) != `{"text":"hello"}` {
		t.Fatalf("a's run after its turn completed = %+v (%v), want completed with the output", run, run.Error)
	}
	evs, err := b.Runs().Events(ctx, runtime.EventsRequest{RunID: turn.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs); n == 0 || evs[n-1].Type != runtime.EventRequestCompleted {
		t.Fatalf("a's run's events end with %v, want %s", evs, runtime.EventRequestCompleted)
	}
	// Final now: a later reconcile (a's lock lost again) leaves it.
	postgres.LoseReplicaLock(a)
	if sum, err := recB.ReconcileAbandoned(ctx, notYet); err != nil || sum.Total() != 0 {
		t.Fatalf("a reconcile after the run's end = %+v, %v", sum, err)
	}
	if f := (runtime.FinishRequest{Tenant: "", RunID: turn.ID(), Status: runtime.StatusFailed,
		Error: &runtime.RunError{Category: runtime.CategoryInterrupted}}); !errors.Is(b.Runs().Finish(ctx, f), runtime.ErrConflict) {
		t.Fatal("a completed run took an interrupted end")
	}
}

// lost waits until b counts a's replica as gone: a's lock is free a
// moment after its connection closes (when the server ends its session).
func lost(t *testing.T, b *postgres.Store, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := unfinished(t, b, true); got != "["+id+"]"; got = unfinished(t, b, true) {
		if time.Now().After(deadline) {
			t.Fatalf("b lists as abandoned %s, want [%s]", got, id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
