// Package runtimetest is the conformance suite every runtime.Store
// backend runs: run lifecycle and final-status transitions (a run that
// reconciliation failed as interrupted taking its owner's end), event ID and
// Seq assignment (also under concurrent appends), replay after an ID,
// pagination, listing by parent and by message id prefix, tenant
// isolation, not-found and invalid requests, the optional
// runtime.Recoverable and runtime.BatchWriter, and a Recorder
// group-committing many concurrent turns of many sessions on the store
// (per-session order, increasing ids, Close draining the queue).
//
//	func TestRunStore(t *testing.T) {
//		runtimetest.Run(t, func(t *testing.T) runtime.Store { return openTestStore(t).Runs() })
//	}
//
// [BenchmarkTurn] and [BenchmarkTurnConcurrent] measure a turn's
// recording cost on a backend.
package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/armature-go/armature/runtime"
)

// Run runs the suite. newStore returns a fresh, empty store for each
// subtest; the suite closes nothing (use t.Cleanup in newStore).
func Run(t *testing.T, newStore func(t *testing.T) runtime.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s runtime.Store)
	}{
		{"StartAndGet", testStartAndGet},
		{"StartConflict", testStartConflict},
		{"AppendAssignsIDAndSeq", testAppend},
		{"AppendWithFinish", testAppendWithFinish},
		{"FinishTransitions", testFinishTransitions},
		{"InterruptedRunTakesItsOwnersEnd", testInterruptedRunTakesItsOwnersEnd},
		{"SuspendThenResume", testSuspendResume},
		{"TenantIsolation", testTenantIsolation},
		{"ConcurrentAppends", testConcurrentAppends},
		{"ReplayAfterID", testReplay},
		{"ListRunsPagination", testPagination},
		{"ListRunsByParent", testListByParent},
		{"MessageID", testMessageID},
		{"ListRunsByMessageIDPrefix", testListByMessagePrefix},
		{"NotFound", testNotFound},
		{"InvalidRequests", testInvalid},
		{"NoAliasing", testNoAliasing},
		{"CanceledContext", testCanceled},
		{"Unfinished", testUnfinished},
		{"BatchWriter", testBatchWriter},
		{"RecorderGroupCommit", testRecorderGroupCommit},
		{"Prune", testPrune},
		{"PurgeSession", testPurgeSession},
		{"PurgeCommitted", testPurgeCommitted},
		{"FailedRunText", testFailedRunText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

// t0 is the suite's fixed start time; whole microseconds, so that every
// backend stores it exactly.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func start(t testing.TB, s runtime.Store, tenant, id, session string) runtime.Run {
	t.Helper()
	r := runtime.Run{ID: id, Tenant: tenant, SessionID: session, AgentID: "agent", StartedAt: t0}
	if err := s.StartRun(t.Context(), r); err != nil {
		t.Fatalf("StartRun(%q, %q): %v", tenant, id, err)
	}
	r.Status = runtime.StatusStarted
	return r
}

func evs(types ...string) []runtime.Event {
	out := make([]runtime.Event, len(types))
	for i, typ := range types {
		out[i] = runtime.Event{Type: typ, Time: t0.Add(time.Duration(i) * time.Second),
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	return out
}

func appendEvs(t testing.TB, s runtime.Store, tenant, id string, events []runtime.Event) []runtime.Event {
	t.Helper()
	got, err := s.Append(t.Context(), runtime.AppendRequest{Tenant: tenant, RunID: id, Events: events})
	if err != nil {
		t.Fatalf("Append(%q, %q): %v", tenant, id, err)
	}
	return got
}

func getRun(t *testing.T, s runtime.Store, tenant, id string) runtime.Run {
	t.Helper()
	r, err := s.Run(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("Run(%q, %q): %v", tenant, id, err)
	}
	return *r
}

func events(t *testing.T, s runtime.Store, req runtime.EventsRequest) []runtime.Event {
	t.Helper()
	got, err := s.Events(t.Context(), req)
	if err != nil {
		t.Fatalf("Events(%+v): %v", req, err)
	}
	return got
}

// pluck returns f of each event.
func pluck[T any](evs []runtime.Event, f func(runtime.Event) T) []T {
	out := make([]T, len(evs))
	for i, e := range evs {
		out[i] = f(e)
	}
	return out
}

func ids(evs []runtime.Event) []int64 { return pluck(evs, func(e runtime.Event) int64 { return e.ID }) }

func typesOf(evs []runtime.Event) []string {
	return pluck(evs, func(e runtime.Event) string { return e.Type })
}

func testStartAndGet(t *testing.T, s runtime.Store) {
	want := runtime.Run{ID: "r1", Tenant: "acme", SessionID: "s1", AgentID: "a1", ParentID: "r0",
		CorrelationID: "c1", ConversationID: "thread-7", Status: runtime.StatusStarted, StartedAt: t0}
	if err := s.StartRun(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, getRun(t, s, "acme", "r1")); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	// A zero status means started; a zero StartedAt is defaulted.
	if err := s.StartRun(t.Context(), runtime.Run{ID: "r2", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if r := getRun(t, s, "acme", "r2"); r.Status != runtime.StatusStarted || r.StartedAt.IsZero() || !r.EndedAt.IsZero() {
		t.Errorf("defaulted run = %+v", r)
	}
}

func testStartConflict(t *testing.T, s runtime.Store) {
	start(t, s, "acme", "r1", "s")
	if err := s.StartRun(t.Context(), runtime.Run{ID: "r1", Tenant: "acme"}); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("second StartRun = %v, want ErrConflict", err)
	}
	if err := s.Finish(t.Context(), runtime.FinishRequest{Tenant: "acme", RunID: "r1", Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartRun(t.Context(), runtime.Run{ID: "r1", Tenant: "acme"}); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("restarting a finished run = %v, want ErrConflict", err)
	}
	if r := getRun(t, s, "acme", "r1"); r.Status != runtime.StatusCompleted {
		t.Errorf("status after a refused restart = %q", r.Status)
	}
	// Run ids are scoped by tenant.
	start(t, s, "other", "r1", "s")
}

func testAppend(t *testing.T, s runtime.Store) {
	r := runtime.Run{ID: "r1", Tenant: "acme", SessionID: "s1", AgentID: "a1", ParentID: "p0", StartedAt: t0}
	if err := s.StartRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	in := evs(runtime.EventRequestStarted, runtime.EventAdapterEvent)
	in[0].Data = nil
	in[1].RunID, in[1].Seq, in[1].ID, in[1].SessionID = "ignored", 99, 99, "ignored"
	first := appendEvs(t, s, "acme", "r1", in)
	second := appendEvs(t, s, "acme", "r1", []runtime.Event{{Type: runtime.EventAdapterEvent, Data: json.RawMessage(`{"x":[1,2]}`)}})
	got := append(first, second...)
	if len(got) != 3 {
		t.Fatalf("stored %d events, want 3", len(got))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d: seq %d, want %d", i, e.Seq, i+1)
		}
		if i > 0 && e.ID <= got[i-1].ID {
			t.Errorf("event %d: id %d not above %d", i, e.ID, got[i-1].ID)
		}
		if e.RunID != "r1" || e.Tenant != "acme" || e.SessionID != "s1" || e.AgentID != "a1" || e.ParentRequestID != "p0" {
			t.Errorf("event %d identity = %+v", i, e)
		}
	}
	if got[2].Time.IsZero() {
		t.Error("a zero event time was not defaulted")
	}
	if !got[1].Time.Equal(in[1].Time) {
		t.Errorf("event time = %v, want %v", got[1].Time, in[1].Time)
	}
	if len(got[0].Data) != 0 || string(got[1].Data) != `{"i":1}` || string(got[2].Data) != `{"x":[1,2]}` {
		t.Errorf("data = %s, %s, %s", got[0].Data, got[1].Data, got[2].Data)
	}
	if diff := cmp.Diff(got, events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r1"})); diff != "" {
		t.Errorf("Events by run differ from Append's result (-append +events):\n%s", diff)
	}
	if diff := cmp.Diff(got, events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})); diff != "" {
		t.Errorf("Events by session differ from Append's result (-append +events):\n%s", diff)
	}
}

func testAppendWithFinish(t *testing.T, s runtime.Store) {
	start(t, s, "acme", "r1", "s")
	end := t0.Add(time.Minute)
	got, err := s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: "r1",
		Events: evs(runtime.EventRequestStarted, runtime.EventRequestCompleted),
		Finish: &runtime.FinishRequest{Status: runtime.StatusCompleted, Output: json.RawMessage(`"done"`), EndedAt: end}})
	if err != nil || len(got) != 2 {
		t.Fatalf("Append with finish = %d events, %v", len(got), err)
	}
	r := getRun(t, s, "acme", "r1")
	if r.Status != runtime.StatusCompleted || string(r.Output) != `"done"` || !r.EndedAt.Equal(end) {
		t.Errorf("finished run = %+v", r)
	}
	// A batch into a finished run is refused whole.
	_, err = s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: "r1", Events: evs("x")})
	if !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("Append to a finished run = %v, want ErrConflict", err)
	}
	// A finish that fails leaves the batch unstored.
	start(t, s, "acme", "r2", "s")
	_, err = s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: "r2", Events: evs("x"),
		Finish: &runtime.FinishRequest{RunID: "r3", Status: runtime.StatusCompleted}})
	if !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("Append with a finish of another run = %v, want ErrInvalidRequest", err)
	}
	if n := len(events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r2"})); n != 0 {
		t.Errorf("a refused batch stored %d events", n)
	}
	// Finish alone, without events.
	if _, err := s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: "r2",
		Finish: &runtime.FinishRequest{Status: runtime.StatusCancelled}}); err != nil {
		t.Fatalf("Append of a finish alone: %v", err)
	}
	if r := getRun(t, s, "acme", "r2"); r.Status != runtime.StatusCancelled || r.EndedAt.IsZero() {
		t.Errorf("run after a finish alone = %+v", r)
	}
}

