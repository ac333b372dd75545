package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// startOrderTurn is what one randomized turn recorded, for the check.
type startOrderTurn struct {
	id      string
	session string
	emitted []int // the data "i" of the x.ev events, in order
	status  runtime.Status
	// endBeforeUnlock: the turn ended while it held its session's lock
	// (so the next turn's start must follow all of its events).
	endBeforeUnlock bool
	accepted        bool
	preEmit         bool // an event recorded before the lock: its start too
	order           int  // the order in which it took its session's lock (-1: never)
}

// TestStartOrderRandomTurns drives many concurrent turns on few sessions
// through a Recorder (memory and SQLite stores, random flusher
// settings), with random Accept / Emit / Sync / Flush / Subscribe /
// Cancel / end interleavings, and checks each run's stored events:
// runtime.request.started first and once, every emitted event present
// once and in order, the terminal events and status right; and the
// session's order: a turn that ended holding the session has all its
// events before the next turn's start. Seed:
// STARTORDER_SEED (default: time).
func TestStartOrderRandomTurns(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STARTORDER_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rounds := 6
	if s := os.Getenv("STARTORDER_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d", seed)
	for round := range rounds {
		for _, kind := range []string{"memory", "sqlite"} {
			rs := seed + uint64(round)*7919
			t.Run(fmt.Sprintf("%s/round%d/seed%d", kind, round, rs), func(t *testing.T) {
				startOrderRound(t, kind, rs)
			})
		}
	}
}

