package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/runtime/runtimetest"
	"github.com/armature-go/armature/store/sqlite"
)

func TestRunStore(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtime.Store {
		s, _ := openStore(t, sqlite.Config{})
		return s.Runs()
	})
}

func BenchmarkTurnSQLite(b *testing.B) {
	s, _ := openStore(b, sqlite.Config{})
	runtimetest.BenchmarkTurn(b, s.Runs())
}

func BenchmarkTurnConcurrentSQLite(b *testing.B) {
	s, _ := openStore(b, sqlite.Config{})
	runtimetest.BenchmarkTurnConcurrent(b, s.Runs())
}

// A run survives a reopen with its events; ids keep increasing; a run
// the previous process left started is recovered; a turn the previous
// process had not yet group-committed is missing whole.
func TestRunStoreReopenAndRecover(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	s1, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rec1, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s1.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	done, _, err := rec1.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := done.Complete(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	if err := rec1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A turn in flight when the process dies, unwatched: nothing of it
	// was written.
	lost, _, err := rec1.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := lost.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": "lost"}); err != nil {
		t.Fatal(err)
	}
	// A turn in flight written on its own path (as when watched live):
	// its run was started, its buffered events are lost.
	sync1, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s1.Runs(), Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	crashed, _, err := sync1.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := crashed.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": "lost"}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	runs := s2.Runs()
	evs, err := runs.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	// The finished run has its three events. The two in flight have at
	// most their start: an unwatched turn's start is handed to the group
	// commit at Begin and is written if the flusher got to it before the
	// process died; nothing either buffered after it.
	perRun := map[string]int{}
	for _, e := range evs {
		perRun[e.RunID]++
	}
	if perRun[done.ID()] != 3 || perRun[lost.ID()] > 1 || perRun[crashed.ID()] > 1 || len(perRun) > 3 {
		t.Fatalf("events after reopen per run = %v (done %s, lost %s, crashed %s); want 3, at most 1, at most 1",
			perRun, done.ID(), lost.ID(), crashed.ID())
	}
	inFlight := 1 // runs started that the reopened store must recover
	if _, err := runs.Run(ctx, "acme", lost.ID()); err == nil {
		inFlight++
	} else if !errors.Is(err, runtime.ErrNotFound) {
		t.Fatal(err)
	}
	if r, err := runs.Run(ctx, "acme", crashed.ID()); err != nil || r.Status != runtime.StatusStarted {
		t.Fatalf("crashed run = %+v, %v", r, err)
	}
	rec2, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rec2.Recover(ctx); err != nil || n != inFlight {
		t.Fatalf("Recover = %d, %v; want %d", n, err, inFlight)
	}
	r, err := runs.Run(ctx, "acme", crashed.ID())
	if err != nil || r.Status != runtime.StatusFailed || r.Error == nil || r.Error.Category != runtime.CategoryInterrupted {
		t.Fatalf("recovered run = %+v, %v", r, err)
	}
	after, err := runs.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s", AfterID: evs[len(evs)-1].ID})
	// Each recovered run gets its failure, after its start when it
	// recorded nothing (its start event is recorded then).
	var failed []runtime.Event
	wantAfter := 0
	for _, id := range []string{crashed.ID(), lost.ID()} {
		if _, err := runs.Run(ctx, "acme", id); err == nil {
			wantAfter++
			if perRun[id] == 0 {
				wantAfter++
			}
		}
	}
	for _, e := range after {
		if e.RunID == crashed.ID() {
			failed = append(failed, e)
		}
	}
	wantTypes := []string{runtime.EventRequestFailed}
	if perRun[crashed.ID()] == 0 {
		wantTypes = []string{runtime.EventRequestStarted, runtime.EventRequestFailed}
	}
	ok := err == nil && len(after) == wantAfter && len(failed) == len(wantTypes)
	for i := 0; ok && i < len(failed); i++ {
		ok = failed[i].Type == wantTypes[i] && failed[i].Seq == int64(perRun[crashed.ID()]+i+1)
	}
	if !ok {
		t.Fatalf("events after recovery = %+v, %v", after, err)
	}
	if r, err := runs.Run(ctx, "acme", done.ID()); err != nil || r.Status != runtime.StatusCompleted || string(r.Output) != `"hi"` {
		t.Errorf("completed run after reopen = %+v, %v", r, err)
	}
}