func testFinishTransitions(t *testing.T, s runtime.Store) {
	rerr := &runtime.RunError{Bucket: "retryable_transient", Category: "provider_unavailable", Message: "try later"}
	tests := []struct {
		name string
		req  runtime.FinishRequest
		want runtime.Run
	}{
		{"completed", runtime.FinishRequest{Status: runtime.StatusCompleted, Output: json.RawMessage(`{"text":"hi"}`)},
			runtime.Run{Status: runtime.StatusCompleted, Output: json.RawMessage(`{"text":"hi"}`)}},
		{"failed", runtime.FinishRequest{Status: runtime.StatusFailed, Error: rerr},
			runtime.Run{Status: runtime.StatusFailed, Error: rerr}},
		{"cancelled", runtime.FinishRequest{Status: runtime.StatusCancelled},
			runtime.Run{Status: runtime.StatusCancelled}},
		{"suspended", runtime.FinishRequest{Status: runtime.StatusSuspended, InvocationID: "inv-1"},
			runtime.Run{Status: runtime.StatusSuspended, InvocationID: "inv-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := start(t, s, "acme", tt.name, "s")
			end := t0.Add(time.Hour)
			req := tt.req
			req.Tenant, req.RunID, req.EndedAt = "acme", tt.name, end
			if err := s.Finish(t.Context(), req); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			want := tt.want
			want.ID, want.Tenant, want.SessionID, want.AgentID, want.StartedAt, want.EndedAt = run.ID, run.Tenant, run.SessionID, run.AgentID, t0, end
			if diff := cmp.Diff(want, getRun(t, s, "acme", tt.name)); diff != "" {
				t.Errorf("finished run (-want +got):\n%s", diff)
			}
			// A final status is final.
			for _, st := range []runtime.Status{runtime.StatusCompleted, runtime.StatusFailed} {
				err := s.Finish(t.Context(), runtime.FinishRequest{Tenant: "acme", RunID: tt.name, Status: st})
				if !errors.Is(err, runtime.ErrConflict) {
					t.Errorf("Finish(%s) of a %s run = %v, want ErrConflict", st, tt.name, err)
				}
			}
			if r := getRun(t, s, "acme", tt.name); r.Status != tt.want.Status {
				t.Errorf("status after a refused finish = %q", r.Status)
			}
		})
	}
	start(t, s, "acme", "live", "s")
	for _, st := range []runtime.Status{"", runtime.StatusStarted, "paused"} {
		err := s.Finish(t.Context(), runtime.FinishRequest{Tenant: "acme", RunID: "live", Status: st})
		if !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("Finish with status %q = %v, want ErrInvalidRequest", st, err)
		}
	}
}

