package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/runtime"
)

// testBatchWriter checks runtime.BatchWriter: whole turns, a turn split
// over two batches, a run started outside the batch, ids in record
// order, and atomicity.
func testBatchWriter(t *testing.T, s runtime.Store) {
	bw, ok := s.(runtime.BatchWriter)
	if !ok {
		t.Skip("the store is not a runtime.BatchWriter")
	}
	ctx := t.Context()
	start(t, s, "acme", "pre", "s2") // started outside any batch
	run := func(id, session string) *runtime.Run {
		return &runtime.Run{ID: id, Tenant: "acme", SessionID: session, AgentID: "agent", StartedAt: t0}
	}
	finish := func(st runtime.Status) *runtime.FinishRequest {
		return &runtime.FinishRequest{Status: st, EndedAt: t0.Add(time.Minute), Output: []byte(`"out"`)}
	}
	recs := []runtime.TurnRecord{
		{Start: run("a", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "a",
			Events: evs("runtime.request.started", "x.one", "runtime.request.completed"), Finish: finish(runtime.StatusCompleted)}},
		{Start: run("b", "s2"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "b", Events: evs("runtime.request.started", "x.one")}},
		{Append: runtime.AppendRequest{Tenant: "acme", RunID: "pre", Events: evs("x.pre")}},
		{Start: run("c", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "c"}}, // a start alone
		{Append: runtime.AppendRequest{Tenant: "acme", RunID: "b", Events: evs("x.two")}},
	}
	stored, err := bw.WriteTurns(ctx, recs)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(stored); got != 7 {
		t.Fatalf("WriteTurns returned %d events, want 7", got)
	}
	for i := 1; i < len(stored); i++ {
		if stored[i].ID <= stored[i-1].ID {
			t.Errorf("ids not increasing in record order: %v", ids(stored))
		}
	}
	if diff := cmp.Diff(stored[:3], events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "a"})); diff != "" {
		t.Errorf("run a: returned events differ from stored (-returned +stored):\n%s", diff)
	}
	if got := getRun(t, s, "acme", "a"); got.Status != runtime.StatusCompleted || string(got.Output) != `"out"` || !got.EndedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("run a = %+v", got)
	}
	if got := getRun(t, s, "acme", "c"); got.Status != runtime.StatusStarted {
		t.Errorf("run c = %+v", got)
	}
	// The rest of b, and c whole, in a second batch.
	if _, err := bw.WriteTurns(ctx, []runtime.TurnRecord{
		{Append: runtime.AppendRequest{Tenant: "acme", RunID: "b", Events: evs("x.three"), Finish: finish(runtime.StatusFailed)}},
		{Append: runtime.AppendRequest{Tenant: "acme", RunID: "c", Finish: finish(runtime.StatusCancelled)}},
	}); err != nil {
		t.Fatal(err)
	}
	b := events(t, s, runtime.EventsRequest{Tenant: "acme", RunID: "b"})
	if want := []string{"runtime.request.started", "x.one", "x.two", "x.three"}; !slices.Equal(typesOf(b), want) {
		t.Errorf("run b events = %v, want %v", typesOf(b), want)
	}
	for i, e := range b {
		if e.Seq != int64(i+1) || e.SessionID != "s2" || e.AgentID != "agent" {
			t.Errorf("run b event %d = %+v", i, e)
		}
	}
	if got := getRun(t, s, "acme", "b"); got.Status != runtime.StatusFailed {
		t.Errorf("run b = %+v", got)
	}
	// Atomic: a conflict anywhere stores nothing.
	before := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	for name, bad := range map[string][]runtime.TurnRecord{
		"start of an existing run": {{Start: run("d", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "d", Events: evs("x")}},
			{Start: run("a", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "a"}}},
		"append to a finished run": {{Start: run("d", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "d", Events: evs("x")}},
			{Append: runtime.AppendRequest{Tenant: "acme", RunID: "a", Events: evs("x")}}},
		"append to an unknown run": {{Start: run("d", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "d", Events: evs("x")}},
			{Append: runtime.AppendRequest{Tenant: "acme", RunID: "nope", Events: evs("x")}}},
		"finished twice": {{Start: run("d", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "d", Finish: finish(runtime.StatusCompleted)}},
			{Append: runtime.AppendRequest{Tenant: "acme", RunID: "d", Finish: finish(runtime.StatusCompleted)}}},
		"invalid record": {{Start: run("d", "s1"), Append: runtime.AppendRequest{Tenant: "acme", RunID: "d", Events: evs("x")}},
			{Append: runtime.AppendRequest{Tenant: "acme", RunID: "b"}}},
	} {
		_, err := bw.WriteTurns(ctx, bad)
		if !errors.Is(err, runtime.ErrConflict) && !errors.Is(err, runtime.ErrNotFound) && !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: WriteTurns = %v, want a conflict, not found or invalid request", name, err)
		}
		if _, err := s.Run(ctx, "acme", "d"); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("%s: the failed batch's first run was stored (%v)", name, err)
		}
	}
	if after := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"}); !slices.Equal(ids(before), ids(after)) {
		t.Errorf("failed batches stored events: %v, then %v", ids(before), ids(after))
	}
}

