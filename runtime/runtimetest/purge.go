package runtimetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// testPurgeSession checks runtime.SessionPurger, for stores that
// implement it: a purge deletes the tenant's finished runs of the
// session that started by the cutoff, with their events (a run's and the
// session's listings alike), and keeps started runs, other sessions',
// other tenants', later runs and the runs it is told to keep; event ids are not reused after it;
// purging again, or a session without runs, deletes nothing.
func testPurgeSession(t *testing.T, s runtime.Store) {
	p, ok := s.(runtime.SessionPurger)
	if !ok {
		t.Skip("the store does not implement runtime.SessionPurger")
	}
	ctx := t.Context()
	for _, bad := range []runtime.PurgeRequest{{Tenant: "acme"}, {Tenant: "acme", SessionID: "s\x01"}, {Tenant: "acme", SessionID: "s", Keep: []string{""}}} {
		if _, err := p.PurgeSession(ctx, bad); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Fatalf("PurgeSession(%+v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
	startAt := func(tenant, id, session string, at time.Time) {
		t.Helper()
		if err := s.StartRun(ctx, runtime.Run{ID: id, Tenant: tenant, SessionID: session, AgentID: "agent", StartedAt: at}); err != nil {
			t.Fatal(err)
		}
		appendEvs(t, s, tenant, id, evs("a", "b"))
	}
	finish := func(tenant, id string) {
		t.Helper()
		if err := s.Finish(ctx, runtime.FinishRequest{Tenant: tenant, RunID: id, Status: runtime.StatusCompleted,
			Output: []byte(`{"text":"secret"}`), EndedAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	startAt("acme", "r1", "s1", t0)
	finish("acme", "r1")
	startAt("acme", "r2", "s1", t0.Add(time.Minute)) // finished, but named kept
	finish("acme", "r2")
	startAt("acme", "r2x", "s1", t0.Add(time.Minute)) // started (in flight on a replica, or a crash's): kept
	startAt("acme", "r3", "s1", t0.Add(2*time.Minute))
	finish("acme", "r3")
	startAt("acme", "r4", "s1", t0.Add(3*time.Minute)) // after the cutoff: a new conversation's
	startAt("acme", "r5", "s2", t0)                    // another session
	finish("acme", "r5")
	startAt("other", "r1", "s1", t0) // another tenant's session of the same id
	finish("other", "r1")
	before := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	if pr, ok := s.(runtime.Pruner); ok {
		if _, err := pr.Prune(ctx, runtime.PruneRequest{}); err != nil { // a store may count its size now
			t.Fatal(err)
		}
	}

	res, err := p.PurgeSession(ctx, runtime.PurgeRequest{Tenant: "acme", SessionID: "s1", StartedBy: t0.Add(2 * time.Minute), Keep: []string{"r2"}})
	if err != nil {
		t.Fatal(err)
	}
	if res != (runtime.PurgeResult{Runs: 2, Events: 4}) {
		t.Fatalf("PurgeSession = %+v, want 2 runs and 4 events", res)
	}
	for _, id := range []string{"r1", "r3"} {
		if _, err := s.Run(ctx, "acme", id); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("Run(acme, %s) after the purge = %v, want ErrNotFound", id, err)
		}
		if _, err := s.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: id}); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("Events of the purged run %s = %v, want ErrNotFound", id, err)
		}
	}
	list := func(tenant, session string) string {
		t.Helper()
		page, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, SessionID: session, PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(pluckRuns(page.Runs))
	}
	for _, c := range []struct{ tenant, session, want string }{
		{"acme", "s1", "[r4 r2x r2]"}, {"acme", "s2", "[r5]"}, {"other", "s1", "[r1]"}, {"acme", "", "[r5 r4 r2x r2]"},
	} {
		if got := list(c.tenant, c.session); got != c.want {
			t.Errorf("runs of %s/%s after the purge = %s, want %s", c.tenant, c.session, got, c.want)
		}
	}
	kept := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	if len(kept) != 6 || kept[0].RunID != "r2" || kept[5].RunID != "r4" {
		t.Fatalf("the session's events after the purge: %d, want r2's, r2x's and r4's 2 each", len(kept))
	}
	if got := events(t, s, runtime.EventsRequest{Tenant: "other", SessionID: "s1"}); len(got) != 2 {
		t.Fatalf("the other tenant's session lost events: %d left", len(got))
	}
	// A store that prunes too estimates what is left without the purged
	// runs.
	if pr, ok := s.(runtime.Pruner); ok {
		var want int64
		for _, tenant := range []string{"acme", "other"} {
			page, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				want += runtime.RunSize(r)
				for _, e := range events(t, s, runtime.EventsRequest{Tenant: tenant, RunID: r.ID}) {
					want += runtime.EventSize(e)
				}
			}
		}
		if res, err := pr.Prune(ctx, runtime.PruneRequest{}); err != nil || res.Bytes != want {
			t.Fatalf("Prune after the purge = %+v, %v; want %d bytes left", res, err, want)
		}
	}
	// Event ids are not reused: a new event numbers after every event
	// the session ever had.
	last := before[len(before)-1].ID
	if got := appendEvs(t, s, "acme", "r4", evs("c")); got[0].ID <= last {
		t.Fatalf("an event appended after the purge has id %d, not above %d", got[0].ID, last)
	}
	// Again, and a session without runs: nothing, and no error.
	for _, req := range []runtime.PurgeRequest{
		{Tenant: "acme", SessionID: "s1", StartedBy: t0.Add(2 * time.Minute), Keep: []string{"r2"}}, {Tenant: "acme", SessionID: "none"},
	} {
		if res, err := p.PurgeSession(ctx, req); err != nil || res != (runtime.PurgeResult{}) {
			t.Fatalf("PurgeSession(%+v) = %+v, %v; want nothing purged", req, res, err)
		}
	}
	// Only limits the purge to the runs it names: a started one, or one
	// of another session or tenant, is not purged by naming it.
	finish("acme", "r4")
	for _, req := range []runtime.PurgeRequest{
		{Tenant: "acme", SessionID: "s1", Only: []string{"r2x"}},
		{Tenant: "acme", SessionID: "s1", Only: []string{"r5"}},
		{Tenant: "other", SessionID: "s1", Only: []string{"r4"}},
	} {
		if res, err := p.PurgeSession(ctx, req); err != nil || res != (runtime.PurgeResult{}) {
			t.Fatalf("PurgeSession(%+v) = %+v, %v; want nothing purged", req, res, err)
		}
	}
	if res, err := p.PurgeSession(ctx, runtime.PurgeRequest{Tenant: "acme", SessionID: "s1", Only: []string{"r4"}}); err != nil || res.Runs != 1 || res.Events != 3 {
		t.Fatalf("PurgeSession(only r4) = %+v, %v; want r4 with 3 events", res, err)
	}
	if got := list("acme", "s1"); got != "[r2x r2]" {
		t.Fatalf("runs of acme/s1 after purging r4 only: %s, want r2x and r2", got)
	}
	// A zero cutoff purges every run of the session.
	if res, err := p.PurgeSession(ctx, runtime.PurgeRequest{Tenant: "acme", SessionID: "s1"}); err != nil || res.Runs != 1 || res.Events != 2 {
		t.Fatalf("PurgeSession(no cutoff) = %+v, %v; want r2 with 2 events", res, err)
	}
	if got := list("acme", "s1"); got != "[r2x]" {
		t.Fatalf("runs of acme/s1 after purging all: %s, want the started r2x", got)
	}
}

func pluckRuns(runs []runtime.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}