func testSuspendResume(t *testing.T, s runtime.Store) {
	start(t, s, "acme", "turn1", "s1")
	if _, err := s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: "turn1",
		Events: evs(runtime.EventRequestStarted, runtime.EventRequestSuspended, runtime.EventApprovalRequested),
		Finish: &runtime.FinishRequest{Status: runtime.StatusSuspended, InvocationID: "inv-1"}}); err != nil {
		t.Fatal(err)
	}
	// The suspended run takes no more events: the resumed turn is a new run.
	if _, err := s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: "turn1", Events: evs(runtime.EventApprovalResolved)}); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("Append to a suspended run = %v, want ErrConflict", err)
	}
	if err := s.StartRun(t.Context(), runtime.Run{ID: "turn1", Tenant: "acme", SessionID: "s1"}); !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("restarting a suspended run = %v, want ErrConflict", err)
	}
	if err := s.StartRun(t.Context(), runtime.Run{ID: "turn2", Tenant: "acme", SessionID: "s1", AgentID: "agent", ParentID: "turn1"}); err != nil {
		t.Fatal(err)
	}
	got := appendEvs(t, s, "acme", "turn2", evs(runtime.EventRequestStarted, runtime.EventApprovalResolved))
	if got[0].ParentRequestID != "turn1" || got[0].Seq != 1 {
		t.Errorf("resumed run's first event = %+v", got[0])
	}
	if r := getRun(t, s, "acme", "turn2"); r.ParentID != "turn1" || r.Status != runtime.StatusStarted {
		t.Errorf("resumed run = %+v", r)
	}
	if r := getRun(t, s, "acme", "turn1"); r.InvocationID != "inv-1" || r.Status != runtime.StatusSuspended {
		t.Errorf("suspended run = %+v", r)
	}
	all := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	var types []string
	for _, e := range all {
		types = append(types, e.RunID+" "+e.Type)
	}
	want := []string{"turn1 " + runtime.EventRequestStarted, "turn1 " + runtime.EventRequestSuspended,
		"turn1 " + runtime.EventApprovalRequested, "turn2 " + runtime.EventRequestStarted, "turn2 " + runtime.EventApprovalResolved}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("session events (-want +got):\n%s", diff)
	}
}