// Two Stores on one file (as two processes would) append concurrently:
// ids stay unique and increasing within every run, seqs contiguous.
func TestRunStoreAcrossStores(t *testing.T) {
	ctx := t.Context()
	stores := sharedRunStores(t, 2)
	const runs, batches = 4, 10
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		st := stores[i%2]
		id := fmt.Sprintf("r%d", i)
		if err := st.StartRun(ctx, runtime.Run{ID: id, SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range batches {
				if _, err := st.Append(ctx, runtime.AppendRequest{RunID: id,
					Events: []runtime.Event{{Type: "a"}, {Type: "b"}}}); err != nil {
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
	evs, err := stores[0].Events(ctx, runtime.EventsRequest{SessionID: "s"})
	if err != nil || len(evs) != runs*batches*2 {
		t.Fatalf("session events = %d, %v", len(evs), err)
	}
	checkSessionEvents(t, evs)
}

// sharedRunStores opens n Stores on one new file (as n processes
// would) and returns their RunStores.
func sharedRunStores(t *testing.T, n int) []*sqlite.RunStore {
	t.Helper()
	_, path := openStore(t, sqlite.Config{})
	var stores []*sqlite.RunStore
	for range n {
		s, _ := openStore(t, sqlite.Config{Path: path, BusyTimeout: 10 * time.Second})
		stores = append(stores, s.Runs())
	}
	return stores
}

// checkSessionEvents checks a session's events: ids increasing, every
// run's seqs 1, 2, 3, ...
func checkSessionEvents(t *testing.T, evs []runtime.Event) {
	t.Helper()
	next := map[string]int64{}
	for i, e := range evs {
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Fatalf("ids not increasing: %d after %d", e.ID, evs[i-1].ID)
		}
		next[e.RunID]++
		if e.Seq != next[e.RunID] {
			t.Fatalf("run %s: seq %d, want %d", e.RunID, e.Seq, next[e.RunID])
		}
	}
}

func TestRunStoreClosed(t *testing.T) {
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Runs()
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := runs.StartRun(t.Context(), runtime.Run{ID: "r"}); err == nil {
		t.Fatal("StartRun on a closed store succeeded")
	}
	if _, err := runs.Run(t.Context(), "", "r"); err == nil {
		t.Fatal("Run on a closed store succeeded")
	}
}

// FuzzDecodeRun writes arbitrary runs and run_event_chunks rows (as a damaged
// or foreign-written file would hold them) and checks that Run, Events,
// ListRuns and Append never panic, fail only with errors a caller can
// act on, and return only valid JSON and known statuses.
func FuzzDecodeRun(f *testing.F) {
	f.Add("r", "started", []byte(`{"a":1}`), []byte(`{"x":[1]}`), "cat", int64(5), int64(0))
	f.Add("r", "completed", []byte(`{bad`), []byte("\xff"), "", int64(-1), int64(1<<62))
	f.Add("", "paused", []byte(``), []byte(``), "", int64(1<<63-1), int64(-1<<63))
	f.Add("\xff", "failed", []byte("null"), []byte("\x00"), "\x00", int64(0), int64(0))

	s, path := openStore(f, sqlite.Config{})
	runs := s.Runs()
	db := rawDB(f, path)
	n := 0
	f.Fuzz(func(t *testing.T, id, status string, output, data []byte, category string, seq, at int64) {
		n++
		ctx := t.Context()
		tenant := fmt.Sprintf("fuzz-%d", n) // this run's rows only
		if _, err := db.Exec(`INSERT INTO runs (tenant, id, session_id, agent_id, parent_id, correlation_id,
			invocation_id, status, last_seq, started_at, ended_at, error_category, output)
			VALUES (?, CAST(? AS TEXT), 's', 'a', '', '', '', CAST(? AS TEXT), ?, ?, ?, CAST(? AS TEXT), CAST(? AS BLOB))`,
			tenant, id, status, seq, at, at, category, output); err != nil {
			t.Skip(err)
		}
		// A well-formed chunk holding data, and data itself as a chunk,
		// with ids taken as the store takes them.
		enc, size := sqlite.EncodeChunk([]runtime.Event{{Type: "x", Time: time.Unix(0, at), Data: data}})
		for _, c := range []struct {
			seq, n, size int64
			data         []byte
		}{{seq, 1, size, enc}, {seq ^ 1, 1 + int64(len(data)%3), 0, append([]byte{}, data...)}} {
			if _, err := db.Exec(`INSERT INTO run_event_chunks (first_id, tenant, run_id, session_id, first_seq, n, size, data)
				VALUES ((SELECT next FROM run_event_ids), ?, CAST(? AS TEXT), 's', ?, ?, ?, CAST(? AS BLOB))`,
				tenant, id, c.seq, c.n, c.size, c.data); err != nil {
				t.Skip(err)
			}
			exec(t, db, `UPDATE run_event_ids SET next = next + ?`, c.n)
		}
		acceptable := func(err error) bool {
			return err == nil || errors.Is(err, sqlite.ErrCorrupt) || errors.Is(err, runtime.ErrNotFound) ||
				errors.Is(err, runtime.ErrInvalidRequest) || errors.Is(err, runtime.ErrConflict)
		}
		check := func(r runtime.Run) {
			if (r.Status != runtime.StatusStarted && !r.Status.Final()) || (len(r.Output) > 0 && !json.Valid(r.Output)) {
				t.Fatalf("decoded run %+v", r)
			}
		}
		r, err := runs.Run(ctx, tenant, id)
		if !acceptable(err) {
			t.Fatalf("Run = %v", err)
		}
		if err == nil {
			check(*r)
		}
		resp, err := runs.ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant})
		if !acceptable(err) {
			t.Fatalf("ListRuns = %v", err)
		}
		for _, r := range resp.Runs {
			check(r)
		}
		for _, req := range []runtime.EventsRequest{{Tenant: tenant, RunID: id}, {Tenant: tenant, SessionID: "s"}} {
			evs, err := runs.Events(ctx, req)
			if !acceptable(err) {
				t.Fatalf("Events = %v", err)
			}
			for _, e := range evs {
				if len(e.Data) > 0 && !json.Valid(e.Data) {
					t.Fatalf("event data %q", e.Data)
				}
			}
		}
		if _, err := runs.Append(ctx, runtime.AppendRequest{Tenant: tenant, RunID: id, Events: []runtime.Event{{Type: "y"}}}); !acceptable(err) {
			t.Fatalf("Append = %v", err)
		}
	})
}

func TestRunStoreCorruptRows(t *testing.T) {
	s, path := openStore(t, sqlite.Config{})
	runs := s.Runs()
	ctx := t.Context()
	if err := runs.StartRun(ctx, runtime.Run{ID: "r", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Append(ctx, runtime.AppendRequest{RunID: "r", Events: []runtime.Event{{Type: "x", Data: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	bad, _ := sqlite.EncodeChunk([]runtime.Event{{Type: "x", Data: json.RawMessage(`{nope`)}})
	good, _ := sqlite.EncodeChunk([]runtime.Event{{Type: "x", Data: json.RawMessage(`{}`)}})
	for _, c := range []struct {
		name string
		n    int
		data []byte
	}{
		{"invalid JSON", 1, bad},
		{"empty", 1, []byte{}},
		{"unknown version", 1, append([]byte{9}, good[1:]...)},
		{"truncated", 1, good[:len(good)-1]},
		{"trailing bytes", 1, append(good[:len(good):len(good)], 0)},
		{"more events than stored", 2, good},
		{"huge length", 1, []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0}},
	} {
		exec(t, db, `UPDATE run_event_chunks SET n = ?, data = CAST(? AS BLOB)`, c.n, c.data)
		for _, req := range []runtime.EventsRequest{{SessionID: "s"}, {RunID: "r"}} {
			if _, err := runs.Events(ctx, req); !errors.Is(err, sqlite.ErrCorrupt) {
				t.Errorf("%s: Events(%+v) = %v, want ErrCorrupt", c.name, req, err)
			}
		}
	}
	exec(t, db, `UPDATE runs SET status = 'exploded'`)
	if _, err := runs.Run(ctx, "", "r"); !errors.Is(err, sqlite.ErrCorrupt) {
		t.Errorf("Run with an unknown status = %v, want ErrCorrupt", err)
	}
	if _, err := runs.ListRuns(ctx, runtime.ListRunsRequest{}); !errors.Is(err, sqlite.ErrCorrupt) {
		t.Errorf("ListRuns with an unknown status = %v, want ErrCorrupt", err)
	}
}
