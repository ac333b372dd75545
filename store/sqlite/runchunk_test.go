package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// allEvents reads every event req names, in pages of page events.
func allEvents(t *testing.T, rs *sqlite.RunStore, req runtime.EventsRequest, page int) []runtime.Event {
	t.Helper()
	req.Limit = page
	var out []runtime.Event
	for {
		evs, err := rs.Events(t.Context(), req)
		if err != nil {
			t.Fatalf("Events(%+v): %v", req, err)
		}
		if len(evs) > page || (len(evs) > 0 && evs[0].ID <= req.AfterID) {
			t.Fatalf("Events(%+v) = %d events from id %d", req, len(evs), evs[0].ID)
		}
		out = append(out, evs...)
		if len(evs) < page {
			return out
		}
		req.AfterID = evs[len(evs)-1].ID
	}
}

// sameEventList reports the first difference between got and want.
func sameEventList(t *testing.T, what string, got, want []runtime.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Seq != w.Seq || g.Type != w.Type || g.RunID != w.RunID || g.ParentRequestID != w.ParentRequestID ||
			g.SessionID != w.SessionID || g.AgentID != w.AgentID || g.Tenant != w.Tenant || !g.Time.Equal(w.Time) ||
			string(g.Data) != string(w.Data) || (g.Data == nil) != (w.Data == nil) {
			t.Fatalf("%s: event %d = %+v, want %+v", what, i, g, w)
		}
	}
}

// Migration 9 moves run_events rows into chunks keeping each event's
// id, seq, type, time and data (ids with gaps, runs interleaved, more
// events in a row than one chunk takes, empty data), drops run_events,
// counts the same sizes, and takes the next ids above every id
// run_events ever assigned, even those of deleted rows.
func TestRunEventsMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	if err := sqlite.MigrateFileTo(ctx, path, 8); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	type run struct{ tenant, id, session, agent, parent, status string }
	runs := []run{
		{"acme", "r1", "s1", "a", "p0", "completed"},
		{"acme", "r2", "s1", "b", "", "failed"},
		{"", "r3", "s2", "a", "", "completed"},
		{"acme", "r4", "s1", "a", "", "started"},
	}
	for i, r := range runs {
		exec(t, db, `INSERT INTO runs (pos, tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id,
			status, last_seq, started_at, ended_at, conversation_id) VALUES (?, ?, ?, ?, ?, ?, 'c', '', ?, 0, ?, ?, '')`,
			i+1, r.tenant, r.id, r.session, r.agent, r.parent, r.status, 1000+i, 2000+i)
	}
	var want []runtime.Event
	seqs := map[string]int64{}
	add := func(id int64, r run, typ string, at int64, data string) {
		seqs[r.id]++
		e := runtime.Event{ID: id, Seq: seqs[r.id], Type: typ, RunID: r.id, ParentRequestID: r.parent,
			SessionID: r.session, AgentID: r.agent, Tenant: r.tenant, Time: time.Unix(0, at).UTC()}
		var d any
		if data != "" {
			e.Data = json.RawMessage(data)
			d = []byte(data)
		}
		want = append(want, e)
		exec(t, db, `INSERT INTO run_events (id, tenant, run_id, seq, session_id, type, time, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			id, r.tenant, r.id, e.Seq, r.session, typ, at, d)
	}
	add(1, runs[0], runtime.EventRequestStarted, 1e18, `{"a":1}`)
	add(2, runs[0], runtime.EventAdapterEvent, 1e18+5, "")
	add(3, runs[1], runtime.EventRequestStarted, 1e18+3, `{}`)
	add(4, runs[0], runtime.EventAdapterEvent, 1e18+4, `{"text":"hé"}`)
	add(5, runs[1], runtime.EventAdapterEvent, -1e9, `[1]`)
	add(7, runs[1], runtime.EventRequestFailed, 1<<62, `{"b":2}`) // id 6 was deleted
	add(8, runs[2], "x.custom", 0, "")
	for i := range int64(300) { // more than one chunk takes
		add(9+i, runs[0], runtime.EventAdapterEvent, 1e18+10+i, fmt.Sprintf(`{"i":%d}`, i))
	}
	add(309, runs[0], runtime.EventRequestCompleted, 1e18+400, `{"output":"hi"}`)
	for _, r := range runs {
		exec(t, db, `UPDATE runs SET last_seq = ? WHERE id = ?`, seqs[r.id], r.id)
	}
	// Rows above 309 were written and deleted.
	exec(t, db, `UPDATE sqlite_sequence SET seq = 400 WHERE name = 'run_events'`)

	s, _ := openStore(t, sqlite.Config{Path: path})
	rs := s.Runs()
	filter := func(keep func(runtime.Event) bool) []runtime.Event {
		var out []runtime.Event
		for _, e := range want {
			if keep(e) {
				out = append(out, e)
			}
		}
		return out
	}
	for _, page := range []int{1, 7, 1000} {
		sameEventList(t, "session s1", allEvents(t, rs, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"}, page),
			filter(func(e runtime.Event) bool { return e.Tenant == "acme" && e.SessionID == "s1" }))
		sameEventList(t, "session s2", allEvents(t, rs, runtime.EventsRequest{SessionID: "s2"}, page),
			filter(func(e runtime.Event) bool { return e.Tenant == "" && e.SessionID == "s2" }))
		for _, r := range runs {
			sameEventList(t, "run "+r.id, allEvents(t, rs, runtime.EventsRequest{Tenant: r.tenant, RunID: r.id}, page),
				filter(func(e runtime.Event) bool { return e.RunID == r.id }))
		}
	}
	var old int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'run_events'`).Scan(&old); err != nil || old != 0 {
		t.Errorf("run_events left: %d, %v", old, err)
	}

	// The estimate counted from the chunks is the one from the events.
	var size int64
	for _, r := range runs {
		run, err := rs.Run(ctx, r.tenant, r.id)
		if err != nil {
			t.Fatal(err)
		}
		size += runtime.RunSize(*run)
	}
	for _, e := range want {
		size += runtime.EventSize(e)
	}
	if res, err := rs.Prune(ctx, runtime.PruneRequest{}); err != nil || res.Bytes != size {
		t.Errorf("Prune = %+v, %v; want %d bytes", res, err, size)
	}

	evs, err := rs.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r4", Events: []runtime.Event{{Type: "a"}, {Type: "b"}}})
	if err != nil || len(evs) != 2 || evs[0].ID != 401 || evs[1].ID != 402 || evs[0].Seq != 1 {
		t.Fatalf("Append after migration = %+v, %v; want ids 401, 402", evs, err)
	}
}