func testTenantIsolation(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	start(t, s, "a", "r1", "s")
	appendEvs(t, s, "a", "r1", evs("x", "y"))
	start(t, s, "b", "r2", "s")
	appendEvs(t, s, "b", "r2", evs("z"))
	if _, err := s.Run(ctx, "b", "r1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Run of another tenant's run = %v, want ErrNotFound", err)
	}
	if _, err := s.Run(ctx, "", "r1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Run in the empty tenant of another tenant's run = %v, want ErrNotFound", err)
	}
	if _, err := s.Append(ctx, runtime.AppendRequest{Tenant: "b", RunID: "r1", Events: evs("x")}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Append to another tenant's run = %v, want ErrNotFound", err)
	}
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "b", RunID: "r1", Status: runtime.StatusFailed}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Finish of another tenant's run = %v, want ErrNotFound", err)
	}
	if _, err := s.Events(ctx, runtime.EventsRequest{Tenant: "b", RunID: "r1"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Events of another tenant's run = %v, want ErrNotFound", err)
	}
	// The same session id in two tenants is two sessions.
	for tenant, want := range map[string]string{"a": "r1", "b": "r2"} {
		for _, e := range events(t, s, runtime.EventsRequest{Tenant: tenant, SessionID: "s"}) {
			if e.RunID != want || e.Tenant != tenant {
				t.Errorf("tenant %q sees event %+v", tenant, e)
			}
		}
		for _, sess := range []string{"", "s"} {
			resp, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, SessionID: sess})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Runs) != 1 || resp.Runs[0].ID != want {
				t.Errorf("tenant %q lists %+v", tenant, resp.Runs)
			}
		}
	}
	if r := getRun(t, s, "a", "r1"); r.Status != runtime.StatusStarted {
		t.Errorf("another tenant changed run a/r1: %+v", r)
	}
}