func startOrderRound(t *testing.T, kind string, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var store runtime.Store
	switch kind {
	case "memory":
		store = runtime.NewMemoryStore(runtime.MemoryConfig{})
	case "sqlite":
		s, err := sqlite.Open(ctx, sqlite.Config{Path: t.TempDir() + "/s.db"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(ctx) })
		store = s.Runs()
	}
	lingers := []time.Duration{-1, 0, 200 * time.Microsecond, 2 * time.Millisecond}
	cfg := runtime.RecorderConfig{
		Store:       store,
		Linger:      lingers[rng.IntN(len(lingers))],
		BatchTurns:  1 + rng.IntN(8),
		BatchEvents: 1 + rng.IntN(20),
		QueueTurns:  1 + rng.IntN(12),
		FlushEvery:  1 + rng.IntN(10),
		Synchronous: rng.IntN(8) == 0,
	}
	t.Logf("config: linger %v batchTurns %d batchEvents %d queueTurns %d flushEvery %d synchronous %v",
		cfg.Linger, cfg.BatchTurns, cfg.BatchEvents, cfg.QueueTurns, cfg.FlushEvery, cfg.Synchronous)
	rec, err := runtime.NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const sessions, turnsPer = 3, 25
	var (
		locks   [sessions]sync.Mutex
		orders  [sessions]int
		omu     sync.Mutex
		mu      sync.Mutex
		results []*startOrderTurn
		wg      sync.WaitGroup
	)
	// Per-goroutine rngs, seeded from the round's.
	seeds := make([]uint64, sessions*turnsPer+1)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	stop := make(chan struct{})
	// Watchers: subscribe and unsubscribe sessions at random.
	var wwg sync.WaitGroup
	wwg.Go(func() {
		r := rand.New(rand.NewPCG(seeds[len(seeds)-1], 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := "s" + strconv.Itoa(r.IntN(sessions))
			evs, cancel := rec.Subscribe(ctx, "acme", s)
			go func() {
				for range evs {
				}
			}()
			time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
			cancel()
			if r.IntN(4) == 0 {
				_ = rec.Flush(ctx)
			}
			time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
		}
	})
	closeEarly := rng.IntN(3) == 0
	if closeEarly {
		d := time.Duration(rng.IntN(30000)) * time.Microsecond
		t.Logf("Close after %v, while turns run", d)
		wwg.Go(func() {
			time.Sleep(d)
			if err := rec.Close(ctx); err != nil {
				t.Errorf("early Close: %v", err)
			}
		})
	}
	for s := range sessions {
		for i := range turnsPer {
			r := rand.New(rand.NewPCG(seeds[s*turnsPer+i], 2))
			wg.Go(func() {
				time.Sleep(time.Duration(r.IntN(20000)) * time.Microsecond)
				sess := "s" + strconv.Itoa(s)
				turn, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: sess, AgentID: "a",
					MessageID: fmt.Sprintf("m-%d-%d", s, i)})
				if err != nil {
					t.Error(err)
					return
				}
				res := &startOrderTurn{id: turn.ID(), session: sess, order: -1}
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
				if r.IntN(2) == 0 {
					_ = turn.Flush(ctx) // startDurable
				}
				n := 0
				emit := func() {
					n++
					if err := turn.Emit(ctx, "x.ev", map[string]int{"i": n}); err != nil {
						t.Error(err)
					}
					res.emitted = append(res.emitted, n)
				}
				cancelled := false
				end := func() {
					if r.IntN(6) == 0 {
						cancelled = rec.Cancel(ctx, "acme", turn.ID()) || cancelled
					}
					var err error
					switch k := r.IntN(4); {
					case k == 0:
						err, res.status = turn.Complete(ctx, map[string]int{"n": n}), runtime.StatusCompleted
					case k == 1:
						err, res.status = turn.Fail(ctx, runtime.RunError{Bucket: "b", Category: "c", Message: "m"}), runtime.StatusFailed
						if cancelled {
							res.status = runtime.StatusCancelled
						}
					case k == 2:
						err, res.status = turn.Cancelled(ctx, "r"), runtime.StatusCancelled
					default:
						err, res.status = turn.Suspend(ctx, "inv-"+turn.ID(), nil, nil), runtime.StatusSuspended
					}
					if err != nil {
						t.Error(err)
					}
				}
				if r.IntN(8) == 0 {
					// Gave up waiting for the session (maybe after a
					// resume's prelude event): never accepted.
					if r.IntN(2) == 0 {
						emit()
					}
					if r.IntN(2) == 0 {
						_ = turn.Sync(ctx)
					}
					end()
					return
				}
				if r.IntN(8) == 0 {
					emit() // a resume's first event before it holds the lock
					res.preEmit = true
				}
				locks[s].Lock()
				omu.Lock()
				res.order = orders[s]
				orders[s]++
				omu.Unlock()
				res.accepted = true
				if err := turn.Accept(ctx); err != nil {
					t.Error(err)
				}
				if r.IntN(3) == 0 {
					_ = turn.Accept(ctx) // idempotent
				}
				for range r.IntN(14) {
					switch r.IntN(10) {
					case 0:
						_ = turn.Sync(ctx)
					case 1:
						_ = turn.Flush(ctx)
					case 2:
						time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
					}
					emit()
				}
				if r.IntN(2) == 0 {
					res.endBeforeUnlock = true
					end()
					locks[s].Unlock()
				} else {
					locks[s].Unlock()
					end()
				}
				if r.IntN(3) == 0 {
					_ = turn.Flush(ctx)
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	wwg.Wait()
	if err := rec.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The check.
	byID := map[string]*startOrderTurn{}
	for _, res := range results {
		byID[res.id] = res
	}
	orderViolations := 0
	for s := range sessions {
		sess := "s" + strconv.Itoa(s)
		evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: sess, Limit: runtime.MaxEventsLimit})
		if err != nil {
			t.Fatal(err)
		}
		perRun := map[string][]runtime.Event{}
		for _, e := range evs {
			perRun[e.RunID] = append(perRun[e.RunID], e)
		}
		// Ordering: a turn that ended holding the lock has all of its
		// events before the next (in lock order) turn's started.
		lastID := map[int]int64{}  // lock order -> max event id, for turns that ended holding the lock
		startID := map[int]int64{} // lock order -> started event id
		for _, res := range results {
			if res.session != sess {
				continue
			}
			got := perRun[res.id]
			run, err := store.Run(ctx, "acme", res.id)
			if err != nil {
				t.Errorf("run %s: %v", res.id, err)
				continue
			}
			if run.Status != res.status {
				t.Errorf("run %s: status %s, want %s", res.id, run.Status, res.status)
			}
			if len(got) == 0 || got[0].Type != runtime.EventRequestStarted {
				t.Errorf("run %s: first event not started: %v", res.id, startOrderTypes(got))
				continue
			}
			var d struct{ MessageID string }
			if json.Unmarshal(got[0].Data, &d) != nil || d.MessageID == "" {
				t.Errorf("run %s: started without messageId: %s", res.id, got[0].Data)
			}
			var idx []int
			starts := 0
			for _, e := range got {
				switch e.Type {
				case runtime.EventRequestStarted:
					starts++
				case "x.ev":
					var x struct{ I int }
					_ = json.Unmarshal(e.Data, &x)
					idx = append(idx, x.I)
				}
			}
			if starts != 1 {
				t.Errorf("run %s: %d started events: %v", res.id, starts, startOrderTypes(got))
			}
			if fmt.Sprint(idx) != fmt.Sprint(res.emitted) {
				t.Errorf("run %s: emitted %v, stored %v", res.id, res.emitted, idx)
			}
			var wantEnd []string
			switch res.status {
			case runtime.StatusCompleted:
				wantEnd = []string{runtime.EventRequestCompleted}
			case runtime.StatusFailed:
				wantEnd = []string{runtime.EventRequestFailed}
			case runtime.StatusCancelled:
				wantEnd = []string{runtime.EventRequestCancelled}
			case runtime.StatusSuspended:
				wantEnd = []string{runtime.EventRequestSuspended, runtime.EventApprovalRequested}
			}
			if tail := startOrderTypes(got[max(0, len(got)-len(wantEnd)):]); fmt.Sprint(tail) != fmt.Sprint(wantEnd) {
				t.Errorf("run %s: ends %v, want %v", res.id, tail, wantEnd)
			}
			if want := 1 + len(res.emitted) + len(wantEnd); len(got) != want {
				t.Errorf("run %s: %d events, want %d: %v", res.id, len(got), want, startOrderTypes(got))
			}
			for i, e := range got {
				if e.Seq != int64(i+1) {
					t.Errorf("run %s: event %d has seq %d", res.id, i, e.Seq)
				}
			}
			if res.order >= 0 && !res.preEmit {
				startID[res.order] = got[0].ID
			}
			if res.order >= 0 {
				if res.endBeforeUnlock {
					lastID[res.order] = got[len(got)-1].ID
				}
			}
		}
		for o, last := range lastID {
			if next, ok := startID[o+1]; ok && next < last {
				orderViolations++
				if os.Getenv("STARTORDER_DEBUG") != "" {
					for _, e := range evs {
						r := byID[e.RunID]
						t.Logf("id %d run %s order %d pre %v endBefore %v acc %v type %s", e.ID, e.RunID, r.order, r.preEmit, r.endBeforeUnlock, r.accepted, e.Type)
					}
				}
			}
		}
	}
	if orderViolations > 0 {
		t.Errorf("%d turns started before the turn that held the session before them had ended", orderViolations)
	}
}

func startOrderTypes(evs []runtime.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
