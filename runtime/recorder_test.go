package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/runtime"
)

// countingStore counts the writes reaching a store and can fail Appends.
type countingStore struct {
	runtime.Store
	starts, appends atomic.Int64
	failAppend      atomic.Bool
}

func (c *countingStore) StartRun(ctx context.Context, r runtime.Run) error {
	c.starts.Add(1)
	return c.Store.StartRun(ctx, r)
}

func (c *countingStore) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	c.appends.Add(1)
	if c.failAppend.Load() {
		return nil, errors.New("disk on fire")
	}
	return c.Store.Append(ctx, req)
}

func (c *countingStore) UnfinishedRuns(ctx context.Context, req runtime.UnfinishedRequest) ([]runtime.Run, error) {
	return c.Store.(runtime.Recoverable).UnfinishedRuns(ctx, req)
}

type fixture struct {
	store *countingStore
	mem   *runtime.MemoryStore
	rec   *runtime.Recorder
}

// runEvents flushes the recorder and returns the stored events of run id.
func (f fixture) runEvents(t *testing.T, id string) []runtime.Event {
	t.Helper()
	ctx := t.Context()
	if err := f.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := f.mem.Events(ctx, runtime.EventsRequest{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func newFixture(t *testing.T, cfg runtime.RecorderConfig) fixture {
	t.Helper()
	mem := runtime.NewMemoryStore(runtime.MemoryConfig{})
	cs := &countingStore{Store: mem}
	cfg.Store = cs
	n := 0
	var mu sync.Mutex
	cfg.NewID = func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("run-%d", n)
	}
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Millisecond)
		return clock
	}
	rec, err := runtime.NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rec.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return fixture{store: cs, mem: mem, rec: rec}
}