func testConcurrentAppends(t *testing.T, s runtime.Store) {
	const runs, batches, per = 8, 10, 3
	for i := range runs {
		start(t, s, "acme", fmt.Sprintf("r%d", i), fmt.Sprintf("s%d", i%2))
	}
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			for range batches {
				if _, err := s.Append(t.Context(), runtime.AppendRequest{Tenant: "acme", RunID: fmt.Sprintf("r%d", i),
					Events: evs(slices.Repeat([]string{runtime.EventAdapterEvent}, per)...)}); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i := range runs {
		got := events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: fmt.Sprintf("r%d", i)})
		if len(got) != batches*per {
			t.Fatalf("run %d has %d events, want %d", i, len(got), batches*per)
		}
		for j, e := range got {
			if e.Seq != int64(j+1) {
				t.Errorf("run %d event %d: seq %d", i, j, e.Seq)
			}
			if j > 0 && e.ID <= got[j-1].ID {
				t.Errorf("run %d event %d: id %d not above %d", i, j, e.ID, got[j-1].ID)
			}
			if seen[e.ID] {
				t.Errorf("id %d assigned twice", e.ID)
			}
			seen[e.ID] = true
		}
	}
	for _, sess := range []string{"s0", "s1"} {
		got := ids(events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: sess}))
		if len(got) != runs/2*batches*per || !slices.IsSorted(got) {
			t.Errorf("session %s: %d events, sorted %v", sess, len(got), slices.IsSorted(got))
		}
	}
	// New events get IDs above every stored one.
	start(t, s, "acme", "late", "s0")
	late := appendEvs(t, s, "acme", "late", evs("x"))
	for id := range seen {
		if late[0].ID <= id {
			t.Fatalf("a later event got id %d, not above %d", late[0].ID, id)
		}
	}
}

