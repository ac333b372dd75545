package runtime_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// exclusiveStore fails the test when two batches are written at once:
// whoever writes them (the flusher, or a Flush that writes the queue
// itself), batches go to the store one at a time, in queue order.
type exclusiveStore struct {
	*runtime.MemoryStore
	t        *testing.T
	inFlight atomic.Int32
	panicOn  atomic.Bool
}

func (s *exclusiveStore) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	if n := s.inFlight.Add(1); n != 1 {
		s.t.Errorf("%d batches written at once", n)
	}
	defer s.inFlight.Add(-1)
	if s.panicOn.Load() {
		panic("store bug")
	}
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	return s.MemoryStore.WriteTurns(ctx, turns)
}

// TestRecorderFlushWritesInOrder runs turns on many goroutines, each
// flushing its turn, with the flusher lingering in between: batches never
// overlap, every acknowledged turn is completed in the store, and a
// session's events keep the order its turns ran in (randomized; seed
// printed).
func TestRecorderFlushWritesInOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	st := &exclusiveStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{}), t: t}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: st, Linger: 200 * time.Microsecond, BatchTurns: 8})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const workers, turns = 8, 40
	var wg sync.WaitGroup
	runs := make([][]string, workers) // each worker's own session, its runs in order
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			session := fmt.Sprintf("s%d", w)
			for i := range turns {
				turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: session})
				if err != nil {
					t.Error(err)
					return
				}
				if r.IntN(2) == 0 {
					if err := turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": fmt.Sprint(i)}); err != nil {
						t.Error(err)
					}
				}
				if err := turn.Complete(tctx, i); err != nil {
					t.Error(err)
				}
				if r.IntN(4) != 0 { // some turns leave their records to the flusher
					if err := turn.Flush(ctx); err != nil {
						t.Error(err)
					}
					if run, err := st.Run(ctx, "", turn.ID()); err != nil || run.Status != runtime.StatusCompleted {
						t.Errorf("run after Turn.Flush = %+v, %v", run, err)
					}
				}
				runs[w] = append(runs[w], turn.ID())
			}
		})
	}
	wg.Wait()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for w, ids := range runs {
		evs, err := st.Events(ctx, runtime.EventsRequest{SessionID: fmt.Sprintf("s%d", w)})
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, e := range evs {
			if e.Type == runtime.EventRequestStarted {
				order = append(order, e.RunID)
			}
		}
		if fmt.Sprint(order) != fmt.Sprint(ids) {
			t.Fatalf("session s%d: runs in event order %v, want the order they ran %v", w, order, ids)
		}
	}
}

// A store that panics while a Flush writes the queue itself fails that
// batch's turns; the Recorder goes on writing the next ones.
func TestRecorderFlushStorePanic(t *testing.T) {
	st := &exclusiveStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{}), t: t}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: st, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Complete(tctx, "x"); err != nil {
		t.Fatal(err)
	}
	st.panicOn.Store(true)
	func() {
		defer func() {
			if p := recover(); p != "store bug" {
				t.Errorf("Flush over a panicking store: recovered %v", p)
			}
		}()
		_ = turn.Flush(ctx)
	}()
	st.panicOn.Store(false)
	if err := turn.Flush(ctx); err == nil {
		t.Error("Turn.Flush after its batch panicked = nil")
	}
	next, nctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Complete(nctx, "y"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- next.Flush(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the next turn's Flush = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next turn's Flush is stuck behind the panicked batch")
	}
	_ = rec.Flush(ctx) // consumes the failure
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
