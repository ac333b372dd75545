package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// refusingStore is a MemoryStore that refuses every write while refuse
// is set, as a store on a full disk or whose database went away does.
type refusingStore struct {
	*runtime.MemoryStore
	refuse  atomic.Bool
	refused atomic.Int64
}

var errDiskFull = errors.New("database or disk is full")

func (s *refusingStore) StartRun(ctx context.Context, r runtime.Run) error {
	if s.refuse.Load() {
		s.refused.Add(1)
		return errDiskFull
	}
	return s.MemoryStore.StartRun(ctx, r)
}

func (s *refusingStore) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	if s.refuse.Load() {
		s.refused.Add(1)
		return nil, errDiskFull
	}
	return s.MemoryStore.Append(ctx, req)
}

func (s *refusingStore) WriteTurns(ctx context.Context, recs []runtime.TurnRecord) ([]runtime.Event, error) {
	if s.refuse.Load() {
		s.refused.Add(1)
		return nil, errDiskFull
	}
	return s.MemoryStore.WriteTurns(ctx, recs)
}

// A run whose records the store refused (a full disk) is written again
// once the store takes writes: it ends with its status and every event
// it recorded, without a restart, on both of the Recorder's write paths,
// whether the store refused its start too or only its end. A purge of
// its session meanwhile is not undone, and with RetryRefused negative
// the run stays as the store has it.
func TestRecorderWritesRefusedRunsAgain(t *testing.T) {
	cases := []struct {
		name        string
		synchronous bool
		startToo    bool // the store refuses the run's start as well
		purge       bool // the session is purged while the store refuses
		noRetry     bool
	}{
		{name: "queued end"},
		{name: "queued start and end", startToo: true},
		{name: "own path end", synchronous: true},
		{name: "own path start and end", synchronous: true, startToo: true},
		{name: "purged meanwhile", startToo: true, purge: true},
		{name: "purged meanwhile, own path", synchronous: true, purge: true},
		{name: "retries off", noRetry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
			cfg := runtime.RecorderConfig{Store: store, Synchronous: tc.synchronous, RetryRefused: 5 * time.Millisecond}
			if tc.noRetry {
				cfg.RetryRefused = -1
			}
			rec, err := runtime.NewRecorder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close(ctx)
			store.refuse.Store(tc.startToo)
			turn, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s1", AgentID: "a"})
			if err != nil {
				if !tc.synchronous || !tc.startToo {
					t.Fatal(err)
				}
				// On its own path a refused start fails Begin: the caller
				// knows, and no run exists to write again.
				store.refuse.Store(false)
				if err := rec.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if res, _ := store.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", SessionID: "s1"}); len(res.Runs) != 0 {
					t.Fatalf("runs after a refused Begin: %+v", res.Runs)
				}
				return
			}
			if err := turn.Emit(ctx, "agent.output.delta", map[string]string{"text": "hello"}); err != nil {
				t.Fatal(err)
			}
			store.refuse.Store(true)
			if err := turn.Complete(ctx, map[string]string{"text": "hello"}); err != nil && !tc.synchronous {
				t.Fatal(err)
			}
			if err := turn.Flush(ctx); err == nil {
				t.Fatal("Flush: no error from a store that refuses writes")
			}
			if tc.purge {
				store.refuse.Store(false)
				if _, err := rec.PurgeSession(ctx, "acme", "s1", nil); err != nil {
					t.Fatal(err)
				}
			}
			before := store.refused.Load()
			time.Sleep(30 * time.Millisecond) // a few attempts, refused
			if after := store.refused.Load(); !tc.noRetry && !tc.purge && after == before {
				t.Fatal("no attempt to write the run again")
			} else if tc.noRetry && after != before {
				t.Fatalf("%d attempts with retries off", after-before)
			}
			store.refuse.Store(false)

			deadline := time.Now().Add(10 * time.Second)
			for {
				run, err := store.Run(ctx, "acme", turn.ID())
				switch {
				case tc.purge || tc.noRetry:
					time.Sleep(50 * time.Millisecond) // time for a wrong write
					run, err = store.Run(ctx, "acme", turn.ID())
					if tc.purge && !errors.Is(err, runtime.ErrNotFound) {
						t.Fatalf("a purged run was written back: %+v, %v", run, err)
					}
					if tc.noRetry && err == nil && run.Status != runtime.StatusStarted {
						t.Fatalf("retries off, yet the run is %s", run.Status)
					}
					return
				case err == nil && run.Status == runtime.StatusCompleted:
					// The refusal is not reported once the run is written.
					time.Sleep(20 * time.Millisecond)
					if err := rec.Flush(ctx); err != nil {
						t.Fatalf("Flush after the run was written: %v", err)
					}
					evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: turn.ID()})
					if err != nil {
						t.Fatal(err)
					}
					var types []string
					for _, e := range evs {
						types = append(types, e.Type)
					}
					want := []string{runtime.EventRequestStarted, "agent.output.delta", runtime.EventRequestCompleted}
					if len(types) != len(want) {
						t.Fatalf("events %v, want %v", types, want)
					}
					for i := range want {
						if types[i] != want[i] {
							t.Fatalf("events %v, want %v", types, want)
						}
					}
					return
				case time.Now().After(deadline):
					t.Fatalf("the run was not written again: %+v, %v", run, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// A subscriber of the session sees the redone run's events when the
// store takes them.
func TestRecorderPublishesRedoneRun(t *testing.T) {
	ctx := context.Background()
	store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	turn := begin(t, rec)
	store.refuse.Store(true)
	_ = turn.Fail(ctx, runtime.RunError{Bucket: "retryable_transient", Category: "provider_unavailable", Message: "down"})
	if err := turn.Flush(ctx); err == nil {
		t.Fatal("Flush: no error from a store that refuses writes")
	}
	events, cancel := rec.Subscribe(ctx, "acme", "s1")
	defer cancel()
	store.refuse.Store(false)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Type == runtime.EventRequestFailed {
				if e.RunID != turn.ID() {
					t.Fatalf("failed event of run %q, want %q", e.RunID, turn.ID())
				}
				return
			}
		case <-timeout:
			t.Fatal("no failed event published")
		}
	}
}

// waitStatus waits until the store has the run in status want.
func waitStatus(t *testing.T, store runtime.Store, runID string, want runtime.Status) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		run, err := store.Run(context.Background(), "acme", runID)
		if err == nil && run.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %+v, %v; want status %s", runID, run, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventTypes is the run's stored events' types.
func eventTypes(t *testing.T, store runtime.Store, runID string) []string {
	t.Helper()
	evs, err := store.Events(context.Background(), runtime.EventsRequest{Tenant: "acme", RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return types
}

// Events the store refused in the middle of a turn are not written
// again: the turn goes on and writes its later events first (so they
// would come out of order), and a write reported failed may have
// committed (so they would come twice). A purge of the session while
// such a turn runs leaves it alone, and the turn's refused end is
// still written again.
func TestRecorderRedoOfMidTurnRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		ambiguous bool // the refused write committed
		purge     bool
	}{
		{name: "refused"},
		{name: "committed, reported refused", ambiguous: true},
		{name: "purged while running", purge: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &ambiguousStore{refusingStore: refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}}
			rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close(ctx)
			turn := begin(t, rec)
			if err := turn.Accept(ctx); err != nil { // its start written with the run's
				t.Fatal(err)
			}
			if err := turn.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			_ = turn.Emit(ctx, "first", nil)
			store.ambiguous.Store(tc.ambiguous)
			store.refuse.Store(!tc.ambiguous)
			if err := turn.Sync(ctx); err == nil {
				t.Fatal("Sync: no error")
			}
			store.ambiguous.Store(false)
			store.refuse.Store(false)
			if tc.purge {
				if _, err := rec.PurgeSession(ctx, "acme", "s1", nil); err != nil {
					t.Fatal(err)
				}
			}
			_ = turn.Emit(ctx, "second", nil)
			_ = turn.Sync(ctx)
			store.refuse.Store(true)
			_ = turn.Complete(ctx, nil)
			_ = turn.Flush(ctx)
			store.refuse.Store(false)
			waitStatus(t, store, turn.ID(), runtime.StatusCompleted)
			types := strings.Join(eventTypes(t, store, turn.ID()), ",")
			want := "runtime.request.started,second,runtime.request.completed"
			if tc.ambiguous {
				want = "runtime.request.started,first,second,runtime.request.completed"
			}
			if types != want {
				t.Fatalf("events %s, want %s", types, want)
			}
		})
	}
}