func testReplay(t *testing.T, s runtime.Store) {
	start(t, s, "acme", "r1", "s")
	start(t, s, "acme", "r2", "s")
	start(t, s, "acme", "other", "s-other")
	var all []runtime.Event
	for i := range 4 {
		all = append(all, appendEvs(t, s, "acme", []string{"r1", "r2"}[i%2], evs("a", "b"))...)
		appendEvs(t, s, "acme", "other", evs("noise"))
	}
	tests := []struct {
		name string
		req  runtime.EventsRequest
		want []runtime.Event
	}{
		{"session from start", runtime.EventsRequest{SessionID: "s"}, all},
		{"session after an id", runtime.EventsRequest{SessionID: "s", AfterID: all[2].ID}, all[3:]},
		{"session after the last id", runtime.EventsRequest{SessionID: "s", AfterID: all[7].ID}, nil},
		{"session with limit", runtime.EventsRequest{SessionID: "s", AfterID: all[0].ID, Limit: 3}, all[1:4]},
		{"run after an id", runtime.EventsRequest{RunID: "r2", AfterID: all[2].ID}, []runtime.Event{all[3], all[6], all[7]}},
		{"unknown session", runtime.EventsRequest{SessionID: "none"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Tenant = "acme"
			got := events(t, s, tt.req)
			if diff := cmp.Diff(ids(tt.want), ids(got)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// testListByParent: ListRunsRequest.ParentID lists the runs naming that
// parent, newest first, however many other runs of the session came
// between, with the session and tenant filters and pagination.
func testListByParent(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	startChild := func(tenant, id, session, parent string) {
		t.Helper()
		r := runtime.Run{ID: id, Tenant: tenant, SessionID: session, AgentID: "agent", ParentID: parent, StartedAt: t0}
		if err := s.StartRun(ctx, r); err != nil {
			t.Fatalf("StartRun(%q): %v", id, err)
		}
	}
	start(t, s, "acme", "p", "s")
	start(t, s, "acme", "q", "s")
	startChild("acme", "c1", "s", "p")
	for i := range 25 { // runs of the session between the children
		start(t, s, "acme", fmt.Sprintf("x%d", i), "s")
	}
	startChild("acme", "c2", "s", "p")
	startChild("acme", "d1", "s", "q")
	startChild("acme", "c3", "other", "p") // another session's run naming the same parent id
	startChild("globex", "c1", "s", "p")   // another tenant's
	list := func(req runtime.ListRunsRequest) []string {
		t.Helper()
		var got []string
		for range 20 {
			resp, err := s.ListRuns(ctx, req)
			if err != nil {
				t.Fatalf("ListRuns(%+v): %v", req, err)
			}
			for _, r := range resp.Runs {
				got = append(got, r.ID)
			}
			if resp.NextPageToken == "" {
				return got
			}
			req.PageToken = resp.NextPageToken
		}
		t.Fatal("pagination does not end")
		return nil
	}
	for _, size := range []int{1, 2, 100} {
		if diff := cmp.Diff([]string{"c3", "c2", "c1"}, list(runtime.ListRunsRequest{Tenant: "acme", ParentID: "p", PageSize: size})); diff != "" {
			t.Errorf("parent p, page size %d (-want +got):\n%s", size, diff)
		}
	}
	if diff := cmp.Diff([]string{"c2", "c1"}, list(runtime.ListRunsRequest{Tenant: "acme", SessionID: "s", ParentID: "p", PageSize: 1})); diff != "" {
		t.Errorf("parent p in session s (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d1"}, list(runtime.ListRunsRequest{Tenant: "acme", SessionID: "s", ParentID: "q"})); diff != "" {
		t.Errorf("parent q (-want +got):\n%s", diff)
	}
	if got := list(runtime.ListRunsRequest{Tenant: "acme", ParentID: "nobody"}); len(got) != 0 {
		t.Errorf("an unknown parent lists %v", got)
	}
	if diff := cmp.Diff([]string{"c1"}, list(runtime.ListRunsRequest{Tenant: "globex", ParentID: "p"})); diff != "" {
		t.Errorf("another tenant (-want +got):\n%s", diff)
	}
	if _, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", ParentID: strings.Repeat("x", 1<<16)}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("an oversized parent id: %v, want ErrInvalidRequest", err)
	}
}

func testPagination(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	var want []string // newest first
	for i := range 7 {
		id := fmt.Sprintf("r%d", i)
		sess := "even"
		if i%2 == 1 {
			sess = "odd"
		}
		start(t, s, "acme", id, sess)
		want = append([]string{id}, want...)
	}
	list := func(req runtime.ListRunsRequest) ([]string, int) {
		t.Helper()
		var got []string
		pages := 0
		for {
			resp, err := s.ListRuns(ctx, req)
			if err != nil {
				t.Fatalf("ListRuns(%+v): %v", req, err)
			}
			pages++
			if len(resp.Runs) > req.PageSize && req.PageSize > 0 {
				t.Fatalf("page of %d runs, page size %d", len(resp.Runs), req.PageSize)
			}
			for _, r := range resp.Runs {
				got = append(got, r.ID)
			}
			if resp.NextPageToken == "" {
				return got, pages
			}
			if pages > 20 {
				t.Fatal("pagination does not end")
			}
			req.PageToken = resp.NextPageToken
		}
	}
	for _, size := range []int{0, 1, 3, 7, 100} {
		got, pages := list(runtime.ListRunsRequest{Tenant: "acme", PageSize: size})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("page size %d (-want +got):\n%s", size, diff)
		}
		if wantPages := max(1, (7+size-1)/max(size, 1)); size > 0 && size <= 7 && pages != wantPages {
			t.Errorf("page size %d: %d pages, want %d", size, pages, wantPages)
		}
	}
	got, _ := list(runtime.ListRunsRequest{Tenant: "acme", SessionID: "odd", PageSize: 2})
	if diff := cmp.Diff([]string{"r5", "r3", "r1"}, got); diff != "" {
		t.Errorf("session filter (-want +got):\n%s", diff)
	}
	// A run started after a page was read does not disturb the next page.
	resp, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s, "acme", "newer", "even")
	resp, err = s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", PageSize: 2, PageToken: resp.NextPageToken})
	if err != nil || len(resp.Runs) != 2 || resp.Runs[0].ID != "r4" {
		t.Errorf("second page after a new run = %+v, %v", resp.Runs, err)
	}
	if resp, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "nobody"}); err != nil || len(resp.Runs) != 0 || resp.NextPageToken != "" {
		t.Errorf("empty tenant listing = %+v, %v", resp, err)
	}
	for _, tok := range []string{"garbage", "cjEuMA", "cjEuLTE", runtime.PageToken(1) + "x"} {
		if _, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", PageToken: tok}); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("ListRuns with token %q = %v, want ErrInvalidRequest", tok, err)
		}
	}
}