// flush waits for the Recorder's queued records.
func (f fixture) flush(t *testing.T) {
	t.Helper()
	if err := f.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func (f fixture) events(t *testing.T, tenant, run string) []runtime.Event {
	t.Helper()
	f.flush(t)
	evs, err := f.mem.Events(t.Context(), runtime.EventsRequest{Tenant: tenant, RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func (f fixture) run(t *testing.T, tenant, id string) runtime.Run {
	t.Helper()
	f.flush(t)
	r, err := f.mem.Run(t.Context(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return *r
}

func types(evs []runtime.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestRecorderSynchronousTurnCostsTwoWrites(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{Synchronous: true})
	ctx := t.Context()
	turn, tctx, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a", CorrelationID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Adapter(tctx, runtime.PhaseHandoff, map[string]any{"adapter": "armature", "modelRef": "m"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, map[string]string{"text": "hi"}); err != nil {
		t.Fatal(err)
	}
	if s, a := f.store.starts.Load(), f.store.appends.Load(); s != 1 || a != 1 {
		t.Errorf("writes: %d StartRun, %d Append; want 1 and 1", s, a)
	}
	evs := f.events(t, "acme", turn.ID())
	want := []string{runtime.EventRequestStarted, runtime.EventAdapterEvent, runtime.EventAdapterEvent, runtime.EventRequestCompleted}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if got := string(evs[1].Data); got != `{"event":{"adapter":"armature","modelRef":"m","phase":"agent.handoff"}}` {
		t.Errorf("adapter data = %s", got)
	}
	if got := string(evs[3].Data); got != `{"output":{"text":"hi"}}` {
		t.Errorf("completed data = %s", got)
	}
	r := f.run(t, "acme", turn.ID())
	if r.Status != runtime.StatusCompleted || string(r.Output) != `{"text":"hi"}` || r.CorrelationID != "c" || !r.EndedAt.After(r.StartedAt) {
		t.Errorf("run = %+v", r)
	}
	if tctx.Err() == nil {
		t.Error("the turn's context is live after the turn ended")
	}
	if err := turn.Emit(ctx, "x.y", nil); !errors.Is(err, runtime.ErrTurnEnded) {
		t.Errorf("Emit after the end = %v, want ErrTurnEnded", err)
	}
	if err := turn.Fail(ctx, runtime.RunError{}); !errors.Is(err, runtime.ErrTurnEnded) {
		t.Errorf("Fail after the end = %v, want ErrTurnEnded", err)
	}
}

func TestRecorderFlushEvery(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{FlushEvery: 4, Synchronous: true})
	turn, ctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 { // started + 9 = 10 events: flushes at 4 and 8
		if err := turn.Emit(ctx, "test.tick", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if a := f.store.appends.Load(); a != 2 {
		t.Errorf("%d appends mid-turn, want 2", a)
	}
	if n := len(f.events(t, "", turn.ID())); n != 8 {
		t.Errorf("%d events stored mid-turn, want 8", n)
	}
	if err := turn.Fail(ctx, runtime.RunError{Bucket: "user_correctable", Category: "x", Message: "bad"}); err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "", turn.ID())
	if len(evs) != 11 || evs[10].Type != runtime.EventRequestFailed || string(evs[10].Data) != `{"error":{"bucket":"user_correctable","category":"x","message":"bad"}}` {
		t.Errorf("final events: %d, last %+v", len(evs), evs[len(evs)-1])
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d seq %d", i, e.Seq)
		}
	}
	if r := f.run(t, "", turn.ID()); r.Status != runtime.StatusFailed || r.Error == nil || r.Error.Message != "bad" {
		t.Errorf("run = %+v", r)
	}
}

func TestRecorderLiveSubscriberGetsStoredEvents(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	live, cancel := f.rec.Broker().Subscribe("acme", "s")
	defer cancel()
	other, cancelOther := f.rec.Broker().Subscribe("globex", "s")
	defer cancelOther()
	turn, ctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-live:
		t.Fatalf("an event before the turn was accepted: %+v", e)
	default:
	}
	if err := turn.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	got := []runtime.Event{<-live} // the started event, written once accepted
	if err := turn.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": "a"}); err != nil {
		t.Fatal(err)
	}
	got = append(got, <-live)
	if err := turn.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	got = append(got, <-live)
	if diff := cmp.Diff(f.events(t, "acme", turn.ID()), got); diff != "" {
		t.Errorf("published events differ from stored (-stored +published):\n%s", diff)
	}
	if got[0].ID == 0 || got[0].RunID != turn.ID() {
		t.Errorf("published event without identity: %+v", got[0])
	}
	select {
	case e := <-other:
		t.Errorf("another tenant received %+v", e)
	default:
	}
}

func TestRecorderCancel(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	turn, ctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if f.rec.Cancel(t.Context(), "globex", turn.ID()) {
		t.Error("another tenant cancelled the run")
	}
	if f.rec.Cancel(t.Context(), "acme", "nope") {
		t.Error("an unknown run was cancelled")
	}
	if !f.rec.Cancel(t.Context(), "acme", turn.ID()) {
		t.Fatal("Cancel of a live run = false")
	}
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), runtime.ErrCancelled) {
		t.Errorf("cause = %v, want ErrCancelled", context.Cause(ctx))
	}
	// The engine returns a context error; its owner reports a failure,
	// recorded as the cancellation it is. The cancelled ctx does not
	// stop the write.
	if err := turn.Fail(ctx, runtime.RunError{Message: "context canceled"}); err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "acme", turn.ID())
	if last := evs[len(evs)-1]; last.Type != runtime.EventRequestCancelled {
		t.Errorf("last event = %s", last.Type)
	}
	if r := f.run(t, "acme", turn.ID()); r.Status != runtime.StatusCancelled {
		t.Errorf("status = %s", r.Status)
	}
	if f.rec.Cancel(t.Context(), "acme", turn.ID()) {
		t.Error("Cancel of an ended run = true")
	}
}

