package runtime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// Over a durable store the run's start is written before the turn is
// accepted (the server's startDurable); its runtime.request.started then
// goes with the turn's later records. A store that refuses writes for a
// while loses no start event: it goes with the end, which the redo keeps
// (before, it was handed as a record of its own, which the redo drops).
func TestStartOrderStartedLostWhenItsRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	turn := begin(t, rec)
	if err := turn.Flush(ctx); err != nil { // startDurable
		t.Fatal(err)
	}
	store.refuse.Store(true)
	_ = turn.Accept(ctx)
	_ = turn.Flush(ctx)
	store.refuse.Store(false)
	_ = turn.Emit(ctx, "agent.handoff", nil)
	_ = turn.Complete(ctx, nil)
	if err := turn.Flush(ctx); err != nil {
		t.Logf("Flush: %v", err)
	}
	waitStatus(t, store, turn.ID(), runtime.StatusCompleted)
	if types := strings.Join(eventTypes(t, store, turn.ID()), ","); !strings.HasPrefix(types, runtime.EventRequestStarted) {
		t.Fatalf("events %s: no runtime.request.started", types)
	}
}

// The same when the store refuses the run's start itself (handed at
// Begin with no event): the run is written back with its start event.
func TestStartOrderStartedLostWhenStartRefused(t *testing.T) {
	ctx := context.Background()
	store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	var refuse = &store.refuse
	refuse.Store(true)
	turn := begin(t, rec)
	if err := turn.Flush(ctx); err == nil { // startDurable: refused
		t.Fatal("Flush: no error")
	}
	_ = turn.Accept(ctx)
	_ = turn.Flush(ctx)
	refuse.Store(false)
	_ = turn.Complete(ctx, nil)
	_ = turn.Flush(ctx)
	waitStatus(t, store, turn.ID(), runtime.StatusCompleted)
	if types := strings.Join(eventTypes(t, store, turn.ID()), ","); !strings.HasPrefix(types, runtime.EventRequestStarted) {
		t.Fatalf("events %s: no runtime.request.started", types)
	}
}

// A process that stops while a turn waits for its session leaves a run
// with no event; Reconcile records its start (with its messageId) before
// runtime.request.failed, so that the start is every run's first event.
func TestStartOrderReconciledWaitingRunHasNoStart(t *testing.T) {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	turn, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s1", AgentID: "a", MessageID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The process dies here: a new Recorder over the same store.
	rec2, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec2.Reconcile(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if types := strings.Join(eventTypes(t, store, turn.ID()), ","); !strings.HasPrefix(types, runtime.EventRequestStarted) {
		t.Fatalf("events %s: no runtime.request.started", types)
	}
}

// recCounting52 counts the records WriteTurns is given.
type recCounting52 struct {
	*runtime.MemoryStore
	records atomic.Int64
}

func (s *recCounting52) WriteTurns(ctx context.Context, recs []runtime.TurnRecord) ([]runtime.Event, error) {
	s.records.Add(int64(len(recs)))
	return s.MemoryStore.WriteTurns(ctx, recs)
}

// An uncontended turn over a durable store writes two records, as
// before Accept: its start, then its events with its end (the start event
// is no record of its own).
func TestStartOrderUncontendedDurableTurnRecords(t *testing.T) {
	ctx := context.Background()
	store := &recCounting52{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Linger: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	turn := begin(t, rec)
	_ = turn.Flush(ctx) // startDurable
	_ = turn.Accept(ctx)
	_ = turn.Emit(ctx, "agent.handoff", nil)
	_ = turn.Complete(ctx, nil)
	_ = turn.Flush(ctx)
	t.Logf("records written for one uncontended turn: %d", store.records.Load())
	if store.records.Load() > 2 {
		t.Errorf("%d records for one uncontended turn (start, its started event alone, its end)", store.records.Load())
	}
}