func testNotFound(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	checks := map[string]error{}
	_, checks["Run"] = s.Run(ctx, "acme", "nope")
	_, checks["Append"] = s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "nope", Events: evs("x")})
	checks["Finish"] = s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "nope", Status: runtime.StatusFailed})
	_, checks["Events"] = s.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: "nope"})
	for op, err := range checks {
		if !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("%s of a missing run = %v, want ErrNotFound", op, err)
		}
	}
}

func testInvalid(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	start(t, s, "acme", "r", "s")
	long := string(make([]byte, runtime.MaxIDLength+1))
	tests := []struct {
		name string
		call func() error
	}{
		{"start: empty id", func() error { return s.StartRun(ctx, runtime.Run{Tenant: "acme"}) }},
		{"start: long id", func() error { return s.StartRun(ctx, runtime.Run{ID: long}) }},
		{"start: control character", func() error { return s.StartRun(ctx, runtime.Run{ID: "a\nb"}) }},
		{"start: not UTF-8", func() error { return s.StartRun(ctx, runtime.Run{ID: "\xff"}) }},
		{"start: bad tenant", func() error { return s.StartRun(ctx, runtime.Run{ID: "x", Tenant: "\x00"}) }},
		{"start: final status", func() error {
			return s.StartRun(ctx, runtime.Run{ID: "x", Status: runtime.StatusCompleted})
		}},
		{"start: with output", func() error { return s.StartRun(ctx, runtime.Run{ID: "x", Output: json.RawMessage(`1`)}) }},
		{"append: no events", func() error {
			_, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r"})
			return err
		}},
		{"append: no type", func() error {
			_, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r", Events: []runtime.Event{{}}})
			return err
		}},
		{"append: data not JSON", func() error {
			_, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r",
				Events: []runtime.Event{{Type: "x"}, {Type: "y", Data: json.RawMessage(`{`)}}})
			return err
		}},
		{"append: empty run id", func() error {
			_, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", Events: evs("x")})
			return err
		}},
		{"append: bad finish", func() error {
			_, err := s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r", Events: evs("x"),
				Finish: &runtime.FinishRequest{Status: runtime.StatusStarted}})
			return err
		}},
		{"finish: output not JSON", func() error {
			return s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r", Status: runtime.StatusCompleted, Output: json.RawMessage(`nope`)})
		}},
		{"run: empty id", func() error { _, err := s.Run(ctx, "acme", ""); return err }},
		{"events: neither run nor session", func() error {
			_, err := s.Events(ctx, runtime.EventsRequest{Tenant: "acme"})
			return err
		}},
		{"events: both run and session", func() error {
			_, err := s.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: "r", SessionID: "s"})
			return err
		}},
		{"events: negative after id", func() error {
			_, err := s.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: "r", AfterID: -1})
			return err
		}},
		{"events: negative limit", func() error {
			_, err := s.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s", Limit: -1})
			return err
		}},
		{"list: negative page size", func() error {
			_, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", PageSize: -1})
			return err
		}},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s = %v, want ErrInvalidRequest", tt.name, err)
		}
	}
	if n := len(events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r"})); n != 0 {
		t.Errorf("invalid appends stored %d events", n)
	}
	if r := getRun(t, s, "acme", "r"); r.Status != runtime.StatusStarted {
		t.Errorf("invalid requests changed the run: %+v", r)
	}
}

