package runtime_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/runtime"
)

// Another process on the store reconciles the run of a turn still in
// flight (a second process starting on the file, or a replica that
// counted this one as gone): the turn has not committed, so the run
// fails run_interrupted. The turn then commits and ends: its end, on
// the group commit or on its own path, replaces the reconciler's guess,
// so the record agrees with the committed turn, and a completed run is
// final again. Before, the end was refused as a conflict and given up.
func TestTurnEndReplacesAnInterruptedReconciliation(t *testing.T) {
	for _, sync := range []bool{false, true} {
		name := "group commit"
		if sync {
			name = "synchronous"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			store := runtime.NewMemoryStore(runtime.MemoryConfig{})
			owner, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Synchronous: sync})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = owner.Close(context.Background()) })
			turn, tctx, err := owner.Begin(ctx, runtime.BeginRequest{SessionID: "s", AgentID: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			if err := turn.Accept(tctx); err != nil {
				t.Fatal(err)
			}
			if err := turn.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			other := crash(t, store) // another process: the turn is not its own
			notYet := func(context.Context, runtime.Run) (runtime.Resolution, error) { return runtime.Resolution{}, nil }
			if sum, err := other.Reconcile(ctx, notYet); err != nil || sum.Failed != 1 {
				t.Fatalf("Reconcile = %+v, %v; want the run failed", sum, err)
			}
			if err := turn.Complete(tctx, "done"); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if err := turn.Flush(ctx); err != nil {
				t.Fatalf("the turn's end was refused: %v", err)
			}
			run, err := store.Run(ctx, "", turn.ID())
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != runtime.StatusCompleted || run.Error != nil || string(run.Output) != `"done"` {
				t.Fatalf("run = %+v, want completed with its output", run)
			}
			// A reconciler that still finds it uncommitted changes nothing.
			if sum, err := other.Reconcile(ctx, notYet); err != nil || sum.Total() != 0 {
				t.Fatalf("Reconcile after the end = %+v, %v", sum, err)
			}
			if run, _ := store.Run(ctx, "", turn.ID()); run.Status != runtime.StatusCompleted {
				t.Fatalf("run after a later Reconcile = %s", run.Status)
			}
		})
	}
}