func TestRecorderSuspendAndResume(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	ctx := t.Context()
	turn, _, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	approval := map[string]any{"tool": "delete_file", "risk": "high"}
	if err := turn.Suspend(ctx, "inv-1", map[string]string{"signalId": "sig-1"}, approval); err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "acme", turn.ID())
	want := []string{runtime.EventRequestStarted, runtime.EventRequestSuspended, runtime.EventApprovalRequested}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if got := string(evs[1].Data); got != `{"invocationId":"inv-1","signal":{"signalId":"sig-1"}}` {
		t.Errorf("suspended data = %s", got)
	}
	if r := f.run(t, "acme", turn.ID()); r.Status != runtime.StatusSuspended || r.InvocationID != "inv-1" {
		t.Errorf("run = %+v", r)
	}

	resumed, _, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a", ParentID: turn.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if err := resumed.Resolved(ctx, approval, "approve"); err != nil {
		t.Fatal(err)
	}
	if err := resumed.Complete(ctx, nil); err != nil {
		t.Fatal(err)
	}
	evs = f.events(t, "acme", resumed.ID())
	if evs[0].Type != runtime.EventRequestStarted || evs[0].ParentRequestID != turn.ID() || evs[1].Type != runtime.EventApprovalResolved {
		t.Errorf("resumed events = %+v", evs)
	}
	if string(evs[2].Data) != `{"output":null}` {
		t.Errorf("completed without output = %s", evs[2].Data)
	}
	// The wire form carries the stable-harness names.
	raw, err := json.Marshal(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "seq", "type", "requestId", "parentRequestId", "sessionId", "agentId", "time"} {
		if _, ok := wire[k]; !ok {
			t.Errorf("wire event lacks %q: %s", k, raw)
		}
	}
}

func TestRecorderRejects(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	ctx := t.Context()
	if _, _, err := f.rec.Begin(ctx, runtime.BeginRequest{SessionID: "bad\x00"}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Begin with a bad session id = %v", err)
	}
	turn, _, err := f.rec.Begin(ctx, runtime.BeginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"", runtime.EventRequestStarted, runtime.EventRequestCompleted, runtime.EventRequestFailed,
		runtime.EventRequestCancelled, runtime.EventRequestSuspended} {
		if err := turn.Emit(ctx, typ, nil); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("Emit(%q) = %v, want ErrInvalidRequest", typ, err)
		}
	}
	if err := turn.Emit(ctx, "x.y", func() {}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Emit of unmarshalable data = %v", err)
	}
	if err := turn.Suspend(ctx, "", nil, nil); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Suspend without an invocation id = %v", err)
	}
	// The suspension's first event encodes and its second does not: the
	// turn goes on, and neither is recorded.
	if err := turn.Suspend(ctx, "inv-1", "signal", func() {}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Suspend with an unmarshalable approval = %v", err)
	}
	if err := turn.AdapterFields(ctx, runtime.PhaseToolStart, runtime.JSONField("args", json.RawMessage(`{"a":`))); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("AdapterFields with a JSON field that is not JSON = %v", err)
	}
	if err := turn.Cancelled(ctx, "client went away"); err != nil {
		t.Fatal(err)
	}
	evs := f.runEvents(t, turn.ID())
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if want := []string{runtime.EventRequestStarted, runtime.EventRequestCancelled}; !cmp.Equal(types, want) {
		t.Errorf("events of the run = %q, want %q", types, want)
	}
	if _, err := runtime.NewRecorder(runtime.RecorderConfig{}); !errors.Is(err, runtime.ErrInvalidConfig) {
		t.Errorf("NewRecorder without a store = %v", err)
	}
	if _, err := runtime.NewRecorder(runtime.RecorderConfig{Store: f.mem, FlushEvery: -1}); !errors.Is(err, runtime.ErrInvalidConfig) {
		t.Errorf("NewRecorder with negative FlushEvery = %v", err)
	}
}

func TestRecorderFailedEndWriteLeavesRunStartedForRecover(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{Synchronous: true})
	ctx := t.Context()
	turn, _, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	f.store.failAppend.Store(true)
	if err := turn.Complete(ctx, "x"); err == nil {
		t.Fatal("Complete with a failing store succeeded")
	}
	if err := turn.Complete(ctx, "x"); !errors.Is(err, runtime.ErrTurnEnded) {
		t.Errorf("second Complete = %v, want ErrTurnEnded", err)
	}
	f.store.failAppend.Store(false)
	// A live turn of this Recorder is not recovered.
	live, _, err := f.rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.rec.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1", n, err)
	}
	r := f.run(t, "acme", turn.ID())
	if r.Status != runtime.StatusFailed || r.Error == nil || r.Error.Category != runtime.CategoryInterrupted {
		t.Errorf("recovered run = %+v", r)
	}
	// Its start went with the refused end: the recovery records it.
	if evs := f.events(t, "acme", turn.ID()); len(evs) != 2 || evs[0].Type != runtime.EventRequestStarted || evs[1].Type != runtime.EventRequestFailed {
		t.Errorf("recovered run's events = %+v", evs)
	}
	if r := f.run(t, "acme", live.ID()); r.Status != runtime.StatusStarted {
		t.Errorf("a live turn was recovered: %+v", r)
	}
	if n, err := f.rec.Recover(ctx); err != nil || n != 0 {
		t.Errorf("second Recover = %d, %v", n, err)
	}
}