// A file at every older schema version opens, migrates, and records
// runs with their events.
func TestRunEventsMigrateFromEveryVersion(t *testing.T) {
	ctx := t.Context()
	versions := sqlite.SchemaVersions()
	for _, v := range versions[:len(versions)-1] {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "armature.db")
			if err := sqlite.MigrateFileTo(ctx, path, int(v)); err != nil {
				t.Fatal(err)
			}
			s, _ := openStore(t, sqlite.Config{Path: path})
			rs := s.Runs()
			if err := rs.StartRun(ctx, runtime.Run{ID: "r", SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			evs, err := rs.Append(ctx, runtime.AppendRequest{RunID: "r", Events: []runtime.Event{{Type: "a"}, {Type: "b"}}})
			if err != nil || len(evs) != 2 || evs[0].ID != 1 || evs[1].ID != 2 {
				t.Fatalf("Append = %+v, %v", evs, err)
			}
			sameEventList(t, "run", allEvents(t, rs, runtime.EventsRequest{RunID: "r"}, 1), evs)
		})
	}
}

// Event ids keep increasing after the newest runs, and every event
// chunk, were deleted: by a prune, and again across a reopen.
func TestRunEventIDsNeverReused(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	db := rawDB(t, path)
	var last int64
	write := func(rs *sqlite.RunStore, id string) {
		t.Helper()
		if err := rs.StartRun(ctx, runtime.Run{ID: id, SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
		evs, err := rs.Append(ctx, runtime.AppendRequest{RunID: id, Events: []runtime.Event{{Type: "a"}, {Type: "b"}},
			Finish: &runtime.FinishRequest{Status: runtime.StatusCompleted}})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := rs.WriteTurns(ctx, []runtime.TurnRecord{{Start: &runtime.Run{ID: id + "+", SessionID: "s"},
			Append: runtime.AppendRequest{RunID: id + "+", Events: []runtime.Event{{Type: "c"}},
				Finish: &runtime.FinishRequest{Status: runtime.StatusCompleted}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range append(evs, batch...) {
			if e.ID <= last {
				t.Fatalf("run %s: event id %d after %d", id, e.ID, last)
			}
			last = e.ID
		}
	}
	prune := func(rs *sqlite.RunStore) {
		t.Helper()
		res, err := rs.Prune(ctx, runtime.PruneRequest{EndedBefore: time.Now().Add(time.Hour)})
		if err != nil || res.Runs == 0 {
			t.Fatalf("Prune = %+v, %v", res, err)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM run_event_chunks`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("event chunks after deleting every run: %d, %v", n, err)
		}
		if evs, err := rs.Events(ctx, runtime.EventsRequest{SessionID: "s"}); err != nil || len(evs) != 0 {
			t.Fatalf("events after deleting every run: %+v, %v", evs, err)
		}
	}
	s, _ := openStore(t, sqlite.Config{Path: path})
	write(s.Runs(), "a")
	write(s.Runs(), "b")
	prune(s.Runs())
	write(s.Runs(), "c")
	prune(s.Runs())
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ = openStore(t, sqlite.Config{Path: path})
	write(s.Runs(), "d")
}

// Pages of every limit, from every event id, read the events of a run
// and of a session as one read does, whatever the chunks (Appends of
// one and of many events, a batch holding two records of one run and a
// run started in it) and wherever a page ends within one.
func TestRunEventsPaging(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, sqlite.Config{})
	rs := s.Runs()
	evs := func(typ string, n int) []runtime.Event {
		out := make([]runtime.Event, n)
		for i := range out {
			out[i] = runtime.Event{Type: fmt.Sprintf("%s.%d", typ, i), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		}
		out[0].Data = nil
		return out
	}
	for _, id := range []string{"a", "b"} {
		if err := rs.StartRun(ctx, runtime.Run{Tenant: "t", ID: id, SessionID: "s", AgentID: "ag-" + id, ParentID: "p-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	app := func(id string, n int) {
		t.Helper()
		if _, err := rs.Append(ctx, runtime.AppendRequest{Tenant: "t", RunID: id, Events: evs(id, n)}); err != nil {
			t.Fatal(err)
		}
	}
	app("a", 1)
	app("b", 3)
	app("a", 4)
	if _, err := rs.WriteTurns(ctx, []runtime.TurnRecord{
		{Append: runtime.AppendRequest{Tenant: "t", RunID: "a", Events: evs("a", 2)}},
		{Append: runtime.AppendRequest{Tenant: "t", RunID: "b", Events: evs("b", 1)}},
		{Append: runtime.AppendRequest{Tenant: "t", RunID: "a", Events: evs("a", 3)}},
		{Start: &runtime.Run{Tenant: "t", ID: "c", SessionID: "s"},
			Append: runtime.AppendRequest{Tenant: "t", RunID: "c", Events: evs("c", 2),
				Finish: &runtime.FinishRequest{Status: runtime.StatusCompleted}}},
	}); err != nil {
		t.Fatal(err)
	}
	app("a", 5)
	app("b", 1)

	all, err := rs.Events(ctx, runtime.EventsRequest{Tenant: "t", SessionID: "s", Limit: runtime.MaxEventsLimit})
	if err != nil || len(all) != 22 {
		t.Fatalf("session events = %d, %v; want 22", len(all), err)
	}
	checkSessionEvents(t, all)
	for i, e := range all {
		if e.Tenant != "t" || e.SessionID != "s" ||
			(e.RunID != "c" && (e.AgentID != "ag-"+e.RunID || e.ParentRequestID != "p-"+e.RunID)) {
			t.Fatalf("session event %d = %+v: identity", i, e)
		}
	}
	byRun := func(id string) []runtime.Event {
		var out []runtime.Event
		for _, e := range all {
			if e.RunID == id {
				out = append(out, e)
			}
		}
		return out
	}
	after := func(evs []runtime.Event, id int64) []runtime.Event {
		return slices.DeleteFunc(slices.Clone(evs), func(e runtime.Event) bool { return e.ID <= id })
	}
	reqs := []runtime.EventsRequest{{Tenant: "t", SessionID: "s"}, {Tenant: "t", RunID: "a"}, {Tenant: "t", RunID: "b"},
		{Tenant: "t", RunID: "c"}}
	for _, req := range reqs {
		want := all
		if req.RunID != "" {
			want = byRun(req.RunID)
		}
		for limit := 1; limit <= len(want)+1; limit++ {
			sameEventList(t, fmt.Sprintf("%+v in pages of %d", req, limit), allEvents(t, rs, req, limit), want)
		}
		for id := int64(0); id <= all[len(all)-1].ID+1; id++ {
			r := req
			r.AfterID = id
			for _, limit := range []int{1, 2, 3, runtime.MaxEventsLimit} {
				r.Limit = limit
				got, err := rs.Events(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				w := after(want, id)
				sameEventList(t, fmt.Sprintf("%+v", r), got, w[:min(limit, len(w))])
			}
		}
	}
}

// Writers on two Stores sharing one file (as two processes would),
// appending and group-committing: every event gets its own id, and a
// write that returned before another began has the smaller ids (ids
// follow commit order).
func TestRunEventIDsCommitOrderAcrossStores(t *testing.T) {
	ctx := t.Context()
	stores := sharedRunStores(t, 2)
	type write struct {
		start, end time.Time
		ids        []int64
	}
	const writers, writes = 4, 12
	var (
		mu  sync.Mutex
		log []write
		wg  sync.WaitGroup
	)
	errs := make([]error, writers)
	for w := range writers {
		rs := stores[w%2]
		wg.Go(func() {
			for i := range writes {
				id := fmt.Sprintf("w%d-%d", w, i)
				start := time.Now()
				var evs []runtime.Event
				err := rs.StartRun(ctx, runtime.Run{ID: id, SessionID: "s"})
				if err == nil && i%2 == 0 {
					evs, err = rs.Append(ctx, runtime.AppendRequest{RunID: id,
						Events: []runtime.Event{{Type: "a"}, {Type: "b"}, {Type: "c"}}[:1+i%3]})
				} else if err == nil {
					evs, err = rs.WriteTurns(ctx, []runtime.TurnRecord{
						{Append: runtime.AppendRequest{RunID: id, Events: []runtime.Event{{Type: "x"}, {Type: "y"}}}},
						{Start: &runtime.Run{ID: id + "+", SessionID: "s"},
							Append: runtime.AppendRequest{RunID: id + "+", Events: []runtime.Event{{Type: "z"}}}},
					})
				}
				end := time.Now()
				if err != nil {
					errs[w] = err
					return
				}
				wr := write{start: start, end: end}
				for _, e := range evs {
					wr.ids = append(wr.ids, e.ID)
				}
				mu.Lock()
				log = append(log, wr)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, x := range log {
		for i, id := range x.ids {
			if seen[id] || (i > 0 && id <= x.ids[i-1]) {
				t.Fatalf("ids of one write %v: repeated or not increasing", x.ids)
			}
			seen[id] = true
		}
		for _, y := range log {
			if x.end.Before(y.start) && x.ids[len(x.ids)-1] >= y.ids[0] {
				t.Fatalf("a write with ids %v returned before one with ids %v began", x.ids, y.ids)
			}
		}
	}
	got := allEvents(t, stores[1], runtime.EventsRequest{SessionID: "s"}, 5)
	if len(got) != len(seen) {
		t.Fatalf("session events = %d, want %d", len(got), len(seen))
	}
	checkSessionEvents(t, got)
	for _, e := range got {
		if !seen[e.ID] {
			t.Fatalf("session event %+v: no write returned its id", e)
		}
	}
}
