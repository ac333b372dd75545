package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/runtime"
)

// crash abandons rec as a killed process would: whatever it has not
// written is lost. It returns a new Recorder over the same store, as
// the next process starts with.
func crash(t *testing.T, store runtime.Store) *runtime.Recorder {
	t.Helper()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close(context.Background()) })
	return rec
}

// A turn in flight when the process dies, with nobody subscribed to its
// session, leaves its run in status started (its start is handed to the
// flusher at Begin), so that the next process reconciles it.
func TestRecorderCrashMidTurnLeavesTheRunStarted(t *testing.T) {
	ctx := t.Context()
	mem := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: mem, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Adapter(tctx, runtime.PhaseHandoff, map[string]any{"adapter": "armature"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Flush(ctx); err != nil { // the start is durable: no hour-long linger
		t.Fatal(err)
	}
	if r, err := mem.Run(ctx, "acme", turn.ID()); err != nil || r.Status != runtime.StatusStarted {
		t.Fatalf("run after Turn.Flush mid-turn = %+v, %v; want started", r, err)
	}
	// The process dies here: the turn never ends.
	next := crash(t, mem)
	n, err := next.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1", n, err)
	}
	r, err := mem.Run(ctx, "acme", turn.ID())
	if err != nil || r.Status != runtime.StatusFailed || r.Error == nil || r.Error.Category != runtime.CategoryInterrupted {
		t.Fatalf("reconciled run = %+v, %v", r, err)
	}
	evs, err := mem.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: turn.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{runtime.EventRequestStarted, runtime.EventRequestFailed}, types(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Reconcile ends each run left started as its turn really ended: a
// committed turn completes or suspends its run, any other run fails as
// interrupted, a run whose resolver fails stays started (and is
// reconciled by a later call), and live turns are left alone.
func TestRecorderReconcile(t *testing.T) {
	ctx := t.Context()
	mem := runtime.NewMemoryStore(runtime.MemoryConfig{})
	for _, id := range []string{"done", "paused", "lost", "flaky"} {
		if err := mem.StartRun(ctx, runtime.Run{ID: id, Tenant: "acme", SessionID: "s-" + id, AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mem.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "done",
		Events: []runtime.Event{{Type: runtime.EventRequestStarted}}}); err != nil {
		t.Fatal(err)
	}
	rec := crash(t, mem)
	live, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s-live"})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		asked []string
	)
	flaky := errors.New("session store unavailable")
	resolve := func(_ context.Context, run runtime.Run) (runtime.Resolution, error) {
		mu.Lock()
		asked = append(asked, run.ID)
		mu.Unlock()
		switch run.ID {
		case "done":
			return runtime.Resolution{Status: runtime.StatusCompleted, Output: map[string]string{"text": "hi"}}, nil
		case "paused":
			return runtime.Resolution{Status: runtime.StatusSuspended, InvocationID: "inv-1",
				Signal: map[string]string{"signal_id": "sig"}, Approval: map[string]string{"tool": "refund"}}, nil
		case "flaky":
			return runtime.Resolution{}, flaky
		}
		return runtime.Resolution{}, nil
	}
	// A store one process owns has no runs of gone processes: a
	// reconciliation while serving leaves every run as it is.
	if sum, err := rec.ReconcileAbandoned(ctx, resolve); err != nil || sum.Total() != 0 || len(asked) != 0 {
		t.Fatalf("ReconcileAbandoned = %+v, %v, asked %v", sum, err, asked)
	}
	sum, err := rec.Reconcile(ctx, resolve)
	if !errors.Is(err, flaky) {
		t.Errorf("Reconcile error = %v, want the resolver's", err)
	}
	if want := (runtime.Reconciled{Completed: 1, Suspended: 1, Failed: 1, Left: 1}); sum != want {
		t.Errorf("Reconcile = %+v, want %+v", sum, want)
	}
	if diff := cmp.Diff([]string{"done", "paused", "lost", "flaky"}, asked); diff != "" {
		t.Errorf("resolver asked about (-want +got):\n%s", diff)
	}
	check := func(id string, status runtime.Status, wantTypes ...string) runtime.Run {
		t.Helper()
		r, err := mem.Run(ctx, "acme", id)
		if err != nil || r.Status != status {
			t.Fatalf("run %s = %+v, %v; want %s", id, r, err, status)
		}
		evs, err := mem.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantTypes, types(evs)); diff != "" {
			t.Errorf("run %s events (-want +got):\n%s", id, diff)
		}
		return *r
	}
	if r := check("done", runtime.StatusCompleted, runtime.EventRequestStarted, runtime.EventRequestCompleted); string(r.Output) != `{"text":"hi"}` || r.EndedAt.IsZero() {
		t.Errorf("completed run = %+v", r)
	}
	if r := check("paused", runtime.StatusSuspended, runtime.EventRequestStarted, runtime.EventRequestSuspended, runtime.EventApprovalRequested); r.InvocationID != "inv-1" {
		t.Errorf("suspended run = %+v", r)
	}
	// A run that recorded nothing gets its start (first, as always).
	if r := check("lost", runtime.StatusFailed, runtime.EventRequestStarted, runtime.EventRequestFailed); r.Error == nil || r.Error.Category != runtime.CategoryInterrupted || r.Error.Bucket != "retryable_transient" {
		t.Errorf("failed run = %+v", r)
	}
	check("flaky", runtime.StatusStarted)
	if r, err := mem.Run(ctx, "acme", live.ID()); err != nil || r.Status != runtime.StatusStarted {
		t.Errorf("a live turn was reconciled: %+v, %v", r, err)
	}
	// The store recovers: the next Reconcile finishes the run left.
	sum, err = rec.Reconcile(ctx, func(context.Context, runtime.Run) (runtime.Resolution, error) {
		return runtime.Resolution{Status: runtime.StatusCompleted}, nil
	})
	if err != nil || sum != (runtime.Reconciled{Completed: 1}) {
		t.Errorf("second Reconcile = %+v, %v", sum, err)
	}
	check("flaky", runtime.StatusCompleted, runtime.EventRequestStarted, runtime.EventRequestCompleted)
	// A resolution that cannot be recorded fails the call, not the run.
	if err := mem.StartRun(ctx, runtime.Run{ID: "bad", Tenant: "acme", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Reconcile(ctx, func(context.Context, runtime.Run) (runtime.Resolution, error) {
		return runtime.Resolution{Status: runtime.StatusSuspended}, nil // no invocation id
	}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Reconcile with a suspension without invocation id = %v", err)
	}
	check("bad", runtime.StatusStarted)
	if err := live.Complete(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// Turn.Flush returns only once the turn's final status is in the store,
// however long the flusher would otherwise linger, and reports the
// failure of its own records only.
func TestTurnFlushWaitsForTheFinalStatus(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, runtime.RecorderConfig{Linger: time.Hour})
	turn, tctx, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, "out"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- turn.Flush(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Turn.Flush waited for the linger")
	}
	if r, err := f.mem.Run(ctx, "acme", turn.ID()); err != nil || r.Status != runtime.StatusCompleted {
		t.Fatalf("run in the store after Turn.Flush = %+v, %v", r, err)
	}

	// A failed write is the turn's Flush error, and not another turn's.
	bad, bctx, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Flush(ctx); err != nil { // its start is written
		t.Fatal(err)
	}
	f.store.failAppend.Store(true)
	if err := bad.Complete(bctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := bad.Flush(ctx); err == nil {
		t.Error("Turn.Flush after a failed write = nil")
	}
	f.store.failAppend.Store(false)
	good, gctx, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Complete(gctx, "y"); err != nil {
		t.Fatal(err)
	}
	if err := good.Flush(ctx); err != nil {
		t.Errorf("another turn's Flush = %v", err)
	}
	_ = f.rec.Flush(ctx) // consumes the failure the fixture's Close would report

	// On the turn's own path the end is written by the end itself.
	own := newFixture(t, runtime.RecorderConfig{Synchronous: true})
	oturn, octx, err := own.rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	own.store.failAppend.Store(true)
	if err := oturn.Complete(octx, nil); err == nil {
		t.Fatal("Complete with a failing store succeeded")
	}
	if err := oturn.Flush(ctx); err == nil {
		t.Error("Turn.Flush after a failed end on the turn's path = nil")
	}
	own.store.failAppend.Store(false)

	// A cancelled wait returns the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	slow := newGatedStore()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: slow})
	if err != nil {
		t.Fatal(err)
	}
	gated, _, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := gated.Flush(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Turn.Flush with a cancelled context = %v", err)
	}
	close(slow.open)
	if err := gated.Complete(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A subscriber that joins in the middle of a turn nobody watched gets
// the turn's events so far at once (from the store replay), then the
// rest live, without a gap or a duplicate.
func TestRecorderSubscribeMidTurn(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, runtime.RecorderConfig{Linger: time.Hour})
	turn, tctx, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	live, cancel := f.rec.Subscribe(ctx, "acme", "s")
	defer cancel()
	// The replay, before the turn emits anything else, has everything
	// so far; it needs no hour-long linger.
	replayed, err := f.mem.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != 4 {
		t.Fatalf("replay mid-turn = %v; want the started event and 3 deltas", types(replayed))
	}
	after := replayed[len(replayed)-1].ID
	if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "3"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, nil); err != nil {
		t.Fatal(err)
	}
	got := replayed
	for e := range live {
		if e.ID <= after {
			continue
		}
		got = append(got, e)
		after = e.ID
		if e.Type == runtime.EventRequestCompleted {
			break
		}
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("subscriber's events: seq %d at %d (gap or duplicate): %v", e.Seq, i, types(got))
		}
	}
	if len(got) != 6 {
		t.Errorf("subscriber got %d events, want 6", len(got))
	}
}

// Under the race detector: a turn emits while subscribers join and leave
// at random moments; each sees the session's events as replay + live,
// contiguous in seq and increasing in id, and the stored order is the
// order the calls returned.
func TestRecorderSubscribersJoiningRandomlySeeNoGap(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := t.Context()
	f := newFixture(t, runtime.RecorderConfig{FlushEvery: 7})
	const turns, perTurn = 6, 40
	var wg sync.WaitGroup
	for s := range 4 {
		delay := time.Duration(rng.IntN(3000)) * time.Microsecond
		wg.Go(func() {
			time.Sleep(delay)
			live, cancel := f.rec.Subscribe(ctx, "", "s")
			defer cancel()
			var got []runtime.Event
			var after int64
			for {
				page, err := f.rec.Store().Events(ctx, runtime.EventsRequest{SessionID: "s", AfterID: after})
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range page {
					got = append(got, e)
					after = e.ID
				}
				if len(page) < runtime.DefaultEventsLimit {
					break
				}
			}
			completed := 0
			for _, e := range got {
				if e.Type == runtime.EventRequestCompleted {
					completed++
				}
			}
			for completed < turns {
				select {
				case e, ok := <-live:
					if !ok {
						t.Errorf("subscriber %d disconnected", s)
						return
					}
					if e.ID <= after {
						continue
					}
					got = append(got, e)
					after = e.ID
					if e.Type == runtime.EventRequestCompleted {
						completed++
					}
				case <-time.After(10 * time.Second):
					t.Errorf("subscriber %d: %d turns completed of %d", s, completed, turns)
					return
				}
			}
			checkContiguous(t, got)
		})
	}
	for range turns {
		turn, tctx, err := f.rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range perTurn {
			if err := turn.Emit(tctx, "test.tick", map[string]int{"i": i}); err != nil {
				t.Fatal(err)
			}
			if i%10 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		if err := turn.Complete(tctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	f.flush(t)
	all, err := f.mem.Events(ctx, runtime.EventsRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != turns*(perTurn+2) {
		t.Fatalf("stored %d events, want %d", len(all), turns*(perTurn+2))
	}
	checkContiguous(t, all)
}

// checkContiguous checks a session's events as a subscriber saw them:
// ids increase, each run's seqs run 1, 2, ... in call order (ticks
// numbered 0, 1, ...), and runs do not interleave.
func checkContiguous(t *testing.T, evs []runtime.Event) {
	t.Helper()
	var last int64
	run, seq := "", int64(0)
	for _, e := range evs {
		if e.ID <= last {
			t.Fatalf("id %d after %d", e.ID, last)
		}
		last = e.ID
		if e.RunID != run {
			if seq != 0 && run != "" {
				t.Fatalf("run %s interleaves with %s at seq %d", e.RunID, run, seq)
			}
			run, seq = e.RunID, 0
		}
		if e.Seq != seq+1 {
			t.Fatalf("run %s: seq %d after %d (gap or duplicate)", run, e.Seq, seq)
		}
		seq = e.Seq
		if e.Type == runtime.EventRequestCompleted {
			seq = 0
		}
		if e.Type == "test.tick" && string(e.Data) != fmt.Sprintf(`{"i":%d}`, e.Seq-2) {
			t.Fatalf("run %s seq %d holds %s: stored out of call order", run, e.Seq, e.Data)
		}
	}
}