func TestRecorderConcurrentEmits(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{FlushEvery: 5})
	live, cancel := f.rec.Broker().Subscribe("", "s2")
	defer cancel()
	var wg sync.WaitGroup
	for s := range 2 {
		turn, ctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{SessionID: fmt.Sprintf("s%d", s+1)})
		if err != nil {
			t.Fatal(err)
		}
		var inner sync.WaitGroup
		for g := range 4 {
			inner.Go(func() {
				for i := range 10 {
					if err := turn.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"g": g, "i": i}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Go(func() {
			inner.Wait()
			if err := turn.Complete(ctx, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	n := 0
	var last int64
	for e := range live {
		if e.ID <= last {
			t.Errorf("published ids out of order: %d after %d", e.ID, last)
		}
		last = e.ID
		n++
		if e.Type == runtime.EventRequestCompleted {
			break
		}
	}
	if n != 42 {
		t.Errorf("subscriber got %d events, want 42", n)
	}
}

// gatedStore is a BatchWriter whose writes wait for open to close; a
// write waiting signals entered.
type gatedStore struct {
	*runtime.MemoryStore
	open, entered chan struct{}
	batches       atomic.Int64
}

func newGatedStore() *gatedStore {
	return &gatedStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{}),
		open: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func (g *gatedStore) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	g.batches.Add(1)
	return g.MemoryStore.WriteTurns(ctx, turns)
}

func TestRecorderGroupCommitWritesNothingOnTheTurnsPath(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	turn, tctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, "hi"); err != nil {
		t.Fatal(err)
	}
	if err := f.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// countingStore is no BatchWriter: the flusher falls back to one
	// StartRun and an Append for the start's record (handed over at
	// Begin), and an Append for the end's, off the turn's path.
	if s, a := f.store.starts.Load(), f.store.appends.Load(); s != 1 || a != 2 {
		t.Errorf("writes: %d StartRun, %d Append; want 1 and 2", s, a)
	}
	if r := f.run(t, "acme", turn.ID()); r.Status != runtime.StatusCompleted {
		t.Errorf("run = %+v", r)
	}
}

// Queued records are not in the store until the flusher writes them,
// and a full queue makes a turn wait rather than drop records.
func TestRecorderQueuedTurnsAndBackPressure(t *testing.T) {
	g := newGatedStore()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: g, QueueTurns: 4, BatchTurns: 1, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	end := func(session string) *runtime.Turn {
		turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: session})
		if err != nil {
			t.Fatal(err)
		}
		if err := turn.Complete(tctx, nil); err != nil {
			t.Error(err)
		}
		return turn
	}
	// The first turn's start is held by the gated flusher; its end and
	// the next turn's two records are queued, and the third turn's start
	// fills the queue: its end must wait.
	first, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s0"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if err := first.Complete(tctx, nil); err != nil {
		t.Fatal(err)
	}
	ids := []string{first.ID(), end("s1").ID()}
	third, tctx3, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, third.ID())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if err := third.Complete(tctx3, nil); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-ended:
		t.Fatal("a turn's end did not wait for room in a full queue")
	case <-time.After(50 * time.Millisecond):
	}
	for _, id := range ids {
		if _, err := g.MemoryStore.Run(ctx, "", id); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("queued run %s is in the store before its write: %v", id, err)
		}
	}
	flushed := make(chan error, 1)
	go func() { flushed <- third.Flush(ctx) }()
	select {
	case err := <-flushed:
		t.Fatalf("Turn.Flush returned %v before its records were written", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(g.open)
	<-ended
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if r, err := g.MemoryStore.Run(ctx, "", third.ID()); err != nil || r.Status != runtime.StatusCompleted {
		t.Errorf("run after Turn.Flush = %+v, %v", r, err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if r, err := g.MemoryStore.Run(ctx, "", id); err != nil || r.Status != runtime.StatusCompleted {
			t.Errorf("run %s after Close = %+v, %v", id, r, err)
		}
	}
	// After Close, turns write on their own path.
	before := g.batches.Load()
	turn := end("s9")
	if r, err := g.MemoryStore.Run(ctx, "", turn.ID()); err != nil || r.Status != runtime.StatusCompleted || g.batches.Load() != before {
		t.Errorf("a turn after Close = %+v, %v", r, err)
	}
}

// A flusher write failure is logged and returned by the next Flush.
func TestRecorderFlushReportsFailedWrites(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	f.store.failAppend.Store(true)
	turn, tctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, nil); err != nil {
		t.Fatalf("Complete = %v: a queued turn's end does not fail", err)
	}
	if err := f.rec.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), turn.ID()) {
		t.Errorf("Flush = %v, want the failed write", err)
	}
	if err := f.rec.Flush(t.Context()); err != nil {
		t.Errorf("second Flush = %v, want nil (reported once)", err)
	}
	f.store.failAppend.Store(false)
	// Its start was written: Recover fails the run.
	if n, err := f.rec.Recover(t.Context()); err != nil || n != 1 {
		t.Errorf("Recover = %d, %v; want 1", n, err)
	}
}