// ambiguousStore commits a write and then reports it failed (a commit
// whose answer was lost) while ambiguous is set.
type ambiguousStore struct {
	refusingStore
	ambiguous atomic.Bool
}

func (s *ambiguousStore) WriteTurns(ctx context.Context, recs []runtime.TurnRecord) ([]runtime.Event, error) {
	if s.ambiguous.Load() {
		_, _ = s.MemoryStore.WriteTurns(ctx, recs)
		return nil, errDiskFull
	}
	return s.refusingStore.WriteTurns(ctx, recs)
}

func (s *ambiguousStore) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	if s.ambiguous.Load() {
		_, _ = s.MemoryStore.Append(ctx, req)
		return nil, errDiskFull
	}
	return s.refusingStore.Append(ctx, req)
}

// hangingStore hangs every Append until its context ends once hang is
// set (a database that stopped answering).
type hangingStore struct {
	refusingStore
	hang atomic.Bool
}

func (s *hangingStore) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	if s.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.refusingStore.Append(ctx, req)
}

// Close returns within its context while the redo's writes hang: it
// cuts them short, leaving the runs to Reconcile.
func TestRecorderCloseCutsRedoShort(t *testing.T) {
	ctx := context.Background()
	store := &hangingStore{refusingStore: refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Synchronous: true, RetryRefused: time.Millisecond, WriteTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var turns []*runtime.Turn
	for range 3 {
		turn := begin(t, rec)
		turns = append(turns, turn)
	}
	store.refuse.Store(true)
	for _, turn := range turns {
		_ = turn.Complete(ctx, nil)
	}
	store.refuse.Store(false)
	store.hang.Store(true) // the redo's writes now hang
	time.Sleep(20 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = rec.Close(cctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close with a 100ms context took %v", d)
	}
}

// begin begins a turn of session s1 of tenant acme.
func begin(t *testing.T, rec *runtime.Recorder) *runtime.Turn {
	t.Helper()
	turn, _, err := rec.Begin(context.Background(), runtime.BeginRequest{Tenant: "acme", SessionID: "s1", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

// refusedRun is a turn begun and completed while refuse is set: its
// records were refused (its Flush fails).
func refusedRun(t *testing.T, rec *runtime.Recorder, refuse *atomic.Bool) *runtime.Turn {
	t.Helper()
	ctx := context.Background()
	refuse.Store(true)
	turn := begin(t, rec)
	_ = turn.Complete(ctx, nil)
	if err := turn.Flush(ctx); err == nil {
		t.Fatal("Flush: no error")
	}
	return turn
}

// eventsRefusingStore takes runs' starts but refuses events (a table of
// events locked, or full) while refuse is set.
type eventsRefusingStore struct {
	refusingStore
}

func (s *eventsRefusingStore) StartRun(ctx context.Context, r runtime.Run) error {
	return s.MemoryStore.StartRun(ctx, r)
}

// A run whose start the store would take alone but whose first events
// it refuses is not started without them: its start record is written
// in one transaction, refused whole, and written again whole with the
// run's end.
func TestRecorderStartKeepsItsEvents(t *testing.T) {
	ctx := context.Background()
	store := &eventsRefusingStore{refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: time.Millisecond, Linger: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	turn := refusedRun(t, rec, &store.refuse)
	store.refuse.Store(false)
	waitStatus(t, store, turn.ID(), runtime.StatusCompleted)
	if types := strings.Join(eventTypes(t, store, turn.ID()), ","); types != "runtime.request.started,runtime.request.completed" {
		t.Fatalf("events %s", types)
	}
}

// A refused run whose conversation was deleted meanwhile is not written
// back: on another replica (SetConversationGone says so), or here while
// the store still refused its end (the purge kept it as started). A run
// the store has as started gets its end and is purged; one it never had
// is given up.
func TestRecorderRedoOfDeletedConversation(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		startStored bool
		elsewhere   bool // deleted on another replica (the gone check), else purged here while refused
		synchronous bool
	}{
		{name: "elsewhere, started", startStored: true, elsewhere: true},
		{name: "elsewhere, never started", elsewhere: true},
		{name: "here while refused", startStored: true, synchronous: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
			rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Synchronous: tc.synchronous, RetryRefused: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close(ctx)
			var deleted atomic.Bool
			rec.SetConversationGone(func(ctx context.Context, run runtime.Run) bool { return deleted.Load() })
			store.refuse.Store(!tc.startStored)
			turn := begin(t, rec)
			if tc.startStored {
				if err := turn.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			store.refuse.Store(true)
			_ = turn.Complete(ctx, nil)
			if err := turn.Flush(ctx); err == nil {
				t.Fatal("Flush: no error")
			}
			if tc.elsewhere {
				deleted.Store(true)
			} else if _, err := rec.PurgeSession(ctx, "acme", "s1", nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			store.refuse.Store(false)
			deadline := time.Now().Add(10 * time.Second)
			for {
				run, err := store.Run(ctx, "acme", turn.ID())
				if errors.Is(err, runtime.ErrNotFound) {
					time.Sleep(50 * time.Millisecond) // time for a wrong write
					if run, err := store.Run(ctx, "acme", turn.ID()); !errors.Is(err, runtime.ErrNotFound) {
						t.Fatalf("the run came back: %+v, %v", run, err)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run of a deleted conversation stays: %+v, %v", run, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// Close tries the refused runs once more: a store that takes writes
// again by then gets them, rather than leave them to Reconcile (or lose
// a run whose start it never took).
func TestRecorderCloseWritesRefusedRuns(t *testing.T) {
	ctx := context.Background()
	store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	turn := refusedRun(t, rec, &store.refuse)
	store.refuse.Store(false)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = rec.Close(cctx)
	if run, err := store.Run(ctx, "acme", turn.ID()); err != nil || run.Status != runtime.StatusCompleted {
		t.Fatalf("after Close: %+v, %v", run, err)
	}
}

// A group commit the store refuses for itself (down, full, hung) fails
// all its records at once, kept for the redo, rather than try each of
// them alone, one after another (each its write timeout when the store
// hangs); one it refuses for a record (a conflict) is still written one
// by one, so that the others are not held back.
func TestRecorderRefusedGroupCommitFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	store := &refusingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{})}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, RetryRefused: time.Hour, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	store.refuse.Store(true)
	for range 5 {
		turn := begin(t, rec)
		_ = turn.Complete(ctx, nil)
	}
	if err := rec.Flush(ctx); err == nil {
		t.Fatal("Flush: no error")
	}
	if n := store.refused.Load(); n != 1 {
		t.Fatalf("the store was asked %d times, want once (the group commit)", n)
	}
}