// testRecorderGroupCommit records many turns of many sessions
// concurrently through a group-committing Recorder (some sessions
// watched live part of the time), then checks, after Close drained the
// queue, that every turn is stored whole and that each session's events
// are in the order its turns ran, with increasing ids.
func testRecorderGroupCommit(t *testing.T, s runtime.Store) {
	const sessions, turns, deltas = 12, 15, 3
	var (
		mu    sync.Mutex
		n     int
		order = map[string][]string{} // session → run ids in turn order
	)
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s, FlushEvery: 4, BatchTurns: 8, QueueTurns: 16,
		NewID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("gc-%d", n)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range sessions {
		session := fmt.Sprintf("s%d", i)
		wg.Go(func() {
			var (
				live   <-chan runtime.Event
				cancel = func() {}
			)
			defer func() { cancel() }()
			for j := range turns {
				if i%3 == 0 && j == turns/2 { // a subscriber arrives midway
					live, cancel = rec.Broker().Subscribe("", session)
				}
				turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: session, AgentID: "agent"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order[session] = append(order[session], turn.ID())
				mu.Unlock()
				for k := range deltas + j%7 { // some turns pass FlushEvery
					if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"k": k}); err != nil {
						t.Error(err)
					}
				}
				if err := turn.Complete(tctx, j); err != nil {
					t.Error(err)
				}
			}
			if live != nil {
				mu.Lock()
				lastRun := order[session][turns-1]
				mu.Unlock()
				var last int64
				for e := range live {
					if e.ID <= last {
						t.Errorf("session %s: live ids out of order: %d after %d", session, e.ID, last)
					}
					last = e.ID
					if e.Type == runtime.EventRequestCompleted && e.RunID == lastRun {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rec.Close(closeCtx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := rec.Close(closeCtx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i := range sessions {
		session := fmt.Sprintf("s%d", i)
		evs := events(t, s, runtime.EventsRequest{SessionID: session, Limit: runtime.MaxEventsLimit})
		var runs []string
		for k, e := range evs {
			if k > 0 && e.ID <= evs[k-1].ID {
				t.Errorf("session %s: ids not increasing", session)
			}
			if len(runs) == 0 || runs[len(runs)-1] != e.RunID {
				runs = append(runs, e.RunID)
			}
		}
		if diff := cmp.Diff(order[session], runs); diff != "" {
			t.Errorf("session %s: runs in event order differ from turn order (-turns +events):\n%s", session, diff)
		}
		for j, id := range order[session] {
			r := getRun(t, s, "", id)
			got := events(t, s, runtime.EventsRequest{RunID: id})
			if r.Status != runtime.StatusCompleted || len(got) != deltas+j%7+2 || got[len(got)-1].Type != runtime.EventRequestCompleted {
				t.Errorf("run %s: status %s, %d events", id, r.Status, len(got))
			}
		}
	}
}