// A subscriber arriving while a session's turn is queued: the next turn
// goes live only after the queued one is written, so the subscriber
// sees the session's ids increase; Store reads wait for queued turns.
func TestRecorderGoingLiveKeepsSessionOrder(t *testing.T) {
	g := newGatedStore()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: g})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	ctx := t.Context()
	first, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Complete(tctx, 1); err != nil {
		t.Fatal(err)
	}
	live, cancel := rec.Broker().Subscribe("", "s")
	defer cancel()
	began := make(chan *runtime.Turn)
	go func() {
		second, _, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
		if err != nil {
			t.Error(err)
		}
		began <- second
	}()
	select {
	case <-began:
		t.Fatal("a live turn began before the session's queued turn was written")
	case <-time.After(30 * time.Millisecond):
	}
	close(g.open)
	second := <-began
	if err := second.Complete(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var got []string
	var last int64
	for e := range live {
		if e.ID <= last {
			t.Errorf("ids out of order: %d after %d", e.ID, last)
		}
		last = e.ID
		got = append(got, e.RunID+" "+e.Type)
		if e.RunID == second.ID() && e.Type == runtime.EventRequestCompleted {
			break
		}
	}
	want := []string{first.ID() + " " + runtime.EventRequestStarted, first.ID() + " " + runtime.EventRequestCompleted,
		second.ID() + " " + runtime.EventRequestStarted, second.ID() + " " + runtime.EventRequestCompleted}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	// In flight, a turn is found by Store().Run (to be cancelled).
	third, _, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := rec.Store().Run(ctx, "", third.ID()); err != nil || r.Status != runtime.StatusStarted {
		t.Errorf("Store().Run of a turn in flight = %+v, %v", r, err)
	}
	if err := third.Complete(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if r, err := rec.Store().Run(ctx, "", third.ID()); err != nil || r.Status != runtime.StatusCompleted {
		t.Errorf("Store().Run right after the end = %+v, %v", r, err)
	}
}

func TestCancelAll(t *testing.T) {
	ctx := context.Background()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	var ctxs []context.Context
	var turns []*runtime.Turn
	for i := range 3 {
		turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "t", SessionID: fmt.Sprintf("s%d", i), AgentID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		turns, ctxs = append(turns, turn), append(ctxs, tctx)
	}
	if err := turns[0].Complete(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := rec.CancelAll(ctx); n != 2 {
		t.Fatalf("CancelAll = %d, want 2", n)
	}
	for i, c := range ctxs[1:] {
		if !errors.Is(context.Cause(c), runtime.ErrCancelled) {
			t.Fatalf("turn %d context cause %v", i+1, context.Cause(c))
		}
		if err := turns[i+1].Fail(ctx, runtime.RunError{Message: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, turn := range turns[1:] {
		run, err := rec.Store().Run(ctx, "t", turn.ID())
		if err != nil || run.Status != runtime.StatusCancelled {
			t.Fatalf("run %+v, %v", run, err)
		}
	}
}

// Complete records its output as json.Marshal encodes it, in the run and
// in runtime.request.completed{output}; CompleteJSON records an encoded
// output byte for byte, and refuses one that is not JSON without ending
// the turn.
func TestRecorderCompleteOutput(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	output := map[string]any{"replies": []string{"a <b> & \u2028"}, "n": 1.5}
	want, err := json.Marshal(output)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []bool{false, true} {
		turn, ctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{Tenant: "t", SessionID: "s", AgentID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		given := want
		if raw {
			given = json.RawMessage(`{ "kept" : [1, "<as given>"] }`)
			if err := turn.CompleteJSON(ctx, json.RawMessage(`{"cut`)); !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("CompleteJSON(invalid) = %v, want ErrInvalidRequest", err)
			}
			err = turn.CompleteJSON(ctx, given)
		} else {
			err = turn.Complete(ctx, output)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := f.run(t, "t", turn.ID()).Output; string(got) != string(given) {
			t.Errorf("raw=%t: run output %s, want %s", raw, got, given)
		}
		evs := f.events(t, "t", turn.ID())
		last := evs[len(evs)-1]
		if wantData := `{"output":` + string(given) + `}`; last.Type != runtime.EventRequestCompleted || string(last.Data) != wantData {
			t.Errorf("raw=%t: last event %s %s, want %s %s", raw, last.Type, last.Data, runtime.EventRequestCompleted, wantData)
		}
	}
}

// EmitJSON records its data as given, and refuses data that is not JSON
// and the reserved types without recording anything.
func TestRecorderEmitJSON(t *testing.T) {
	f := newFixture(t, runtime.RecorderConfig{})
	ctx := t.Context()
	turn, tctx, err := f.rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ  string
		data string
	}{{"x.bad", `{"a":`}, {"x.bad", `{} {}`}, {runtime.EventRequestCompleted, `{}`}, {"", `{}`}} {
		if err := turn.EmitJSON(tctx, c.typ, json.RawMessage(c.data)); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("EmitJSON(%q, %s) = %v, want ErrInvalidRequest", c.typ, c.data, err)
		}
	}
	if err := turn.EmitJSON(tctx, "x.spaced", json.RawMessage(`{ "b": [1, 2] }`)); err != nil {
		t.Fatal(err)
	}
	if err := turn.EmitJSON(tctx, "x.empty", nil); err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, nil); err != nil {
		t.Fatal(err)
	}
	evs := f.runEvents(t, turn.ID())
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+string(e.Data))
	}
	want := []string{runtime.EventRequestStarted + " ", `x.spaced { "b": [1, 2] }`, "x.empty ", runtime.EventRequestCompleted + ` {"output":null}`}
	if !cmp.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestTurnSync: Sync puts a turn's buffered events in the store before
// it returns, on the flusher's path (group commit) and on the turn's own
// (Synchronous), without ending the turn; the turn then goes on.
func TestTurnSync(t *testing.T) {
	for _, synchronous := range []bool{false, true} {
		t.Run(fmt.Sprint("synchronous=", synchronous), func(t *testing.T) {
			f := newFixture(t, runtime.RecorderConfig{Synchronous: synchronous})
			turn, ctx, err := f.rec.Begin(t.Context(), runtime.BeginRequest{SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if err := turn.Emit(ctx, "test.tick", map[string]int{"i": 1}); err != nil {
				t.Fatal(err)
			}
			if err := turn.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			// Read the store itself: no Flush of the Recorder's.
			evs, err := f.mem.Events(ctx, runtime.EventsRequest{RunID: turn.ID()})
			if err != nil {
				t.Fatal(err)
			}
			if got := types(evs); !slices.Equal(got, []string{runtime.EventRequestStarted, "test.tick"}) {
				t.Fatalf("stored after Sync: %v", got)
			}
			if err := turn.Sync(ctx); err != nil { // nothing new: nothing to write
				t.Fatal(err)
			}
			if err := turn.Emit(ctx, "test.tick", map[string]int{"i": 2}); err != nil {
				t.Fatal(err)
			}
			if err := turn.Complete(ctx, "done"); err != nil {
				t.Fatal(err)
			}
			if got := types(f.events(t, "", turn.ID())); !slices.Equal(got, []string{runtime.EventRequestStarted, "test.tick", "test.tick", runtime.EventRequestCompleted}) {
				t.Fatalf("the turn's events: %v", got)
			}
			if err := turn.Sync(ctx); err != nil { // an ended turn: Flush
				t.Fatal(err)
			}
		})
	}
}
