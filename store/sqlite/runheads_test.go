package sqlite_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// Group commits, single appends and finishes of the same runs, by
// several Stores of one file in random order (seed printed): a Store
// that cached a run's head from its own last write must notice when
// another Store wrote the run since (its batch is written again with
// the head read), and never append to a run another Store ended. The
// result is checked against a model after every write, and each run's
// events at the end.
func TestRunStoreCachedHeadsAcrossStores(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ctx := t.Context()
	stores := sharedRunStores(t, 3)

	type model struct {
		started bool
		status  runtime.Status
		seq     int
	}
	runs := make([]model, 12)
	id := func(i int) string { return fmt.Sprintf("run-%d", i) }
	// check says whether appending to run i may succeed, and the error
	// it must fail with otherwise.
	check := func(i int) error {
		switch {
		case !runs[i].started:
			return runtime.ErrNotFound
		case runs[i].status != runtime.StatusStarted:
			return runtime.ErrConflict
		}
		return nil
	}
	events := func(n int) []runtime.Event {
		evs := make([]runtime.Event, n)
		for j := range evs {
			evs[j] = runtime.Event{Type: "e", Data: []byte(fmt.Sprintf(`{"n":%d}`, j))}
		}
		return evs
	}
	for step := range 400 {
		st := stores[rng.IntN(len(stores))]
		switch op := rng.IntN(10); {
		case op < 6: // a group commit of up to 4 records
			next := append([]model(nil), runs...)
			var (
				recs []runtime.TurnRecord
				want error
				seen = map[int]bool{}
			)
			for range 1 + rng.IntN(4) {
				i := rng.IntN(len(runs))
				if seen[i] {
					continue
				}
				seen[i] = true
				rec := runtime.TurnRecord{Append: runtime.AppendRequest{RunID: id(i)}}
				if !next[i].started && rng.IntN(4) > 0 {
					rec.Start = &runtime.Run{ID: id(i), SessionID: "s", AgentID: "a"}
					next[i] = model{started: true, status: runtime.StatusStarted}
				}
				if n := rng.IntN(3); n > 0 {
					rec.Append.Events = events(n)
				}
				if rng.IntN(3) == 0 {
					rec.Append.Finish = &runtime.FinishRequest{Status: runtime.StatusCompleted}
				}
				if rec.Appends() {
					switch {
					case !next[i].started:
						want = errors.Join(want, runtime.ErrNotFound)
					case next[i].status != runtime.StatusStarted:
						want = errors.Join(want, runtime.ErrConflict)
					}
					next[i].seq += len(rec.Append.Events)
					if rec.Append.Finish != nil {
						next[i].status = runtime.StatusCompleted
					}
				}
				if rec.Start == nil && !rec.Appends() {
					continue
				}
				recs = append(recs, rec)
			}
			if len(recs) == 0 {
				continue
			}
			_, err := st.WriteTurns(ctx, recs)
			switch {
			case want == nil && err != nil:
				t.Fatalf("step %d: WriteTurns: %v", step, err)
			case want != nil && err == nil:
				t.Fatalf("step %d: WriteTurns succeeded, want %v", step, want)
			case want == nil:
				runs = next
			}
		case op < 8: // one append
			i := rng.IntN(len(runs))
			n := 1 + rng.IntN(2)
			_, err := st.Append(ctx, runtime.AppendRequest{RunID: id(i), Events: events(n)})
			if want := check(i); !errors.Is(err, want) || (want == nil) != (err == nil) {
				t.Fatalf("step %d: Append to %s: %v, want %v", step, id(i), err, want)
			}
			if err == nil {
				runs[i].seq += n
			}
		default: // a finish
			i := rng.IntN(len(runs))
			err := st.Finish(ctx, runtime.FinishRequest{RunID: id(i), Status: runtime.StatusFailed,
				Error: &runtime.RunError{Bucket: "b", Category: "c", Message: "m"}})
			if want := check(i); !errors.Is(err, want) || (want == nil) != (err == nil) {
				t.Fatalf("step %d: Finish %s: %v, want %v", step, id(i), err, want)
			}
			if err == nil {
				runs[i].status = runtime.StatusFailed
			}
		}
	}
	for i, m := range runs {
		st := stores[i%len(stores)]
		r, err := st.Run(ctx, "", id(i))
		if !m.started {
			if !errors.Is(err, runtime.ErrNotFound) {
				t.Fatalf("%s: %+v, %v; never started", id(i), r, err)
			}
			continue
		}
		if err != nil || r.Status != m.status {
			t.Fatalf("%s: %+v, %v; want status %s", id(i), r, err, m.status)
		}
		evs, err := st.Events(ctx, runtime.EventsRequest{RunID: id(i), Limit: runtime.MaxEventsLimit})
		if err != nil || len(evs) != m.seq {
			t.Fatalf("%s: %d events, %v; want %d", id(i), len(evs), err, m.seq)
		}
		for j, e := range evs {
			if e.Seq != int64(j+1) || e.SessionID != "s" || e.AgentID != "a" {
				t.Fatalf("%s: event %d = %+v", id(i), j, e)
			}
		}
	}
}
