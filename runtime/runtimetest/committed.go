package runtimetest

import (
	"errors"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// testPurgeCommitted checks PurgeRequest.Committed, for stores that
// implement runtime.SessionPurger: a started run it names is purged with
// its events (a turn that committed to the deleted conversation on
// another process, its end still to be written), whenever it started
// (the other process's clock may be ahead of the cutoff's), unless
// kept or of another session or tenant; a started run it does not name
// is kept. Writing the end of a purged run fails with
// ErrNotFound, and starts nothing.
func testPurgeCommitted(t *testing.T, s runtime.Store) {
	p, ok := s.(runtime.SessionPurger)
	if !ok {
		t.Skip("the store does not implement runtime.SessionPurger")
	}
	ctx := t.Context()
	if _, err := p.PurgeSession(ctx, runtime.PurgeRequest{Tenant: "acme", SessionID: "s", Committed: []string{""}}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("PurgeSession(committed empty id) = %v, want ErrInvalidRequest", err)
	}
	startAt := func(tenant, id, session string, at time.Time) {
		t.Helper()
		if err := s.StartRun(ctx, runtime.Run{ID: id, Tenant: tenant, SessionID: session, AgentID: "agent", StartedAt: at}); err != nil {
			t.Fatal(err)
		}
		appendEvs(t, s, tenant, id, evs("a", "b"))
	}
	startAt("acme", "c1", "s1", t0)                    // committed, started: purged
	startAt("acme", "c2", "s1", t0)                    // committed, started, but kept
	startAt("acme", "w1", "s1", t0)                    // started, not committed (waits for the lock): kept
	startAt("acme", "c3", "s1", t0.Add(3*time.Minute)) // committed, after the cutoff (a clock ahead): purged
	startAt("acme", "c4", "s2", t0)                    // committed, another session: kept
	startAt("other", "c1", "s1", t0)                   // another tenant's: kept
	startAt("acme", "f1", "s1", t0)                    // finished: purged as ever
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "f1", Status: runtime.StatusCompleted, EndedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, err := p.PurgeSession(ctx, runtime.PurgeRequest{Tenant: "acme", SessionID: "s1", StartedBy: t0.Add(2 * time.Minute),
		Keep: []string{"c2"}, Committed: []string{"c1", "c2", "c3", "c4"}})
	if err != nil {
		t.Fatal(err)
	}
	if res != (runtime.PurgeResult{Runs: 3, Events: 6}) {
		t.Fatalf("PurgeSession = %+v, want 3 runs (c1, c3, f1) and 6 events", res)
	}
	if _, err := s.Run(ctx, "acme", "c1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Run(c1) after the purge = %v, want ErrNotFound", err)
	}
	if _, err := s.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: "c1"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Events(c1) after the purge = %v, want ErrNotFound", err)
	}
	if _, err := s.Run(ctx, "acme", "c3"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Run(c3) after the purge = %v, want ErrNotFound", err)
	}
	for _, k := range []struct{ tenant, id string }{{"acme", "c2"}, {"acme", "w1"}, {"acme", "c4"}, {"other", "c1"}} {
		run, err := s.Run(ctx, k.tenant, k.id)
		if err != nil || run.Status != runtime.StatusStarted {
			t.Fatalf("Run(%s, %s) after the purge = %+v, %v; want it kept, started", k.tenant, k.id, run, err)
		}
	}
	// The end of the purged run, written by the process that ran it,
	// finds it gone, whichever way it is written.
	end := &runtime.FinishRequest{Tenant: "acme", RunID: "c1", Status: runtime.StatusCompleted, EndedAt: t0.Add(time.Minute)}
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "c1", Events: evs("c"), Finish: end}); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Append(end of the purged run) = %v, want ErrNotFound", err)
	}
	if err := s.Finish(ctx, *end); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Finish(the purged run) = %v, want ErrNotFound", err)
	}
	if bw, ok := s.(runtime.BatchWriter); ok {
		recs := []runtime.TurnRecord{{Append: runtime.AppendRequest{Tenant: "acme", RunID: "c1", Events: evs("c"), Finish: end}}}
		if _, err := bw.WriteTurns(ctx, recs); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("WriteTurns(end of the purged run) = %v, want ErrNotFound", err)
		}
	}
	if _, err := s.Run(ctx, "acme", "c1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Run(c1) after its end was written = %v, want ErrNotFound", err)
	}
	page, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", SessionID: "s1", PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(page.Runs); got != 2 {
		t.Fatalf("runs of acme/s1 after the purge: %v, want w1 and c2", pluckRuns(page.Runs))
	}
}