func testNoAliasing(t *testing.T, s runtime.Store) {
	out := json.RawMessage(`{"a":1}`)
	start(t, s, "acme", "r", "s")
	in := []runtime.Event{{Type: "x", Data: json.RawMessage(`{"a":1}`)}}
	got := appendEvs(t, s, "acme", "r", in)
	in[0].Data[2] = 'X'
	got[0].Data[2] = 'Y'
	if err := s.Finish(t.Context(), runtime.FinishRequest{Tenant: "acme", RunID: "r", Status: runtime.StatusCompleted, Output: out}); err != nil {
		t.Fatal(err)
	}
	out[2] = 'Z'
	r := getRun(t, s, "acme", "r")
	r.Output[2] = 'W'
	if r := getRun(t, s, "acme", "r"); string(r.Output) != `{"a":1}` {
		t.Errorf("stored output aliased: %s", r.Output)
	}
	e := events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r"})
	e[0].Data[2] = 'V'
	if e := events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "r"}); string(e[0].Data) != `{"a":1}` {
		t.Errorf("stored data aliased: %s", e[0].Data)
	}
	e = events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s"})
	e[0].Data[2] = 'U'
	if e := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s"}); string(e[0].Data) != `{"a":1}` {
		t.Errorf("stored data aliased by a session's events: %s", e[0].Data)
	}
	bw, ok := s.(runtime.BatchWriter)
	if !ok {
		return
	}
	// Events returned together: changing or growing one's data touches
	// neither the store's nor its neighbours'.
	recs := []runtime.TurnRecord{
		{Start: &runtime.Run{ID: "b1", Tenant: "acme", SessionID: "s"},
			Append: runtime.AppendRequest{Tenant: "acme", RunID: "b1", Events: evs("x", "y")}},
		{Start: &runtime.Run{ID: "b2", Tenant: "acme", SessionID: "s"},
			Append: runtime.AppendRequest{Tenant: "acme", RunID: "b2", Events: evs("z")}},
	}
	stored, err := bw.WriteTurns(t.Context(), recs)
	if err != nil || len(stored) != 3 {
		t.Fatalf("WriteTurns = %d events, %v", len(stored), err)
	}
	recs[0].Append.Events[1].Data[2] = 'X'
	stored[0].Data = append(stored[0].Data, "garbage"...)
	want := []string{`{"i":0}`, `{"i":1}`, `{"i":0}`}
	for i, e := range events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s"})[1:] {
		if string(e.Data) != want[i] {
			t.Errorf("stored event %d of the batch: %s, want %s", i, e.Data, want[i])
		}
	}
	if string(stored[1].Data) != `{"i":1}` {
		t.Errorf("a returned event's data changed with its neighbour's: %s", stored[1].Data)
	}
}

func testCanceled(t *testing.T, s runtime.Store) {
	start(t, s, "acme", "r", "s")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	checks := map[string]error{}
	checks["StartRun"] = s.StartRun(ctx, runtime.Run{ID: "x"})
	_, checks["Append"] = s.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r", Events: evs("x")})
	checks["Finish"] = s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r", Status: runtime.StatusFailed})
	_, checks["Run"] = s.Run(ctx, "acme", "r")
	_, checks["Events"] = s.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: "r"})
	_, checks["ListRuns"] = s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme"})
	for op, err := range checks {
		if err == nil {
			t.Errorf("%s with a canceled context succeeded", op)
		}
	}
	if r := getRun(t, s, "acme", "r"); r.Status != runtime.StatusStarted {
		t.Errorf("a canceled Finish changed the run: %+v", r)
	}
}

func testUnfinished(t *testing.T, s runtime.Store) {
	rs, ok := s.(runtime.Recoverable)
	if !ok {
		t.Skip("the store is not runtime.Recoverable")
	}
	ctx := t.Context()
	for i, tenant := range []string{"a", "b", "a", "c"} {
		r := runtime.Run{ID: fmt.Sprintf("r%d", i), Tenant: tenant, StartedAt: t0.Add(time.Duration(i) * time.Minute)}
		if err := s.StartRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "b", RunID: "r1", Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	got, err := rs.UnfinishedRuns(ctx, runtime.UnfinishedRequest{StartedBefore: t0.Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Tenant+"/"+r.ID)
	}
	if diff := cmp.Diff([]string{"a/r0", "a/r2"}, names); diff != "" {
		t.Errorf("unfinished runs (-want +got):\n%s", diff)
	}
	got, err = rs.UnfinishedRuns(ctx, runtime.UnfinishedRequest{StartedBefore: t0.Add(time.Hour), Limit: 1})
	if err != nil || len(got) != 1 || got[0].ID != "r0" {
		t.Errorf("limited unfinished runs = %+v, %v", got, err)
	}
	// The store's own runs are never another process's abandoned ones.
	got, err = rs.UnfinishedRuns(ctx, runtime.UnfinishedRequest{StartedBefore: t0.Add(time.Hour), Abandoned: true})
	if err != nil || len(got) != 0 {
		t.Errorf("abandoned runs = %+v, %v; want none of the store's own", got, err)
	}
}
