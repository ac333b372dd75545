package runtimetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// interrupted is the end reconciliation gives a run whose turn did not
// commit as far as it could tell (runtime.Recorder.Reconcile).
func interrupted() *runtime.FinishRequest {
	return &runtime.FinishRequest{Status: runtime.StatusFailed, EndedAt: t0.Add(time.Minute),
		Error: &runtime.RunError{Bucket: "retryable_transient", Category: runtime.CategoryInterrupted, Message: "interrupted"}}
}

// testInterruptedRunTakesItsOwnersEnd checks runtime.Writable: a run
// that reconciliation failed as interrupted (its owner alive after all,
// on a store shared by processes) takes its owner's events and one end
// that is not itself an interrupted failure, which replaces it; a second
// reconciler's failure, and any write after the owner's end, is
// ErrConflict.
func testInterruptedRunTakesItsOwnersEnd(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	start(t, s, "acme", "r1", "s")
	appendEvs(t, s, "acme", "r1", evs(runtime.EventRequestStarted))
	// Reconciliation ends it: failed, run_interrupted.
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r1", Events: evs(runtime.EventRequestFailed),
		Finish: interrupted()}); err != nil {
		t.Fatalf("reconciliation's end: %v", err)
	}
	// Another reconciler, which listed the run while it was started, is
	// refused, whole.
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r1", Events: evs(runtime.EventRequestFailed),
		Finish: interrupted()}); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("a second interrupted end = %v, want ErrConflict", err)
	}
	f := *interrupted()
	f.Tenant, f.RunID = "acme", "r1"
	if err := s.Finish(ctx, f); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("Finish: a second interrupted end = %v, want ErrConflict", err)
	}
	if got := typesOf(events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r1"})); !slices.Equal(got,
		[]string{runtime.EventRequestStarted, runtime.EventRequestFailed}) {
		t.Fatalf("events after a refused second end = %v", got)
	}
	// The owner's events, and its end.
	appendEvs(t, s, "acme", "r1", evs("x.delta"))
	end := t0.Add(2 * time.Minute)
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r1", Events: evs(runtime.EventRequestCompleted),
		Finish: &runtime.FinishRequest{Status: runtime.StatusCompleted, Output: json.RawMessage(`"done"`), EndedAt: end}}); err != nil {
		t.Fatalf("the owner's end of an interrupted run: %v", err)
	}
	r := getRun(t, s, "acme", "r1")
	if r.Status != runtime.StatusCompleted || string(r.Output) != `"done"` || r.Error != nil || !r.EndedAt.Equal(end) {
		t.Fatalf("run after its owner's end = %+v, want completed with its output and no error", r)
	}
	got := events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r1"})
	if !slices.Equal(typesOf(got), []string{runtime.EventRequestStarted, runtime.EventRequestFailed, "x.delta", runtime.EventRequestCompleted}) ||
		!slices.Equal(pluck(got, func(e runtime.Event) int64 { return e.Seq }), []int64{1, 2, 3, 4}) {
		t.Fatalf("events after the owner's end = %v", got)
	}
	// Final now: nothing more.
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r1", Events: evs("x")}); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("Append after the owner's end = %v, want ErrConflict", err)
	}
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r1", Status: runtime.StatusFailed,
		Error: &runtime.RunError{Category: "x"}}); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("Finish after the owner's end = %v, want ErrConflict", err)
	}

	// Finish too: a suspended end replaces the interrupted one.
	start(t, s, "acme", "r2", "s")
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r2", Finish: interrupted()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r2", Status: runtime.StatusSuspended, InvocationID: "inv-2"}); err != nil {
		t.Fatalf("Finish: the owner's end of an interrupted run: %v", err)
	}
	if r := getRun(t, s, "acme", "r2"); r.Status != runtime.StatusSuspended || r.InvocationID != "inv-2" || r.Error != nil {
		t.Errorf("run after its owner's Finish = %+v", r)
	}
	// A run failed otherwise is final.
	start(t, s, "acme", "r3", "s")
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r3", Status: runtime.StatusFailed,
		Error: &runtime.RunError{Bucket: "retryable_transient", Category: "provider_unavailable"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r3", Status: runtime.StatusCompleted}); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("Finish of a run that failed (not interrupted) = %v, want ErrConflict", err)
	}

	bw, ok := s.(runtime.BatchWriter)
	if !ok {
		return
	}
	// The owner's end through a group commit, with another turn's
	// records; the run started by a batch (a store may cache its head).
	rec := func(id string, events []runtime.Event, f *runtime.FinishRequest) runtime.TurnRecord {
		return runtime.TurnRecord{Append: runtime.AppendRequest{Tenant: "acme", RunID: id, Events: events, Finish: f}}
	}
	b := rec("b1", evs(runtime.EventRequestStarted), nil)
	b.Start = &runtime.Run{ID: "b1", Tenant: "acme", SessionID: "s", AgentID: "agent", StartedAt: t0}
	if _, err := bw.WriteTurns(ctx, []runtime.TurnRecord{b}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "b1", Events: evs(runtime.EventRequestFailed),
		Finish: interrupted()}); err != nil {
		t.Fatalf("reconciliation's end: %v", err)
	}
	// A batch holding a second interrupted end is refused whole.
	other := rec("b2", evs(runtime.EventRequestStarted), nil)
	other.Start = &runtime.Run{ID: "b2", Tenant: "acme", SessionID: "s2", AgentID: "agent", StartedAt: t0}
	if _, err := bw.WriteTurns(ctx, []runtime.TurnRecord{other, rec("b1", evs(runtime.EventRequestFailed), interrupted())}); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("WriteTurns with a second interrupted end = %v, want ErrConflict", err)
	}
	if _, err := s.Run(ctx, "acme", "b2"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("a refused batch stored its other run: %v", err)
	}
	if _, err := bw.WriteTurns(ctx, []runtime.TurnRecord{other, rec("b1", evs("x.delta", runtime.EventRequestCompleted),
		&runtime.FinishRequest{Status: runtime.StatusCompleted, Output: json.RawMessage(`"ok"`), EndedAt: end})}); err != nil {
		t.Fatalf("WriteTurns: the owner's end of an interrupted run: %v", err)
	}
	if r := getRun(t, s, "acme", "b1"); r.Status != runtime.StatusCompleted || string(r.Output) != `"ok"` || r.Error != nil {
		t.Errorf("run after its owner's batched end = %+v", r)
	}
	if got := typesOf(events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "b1"})); !slices.Equal(got,
		[]string{runtime.EventRequestStarted, runtime.EventRequestFailed, "x.delta", runtime.EventRequestCompleted}) {
		t.Errorf("events after the owner's batched end = %v", got)
	}
	if _, err := bw.WriteTurns(ctx, []runtime.TurnRecord{rec("b1", nil, &runtime.FinishRequest{Status: runtime.StatusCancelled})}); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("WriteTurns after the owner's end = %v, want ErrConflict", err)
	}
}
