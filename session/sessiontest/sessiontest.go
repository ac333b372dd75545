// Package sessiontest is the conformance suite every session.Store
// backend runs: the SessionStore protocol of sessions §5, optimistic
// concurrency (§8.2), the conditional load, the tail load
// (session.ListTail), the optional Appender, the optional Marker and the
// optional Pager.
//
//	func TestSQLiteStore(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T) session.Store { return openTestStore(t) })
//	}
package sessiontest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// Run runs the suite. newStore returns a fresh, empty store for each
// subtest; the suite closes nothing (use t.Cleanup in newStore).
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s session.Store)
	}{
		{"LoadMissing", testLoadMissing},
		{"SaveLoadRoundTrip", testRoundTrip},
		{"VersionsAndTimestamps", testVersions},
		{"NoAliasing", testNoAliasing},
		{"ConditionalSave", testConditionalSave},
		{"ConditionalLoad", testConditionalLoad},
		{"Delete", testDelete},
		{"List", testList},
		{"ListPagination", testPagination},
		{"InvalidInput", testInvalid},
		{"ConcurrentConditionalSaves", testConcurrentSaves},
		{"CanceledContext", testCanceled},
		{"Append", testAppend},
		{"AppendConflicts", testAppendConflicts},
		{"Marks", testMarks},
		{"MarkKeys", testMarkKeys},
		{"Tail", testTail},
		{"TailRandomized", testTailRandomized},
		{"Pages", testPages},
		{"PagesRandomized", testPagesRandomized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

func state(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

func save(t *testing.T, s session.Store, id, version string, st map[string]json.RawMessage) session.WriteResult {
	t.Helper()
	res, err := s.Save(t.Context(), session.SaveRequest{SessionID: id, SchemaVersion: version, State: st})
	if err != nil {
		t.Fatalf("Save(%q): %v", id, err)
	}
	return res
}

func load(t *testing.T, s session.Store, id string) *session.Record {
	t.Helper()
	r, err := s.Load(t.Context(), session.LoadRequest{SessionID: id})
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	return r
}

// equalJSON compares two JSON documents semantically.
func equalJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func checkState(t *testing.T, got, want map[string]json.RawMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("state has %d fields %v, want %d %v", len(got), keys(got), len(want), keys(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !equalJSON(g, w) {
			t.Errorf("field %q = %s, want %s", k, got[k], w)
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func testLoadMissing(t *testing.T, s session.Store) {
	_, err := s.Load(t.Context(), session.LoadRequest{SessionID: "nope"})
	if !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Load of a missing session = %v, want ErrNotFound", err)
	}
}

func testRoundTrip(t *testing.T, s session.Store) {
	st := state("messages", `[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`,
		"count", `2`, "meta", `{"a":"b","n":null}`, "name", `"ünïcødé ✓"`)
	save(t, s, "s1", "v2", st)
	r := load(t, s, "s1")
	if r.SessionID != "s1" || r.SchemaVersion != "v2" {
		t.Errorf("record id/version = %q/%q", r.SessionID, r.SchemaVersion)
	}
	checkState(t, r.State, st)
	// Overwrite replaces the whole state.
	save(t, s, "s1", "v3", state("count", `3`))
	r = load(t, s, "s1")
	checkState(t, r.State, state("count", `3`))
	if r.SchemaVersion != "v3" {
		t.Errorf("schema version = %q after overwrite", r.SchemaVersion)
	}
}

func testVersions(t *testing.T, s session.Store) {
	w1 := save(t, s, "s", "v1", state("n", `1`))
	r1 := load(t, s, "s")
	w2 := save(t, s, "s", "v1", state("n", `2`))
	r2 := load(t, s, "s")
	if w1.Version != 1 || r1.Version != 1 || w2.Version != 2 || r2.Version != 2 {
		t.Errorf("versions: write %d/%d, load %d/%d; want 1,2", w1.Version, w2.Version, r1.Version, r2.Version)
	}
	if r2.CreatedAt.IsZero() || !r2.CreatedAt.Equal(r1.CreatedAt) {
		t.Errorf("created_at changed on overwrite: %v → %v", r1.CreatedAt, r2.CreatedAt)
	}
	if r2.UpdatedAt.Before(r1.UpdatedAt) {
		t.Errorf("updated_at went backwards: %v → %v", r1.UpdatedAt, r2.UpdatedAt)
	}
}

func testNoAliasing(t *testing.T, s session.Store) {
	in := state("l", `[1,2]`)
	save(t, s, "s", "v1", in)
	in["l"][1] = '9'
	in["x"] = json.RawMessage(`1`)
	r := load(t, s, "s")
	checkState(t, r.State, state("l", `[1,2]`))
	r.State["l"][1] = '7'
	delete(r.State, "l")
	checkState(t, load(t, s, "s").State, state("l", `[1,2]`))
}

func ptr(v int64) *int64 { return &v }

func testConditionalSave(t *testing.T, s session.Store) {
	ctx := t.Context()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "c", State: state("n", `1`), ExpectedVersion: ptr(0)}); err != nil {
		t.Fatalf("create with expected version 0: %v", err)
	}
	_, err := s.Save(ctx, session.SaveRequest{SessionID: "c", State: state("n", `2`), ExpectedVersion: ptr(0)})
	if !errors.Is(err, session.ErrWriteConflict) || errcat.Of(err) != errcat.SessionWriteConflict ||
		!errors.Is(err, errcat.SessionWriteConflict) {
		t.Fatalf("stale create = %v, want session_write_conflict", err)
	}
	if w, err := s.Save(ctx, session.SaveRequest{SessionID: "c", State: state("n", `2`), ExpectedVersion: ptr(1)}); err != nil || w.Version != 2 {
		t.Fatalf("save at version 1 = %v, %v", w, err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "c", State: state("n", `3`), ExpectedVersion: ptr(1)}); !errors.Is(err, session.ErrWriteConflict) {
		t.Fatalf("stale save = %v, want ErrWriteConflict", err)
	}
	checkState(t, load(t, s, "c").State, state("n", `2`))
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "new", State: state("n", `1`), ExpectedVersion: ptr(5)}); !errors.Is(err, session.ErrWriteConflict) {
		t.Fatalf("conditional save of a missing record = %v, want ErrWriteConflict", err)
	}
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "new"}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Load after a failed conditional save of a missing record = %v, want ErrNotFound (nothing created)", err)
	}
}

func testConditionalLoad(t *testing.T, s session.Store) {
	save(t, s, "s", "v1", state("n", `1`))
	_, err := s.Load(t.Context(), session.LoadRequest{SessionID: "s", IfVersionNot: 1})
	if !errors.Is(err, session.ErrNotModified) {
		t.Fatalf("Load IfVersionNot=current = %v, want ErrNotModified", err)
	}
	save(t, s, "s", "v1", state("n", `2`))
	r, err := s.Load(t.Context(), session.LoadRequest{SessionID: "s", IfVersionNot: 1})
	if err != nil || r.Version != 2 {
		t.Fatalf("Load IfVersionNot=stale = %v, %v", r, err)
	}
	if _, err := s.Load(t.Context(), session.LoadRequest{SessionID: "missing", IfVersionNot: 1}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("conditional load of a missing record = %v, want ErrNotFound", err)
	}

	// A copy names its write by version and update time: a session
	// deleted and written again to the same version is another
	// conversation, which the version alone cannot tell.
	ctx := t.Context()
	w, err := s.Save(ctx, session.SaveRequest{SessionID: "r", SchemaVersion: "v1", State: state("n", `1`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "r", IfVersionNot: w.Version, IfUpdatedAt: w.UpdatedAt}); !errors.Is(err, session.ErrNotModified) {
		t.Fatalf("Load naming the current write's version and time = %v, want ErrNotModified", err)
	}
	if err := s.Delete(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	var again session.WriteResult
	for range 1000 { // a store's clock may repeat a time within its resolution
		if again, err = s.Save(ctx, session.SaveRequest{SessionID: "r", SchemaVersion: "v1", State: state("n", `2`)}); err != nil {
			t.Fatal(err)
		}
		if !again.UpdatedAt.Equal(w.UpdatedAt) {
			break
		}
		if err := s.Delete(ctx, "r"); err != nil {
			t.Fatal(err)
		}
	}
	if again.Version != w.Version {
		t.Fatalf("a session written again after its delete is at version %d, want %d (counted anew)", again.Version, w.Version)
	}
	r2, err := s.Load(ctx, session.LoadRequest{SessionID: "r", IfVersionNot: w.Version, IfUpdatedAt: w.UpdatedAt})
	if err != nil || string(r2.State["n"]) != `2` {
		t.Fatalf("Load naming the deleted conversation's version and time = %v, %v; want the new record", r2, err)
	}
}

func testDelete(t *testing.T, s session.Store) {
	save(t, s, "d", "v1", state("n", `1`))
	if err := s.Delete(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(t.Context(), session.LoadRequest{SessionID: "d"}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Load after Delete = %v", err)
	}
	if err := s.Delete(t.Context(), "d"); err != nil {
		t.Fatalf("deleting a missing session must succeed: %v", err)
	}
	if w := save(t, s, "d", "v1", state("n", `1`)); w.Version != 1 {
		t.Errorf("a recreated session starts at version 1, got %d", w.Version)
	}
}

func ids(sums []session.Summary) []string {
	var out []string
	for _, s := range sums {
		out = append(out, s.SessionID)
	}
	return out
}

func testList(t *testing.T, s session.Store) {
	ctx := t.Context()
	save(t, s, "t1/b", "v1", state("n", `1`))
	save(t, s, "t1/a", "v2", state("n", `1`))
	save(t, s, "t2/a", "v1", state("n", `1`))
	all, err := s.List(ctx, session.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(all.Sessions)); got != "[t1/a t1/b t2/a]" || all.NextPageToken != "" {
		t.Errorf("List() = %s (next %q)", got, all.NextPageToken)
	}
	for _, sum := range all.Sessions {
		if sum.Version != 1 || sum.UpdatedAt.IsZero() || sum.CreatedAt.IsZero() {
			t.Errorf("summary %+v lacks metadata", sum)
		}
	}
	for _, tc := range []struct {
		req  session.ListRequest
		want string
	}{
		{session.ListRequest{IDPrefix: "t1/"}, "[t1/a t1/b]"},
		{session.ListRequest{SchemaVersion: "v1"}, "[t1/b t2/a]"},
		{session.ListRequest{IDPrefix: "t1/", SchemaVersion: "v2"}, "[t1/a]"},
		{session.ListRequest{IDPrefix: "zzz"}, "[]"},
		{session.ListRequest{UpdatedAfter: time.Now().Add(time.Hour)}, "[]"},
		{session.ListRequest{CreatedAfter: time.Now().Add(-time.Hour)}, "[t1/a t1/b t2/a]"},
		// Times beyond int64 nanoseconds (years 1677 to 2262) filter as
		// the times they are, not as wrapped ones.
		{session.ListRequest{UpdatedAfter: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, "[]"},
		{session.ListRequest{CreatedAfter: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, "[]"},
		{session.ListRequest{CreatedAfter: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}, "[t1/a t1/b t2/a]"},
	} {
		got, err := s.List(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids(got.Sessions)) != tc.want {
			t.Errorf("List(%+v) = %v, want %s", tc.req, ids(got.Sessions), tc.want)
		}
	}
}

func testPagination(t *testing.T, s session.Store) {
	ctx := t.Context()
	const n = 25
	for i := range n {
		save(t, s, fmt.Sprintf("p%03d", i), "v1", state("n", `1`))
	}
	var got []string
	tok := ""
	pages := 0
	for {
		resp, err := s.List(ctx, session.ListRequest{PageSize: 10, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Sessions) > 10 {
			t.Fatalf("page of %d > page size", len(resp.Sessions))
		}
		got = append(got, ids(resp.Sessions)...)
		pages++
		if resp.NextPageToken == "" {
			break
		}
		if pages > n {
			t.Fatal("pagination does not terminate")
		}
		tok = resp.NextPageToken
	}
	if len(got) != n || got[0] != "p000" || got[n-1] != fmt.Sprintf("p%03d", n-1) || pages != 3 {
		t.Errorf("paged listing = %d ids in %d pages: %v", len(got), pages, got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("listing not in id order at %d: %v", i, got)
		}
	}
	if _, err := s.List(ctx, session.ListRequest{PageToken: "!!not a token!!"}); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("a malformed page token = %v, want ErrInvalidRequest", err)
	}
}

func testInvalid(t *testing.T, s session.Store) {
	ctx := t.Context()
	long := make([]byte, session.MaxIDLength+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, id := range []string{"", string(long), "a\x00b", "bad\xffutf8"} {
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: id, State: state("n", `1`)}); !errors.Is(err, session.ErrInvalidRequest) {
			t.Errorf("Save(id %q) = %v, want ErrInvalidRequest", id, err)
		}
		if _, err := s.Load(ctx, session.LoadRequest{SessionID: id}); !errors.Is(err, session.ErrInvalidRequest) {
			t.Errorf("Load(id %q) = %v, want ErrInvalidRequest", id, err)
		}
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "j", State: state("n", `{bad json`)}); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("Save(invalid JSON) = %v, want ErrInvalidRequest", err)
	}
	// Field names and schema versions with NUL bytes or invalid UTF-8
	// are refused alike by every store (PostgreSQL cannot keep them).
	for _, bad := range []string{"a\x00b", "bad\xffutf8"} {
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: "j", State: state(bad, `1`)}); !errors.Is(err, session.ErrInvalidRequest) {
			t.Errorf("Save(field name %q) = %v, want ErrInvalidRequest", bad, err)
		}
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: "j", SchemaVersion: bad, State: state("n", `1`)}); !errors.Is(err, session.ErrInvalidRequest) {
			t.Errorf("Save(schema version %q) = %v, want ErrInvalidRequest", bad, err)
		}
	}
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "j"}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("a rejected save must store nothing: %v", err)
	}
}

func testConcurrentSaves(t *testing.T, s session.Store) {
	ctx := t.Context()
	save(t, s, "race", "v1", state("n", `0`))
	const workers, rounds = 8, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				r, err := s.Load(ctx, session.LoadRequest{SessionID: "race"})
				if err != nil {
					t.Error(err)
					return
				}
				_, err = s.Save(ctx, session.SaveRequest{SessionID: "race", SchemaVersion: "v1",
					State: state("n", fmt.Sprint(w)), ExpectedVersion: ptr(r.Version)})
				switch {
				case err == nil:
					mu.Lock()
					wins++
					mu.Unlock()
				case !errors.Is(err, session.ErrWriteConflict):
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := load(t, s, "race").Version; v != int64(wins)+1 {
		t.Errorf("final version %d after %d successful conditional saves: a write was lost", v, wins)
	}
}

func testCanceled(t *testing.T, s session.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "x", State: state("n", `1`)}); err == nil {
		t.Error("Save with a canceled context succeeded")
	}
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "x"}); err == nil || errors.Is(err, session.ErrNotFound) && ctx.Err() == nil {
		t.Error("Load with a canceled context did not fail")
	}
}

func appender(t *testing.T, s session.Store) session.Appender {
	a, ok := s.(session.Appender)
	if !ok {
		t.Skip("store does not implement session.Appender")
	}
	return a
}

func testAppend(t *testing.T, s session.Store) {
	a := appender(t, s)
	ctx := t.Context()
	save(t, s, "a", "v1", state("messages", `[{"role":"user","content":"1"}]`, "turns", `1`, "other", `"x"`))
	w, err := a.Append(ctx, session.AppendRequest{
		SessionID: "a", SchemaVersion: "v1", ExpectedVersion: 1,
		Set:    state("turns", `2`),
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`{"role":"assistant","content":"2"}`)}},
	})
	if err != nil || w.Version != 2 {
		t.Fatalf("Append = %v, %v", w, err)
	}
	for i := 3; i <= 5; i++ {
		if _, err := a.Append(ctx, session.AppendRequest{
			SessionID: "a", SchemaVersion: "v1", ExpectedVersion: int64(i - 1),
			Append: map[string][]json.RawMessage{
				"messages": {json.RawMessage(fmt.Sprintf(`{"role":"user","content":"%d"}`, i))},
				"newlist":  {json.RawMessage(fmt.Sprint(i))},
			},
		}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	r := load(t, s, "a")
	checkState(t, r.State, state(
		"messages", `[{"role":"user","content":"1"},{"role":"assistant","content":"2"},{"role":"user","content":"3"},{"role":"user","content":"4"},{"role":"user","content":"5"}]`,
		"turns", `2`, "other", `"x"`, "newlist", `[3,4,5]`))
	if r.Version != 5 {
		t.Errorf("version = %d, want 5", r.Version)
	}
	// A full save after appends replaces everything.
	save(t, s, "a", "v2", state("messages", `[]`))
	checkState(t, load(t, s, "a").State, state("messages", `[]`))
	if _, err := a.Append(ctx, session.AppendRequest{SessionID: "a", ExpectedVersion: 6,
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	checkState(t, load(t, s, "a").State, state("messages", `[1]`))
}

func testAppendConflicts(t *testing.T, s session.Store) {
	a := appender(t, s)
	ctx := t.Context()
	add := func(id string, expected int64, field, item string) error {
		_, err := a.Append(ctx, session.AppendRequest{SessionID: id, ExpectedVersion: expected,
			Append: map[string][]json.RawMessage{field: {json.RawMessage(item)}}})
		return err
	}
	if err := add("missing", 1, "l", `1`); !errors.Is(err, session.ErrWriteConflict) {
		t.Errorf("append to a missing session = %v, want ErrWriteConflict", err)
	}
	save(t, s, "c", "v1", state("l", `[]`, "scalar", `"s"`))
	if err := add("c", 7, "l", `1`); !errors.Is(err, session.ErrWriteConflict) {
		t.Errorf("append at a stale version = %v, want ErrWriteConflict", err)
	}
	if err := add("c", 1, "scalar", `1`); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("append to a non-list field = %v, want ErrInvalidRequest", err)
	}
	if err := add("c", 1, "l", `{nope`); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("append of invalid JSON = %v, want ErrInvalidRequest", err)
	}
	if err := add("c", 0, "l", `1`); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("append without an expected version = %v, want ErrInvalidRequest", err)
	}
	r := load(t, s, "c")
	checkState(t, r.State, state("l", `[]`, "scalar", `"s"`))
	if r.Version != 1 {
		t.Errorf("rejected appends changed the version to %d", r.Version)
	}
}

// testMarks checks marks recorded with writes, for a store that is a
// session.Marker: they are read back, replaced, scoped to their session,
// not written by a failed write, and deleted with the session.
func testMarks(t *testing.T, s session.Store) {
	m, ok := s.(session.Marker)
	if !ok {
		t.Skip("the store records no marks")
	}
	ctx := t.Context()
	mark := func(k, v string) session.Mark { return session.Mark{Key: k, Value: json.RawMessage(v)} }
	load := func(id, key string) (string, error) {
		t.Helper()
		v, err := m.LoadMark(ctx, id, key)
		return string(v), err
	}
	res, err := s.Save(ctx, session.SaveRequest{SessionID: "m", State: state("messages", `[1]`), Marks: []session.Mark{mark("a", `{"n":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := load("m", "a"); err != nil || v != `{"n":1}` {
		t.Fatalf("LoadMark(a) = %s, %v", v, err)
	}
	if _, err := load("m", "b"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("LoadMark(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := load("other", "a"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("another session's mark: error = %v, want ErrNotFound", err)
	}
	if ap, ok := s.(session.Appender); ok {
		res, err = ap.Append(ctx, session.AppendRequest{SessionID: "m", ExpectedVersion: res.Version,
			Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`2`)}}, Marks: []session.Mark{mark("b", `2`), mark("a", `"replaced"`)}})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := load("m", "a"); err != nil || v != `"replaced"` {
			t.Fatalf("LoadMark(a) after replace = %s, %v", v, err)
		}
		// A failed (conflicting) write records nothing.
		_, err = ap.Append(ctx, session.AppendRequest{SessionID: "m", ExpectedVersion: res.Version + 7,
			Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`3`)}}, Marks: []session.Mark{mark("c", `3`)}})
		if !errors.Is(err, session.ErrWriteConflict) {
			t.Fatalf("conflicting append error = %v", err)
		}
		if _, err := load("m", "c"); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("a failed write recorded its mark: %v", err)
		}
		// Invalid marks are refused and change nothing.
		for _, bad := range [][]session.Mark{{mark("", `1`)}, {mark("k", `{`)}, {mark("k", `1`), mark("k", `2`)}} {
			if _, err := ap.Append(ctx, session.AppendRequest{SessionID: "m", ExpectedVersion: res.Version, Marks: bad}); !errors.Is(err, session.ErrInvalidRequest) {
				t.Fatalf("Append(marks %v) error = %v, want ErrInvalidRequest", bad, err)
			}
		}
	}
	// Replacing the record keeps its marks.
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "m", State: state("messages", `[9]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := load("m", "a"); err != nil {
		t.Fatalf("a Save dropped the marks: %v", err)
	}
	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := load("m", "a"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a deleted session's mark: error = %v, want ErrNotFound", err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "m", State: state("messages", `[]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := load("m", "a"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a recreated session sees its predecessor's mark: %v", err)
	}
	if _, err := m.LoadMark(ctx, "m", string(make([]byte, session.MaxMarkKeyLength+1))); !errors.Is(err, session.ErrInvalidRequest) {
		t.Fatalf("LoadMark(oversized key) error = %v", err)
	}
}

// testMarkKeys checks session.MarkLister, for stores that implement it:
// the keys of a session's live marks beginning with a prefix, the most
// recently written first (those written together in byte order),
// bounded (the oldest left out), scoped to their session and gone with
// it.
func testMarkKeys(t *testing.T, s session.Store) {
	m, ok := s.(session.MarkLister)
	if !ok {
		t.Skip("the store lists no marks")
	}
	ctx := t.Context()
	mark := func(k string) session.Mark { return session.Mark{Key: k, Value: json.RawMessage(`1`)} }
	list := func(id, prefix string, limit int) []string {
		t.Helper()
		keys, err := m.MarkKeys(ctx, id, prefix, limit)
		if err != nil {
			t.Fatalf("MarkKeys(%q, %q, %d): %v", id, prefix, limit, err)
		}
		return keys
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") || len(got) != len(want) {
			t.Fatalf("MarkKeys = %q, want %q", got, want)
		}
	}
	if got := list("nosuch", "k:", 10); len(got) != 0 {
		t.Fatalf("MarkKeys of a missing session = %q, want none", got)
	}
	res, err := s.Save(ctx, session.SaveRequest{SessionID: "mk", State: state("messages", `[1]`),
		Marks: []session.Mark{mark("k:run:b"), mark("m:1")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "other", State: state("messages", `[1]`), Marks: []session.Mark{mark("k:run:x")}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // the next marks are written later
	more := []session.Mark{mark("k:run:a"), mark("k:runs"), mark("k;"), mark("k:ü"), mark("j:run:z")}
	if ap, ok := s.(session.Appender); ok {
		if _, err := ap.Append(ctx, session.AppendRequest{SessionID: "mk", ExpectedVersion: res.Version,
			Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`2`)}}, Marks: more}); err != nil {
			t.Fatal(err)
		}
	} else if _, err := s.Save(ctx, session.SaveRequest{SessionID: "mk", State: state("messages", `[1,2]`), Marks: more}); err != nil {
		t.Fatal(err)
	}
	check(list("mk", "k:run:", 10), "k:run:a", "k:run:b")
	check(list("mk", "k:", 10), "k:run:a", "k:runs", "k:ü", "k:run:b")
	check(list("mk", "k:", 2), "k:run:a", "k:runs")
	check(list("mk", "k:run:", 1), "k:run:a")
	check(list("mk", "", 100), "j:run:z", "k:run:a", "k:runs", "k:ü", "k;", "k:run:b", "m:1")
	check(list("mk", "k:ü", 10), "k:ü")
	check(list("mk", "x", 10))
	check(list("other", "k:", 10), "k:run:x")
	for _, bad := range []struct {
		prefix string
		limit  int
	}{{"k:", 0}, {"bad\xff", 1}, {strings.Repeat("k", session.MaxMarkKeyLength+1), 1}} {
		if _, err := m.MarkKeys(ctx, "mk", bad.prefix, bad.limit); !errors.Is(err, session.ErrInvalidRequest) {
			t.Fatalf("MarkKeys(%q, %d) error = %v, want ErrInvalidRequest", bad.prefix, bad.limit, err)
		}
	}
	if _, err := m.MarkKeys(ctx, "", "k:", 1); !errors.Is(err, session.ErrInvalidRequest) {
		t.Fatalf("MarkKeys(empty session id) error = %v, want ErrInvalidRequest", err)
	}
	if err := s.Delete(ctx, "mk"); err != nil {
		t.Fatal(err)
	}
	check(list("mk", "k:", 10))
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "mk", State: state("messages", `[]`), Marks: []session.Mark{mark("k:run:c")}}); err != nil {
		t.Fatal(err)
	}
	check(list("mk", "k:", 10), "k:run:c")
}

// splitJSON decodes a JSON array; ok is false when v is not one.
func splitJSON(v json.RawMessage) (items []json.RawMessage, ok bool) {
	if err := json.Unmarshal(v, &items); err != nil || strings.TrimSpace(string(v)) == "null" {
		return nil, false
	}
	return items, true
}

// checkTail checks a tail load's answer against the whole state: a
// tailed list is a suffix of the whole one, with Skipped + its length =
// the whole length and at least min(Max, whole) items; every other field
// is whole; Skipped names only cut fields, with positive counts.
func checkTail(t *testing.T, rec *session.Record, whole map[string]json.RawMessage, tails []session.ListTail) {
	t.Helper()
	if len(rec.State) != len(whole) {
		t.Fatalf("tail load has %d fields %v, want %d %v", len(rec.State), keys(rec.State), len(whole), keys(whole))
	}
	max := map[string]int{}
	for _, tl := range tails {
		max[tl.Field] = tl.Max
	}
	for f, n := range rec.Skipped {
		if n <= 0 {
			t.Errorf("Skipped[%q] = %d: a field with nothing left out must be absent", f, n)
		}
		if _, tailed := max[f]; !tailed {
			t.Errorf("Skipped[%q] = %d for a field without a tail hint", f, n)
		}
	}
	if rec.Partial() != (len(rec.Skipped) > 0) {
		t.Errorf("Partial() = %v with Skipped %v", rec.Partial(), rec.Skipped)
	}
	for f, w := range whole {
		got, ok := rec.State[f]
		if !ok {
			t.Errorf("field %q missing from a tail load", f)
			continue
		}
		all, isList := splitJSON(w)
		m, tailed := max[f]
		if !tailed || !isList {
			if !equalJSON(got, w) {
				t.Errorf("field %q = %s, want it whole: %s", f, got, w)
			}
			if rec.Skipped[f] != 0 {
				t.Errorf("Skipped[%q] = %d for a field returned whole", f, rec.Skipped[f])
			}
			continue
		}
		part, ok := splitJSON(got)
		if !ok {
			t.Errorf("tailed field %q = %s, not a JSON array", f, got)
			continue
		}
		skip := rec.Skipped[f]
		if skip+len(part) != len(all) {
			t.Errorf("field %q: Skipped %d + %d items returned != %d stored", f, skip, len(part), len(all))
			continue
		}
		if len(part) < min(m, len(all)) {
			t.Errorf("field %q: %d items returned, want at least %d (max %d of %d)", f, len(part), min(m, len(all)), m, len(all))
		}
		for i, it := range part {
			if !equalJSON(it, all[skip+i]) {
				t.Errorf("field %q: item %d (absolute %d) = %s, want %s", f, i, skip+i, it, all[skip+i])
				break
			}
		}
	}
}

func loadTail(t *testing.T, s session.Store, id string, tails ...session.ListTail) *session.Record {
	t.Helper()
	r, err := s.Load(t.Context(), session.LoadRequest{SessionID: id, Tail: tails})
	if err != nil {
		t.Fatalf("Load(%q, tail %v): %v", id, tails, err)
	}
	return r
}

func items(from, to int) []json.RawMessage {
	var out []json.RawMessage
	for i := from; i < to; i++ {
		out = append(out, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
	}
	return out
}

func joinJSON(items []json.RawMessage) json.RawMessage {
	var b strings.Builder
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return json.RawMessage(b.String())
}

// testTail checks the tail load: the suffix of a long list, a tail
// longer than the list, fields without a hint, non-list and missing
// fields, the conditional load, a tail that moves with appends, a list
// replaced by Set or Save, and invalid hints.
func testTail(t *testing.T, s session.Store) {
	a := appender(t, s)
	ctx := t.Context()
	whole := state("msgs", string(joinJSON(items(0, 5))), "other", `[1,2,3]`, "scalar", `"x"`)
	save(t, s, "t", "v1", whole)
	// A list stored by Save: any suffix answer is valid.
	checkTail(t, loadTail(t, s, "t", session.ListTail{Field: "msgs", Max: 2}), whole, []session.ListTail{{Field: "msgs", Max: 2}})
	version := int64(1)
	all := items(0, 5)
	for i := 5; i < 60; i += 11 {
		add := items(i, i+11)
		if _, err := a.Append(ctx, session.AppendRequest{SessionID: "t", ExpectedVersion: version,
			Append: map[string][]json.RawMessage{"msgs": add, "other": {json.RawMessage(fmt.Sprint(i))}}}); err != nil {
			t.Fatalf("append: %v", err)
		}
		version++
		all = append(all, add...)
		whole["msgs"] = joinJSON(all)
		var other []json.RawMessage
		other, _ = splitJSON(whole["other"])
		whole["other"] = joinJSON(append(other, json.RawMessage(fmt.Sprint(i))))
		for _, max := range []int{1, 7, len(all) - 1, len(all), len(all) + 5} {
			tails := []session.ListTail{{Field: "msgs", Max: max}}
			checkTail(t, loadTail(t, s, "t", tails...), whole, tails)
		}
	}
	tails := []session.ListTail{{Field: "msgs", Max: 10}}
	r := loadTail(t, s, "t", tails...)
	checkTail(t, r, whole, tails)
	if r.Version != version {
		t.Errorf("tail load version = %d, want %d", r.Version, version)
	}
	// Max at least the length: whole, nothing skipped.
	r = loadTail(t, s, "t", session.ListTail{Field: "msgs", Max: len(all)})
	if r.Skipped != nil || r.Partial() {
		t.Errorf("Skipped = %v for a tail as long as the list", r.Skipped)
	}
	// Several tails, a scalar and a missing field named.
	tails = []session.ListTail{{Field: "other", Max: 2}, {Field: "msgs", Max: 3}, {Field: "scalar", Max: 1}, {Field: "missing", Max: 4}}
	checkTail(t, loadTail(t, s, "t", tails...), whole, tails)
	// The conditional load still answers not modified.
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "t", IfVersionNot: version, Tail: tails}); !errors.Is(err, session.ErrNotModified) {
		t.Errorf("conditional tail load of the current version = %v, want ErrNotModified", err)
	}
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "nope", Tail: tails}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("tail load of a missing session = %v, want ErrNotFound", err)
	}
	// A Set replaces the list: its tail is of the new value.
	if _, err := a.Append(ctx, session.AppendRequest{SessionID: "t", ExpectedVersion: version,
		Set: state("msgs", `[7,8,9]`)}); err != nil {
		t.Fatal(err)
	}
	whole["msgs"] = json.RawMessage(`[7,8,9]`)
	tails = []session.ListTail{{Field: "msgs", Max: 1}}
	if r := loadTail(t, s, "t", tails...); r.Version != version+1 {
		t.Errorf("version after the set = %d, want %d", r.Version, version+1)
	}
	checkTail(t, loadTail(t, s, "t", tails...), whole, tails)
	// A whole save replaces everything.
	whole = state("msgs", `[]`, "scalar", `1`)
	save(t, s, "t", "v1", whole)
	checkTail(t, loadTail(t, s, "t", tails...), whole, tails)
	for _, bad := range [][]session.ListTail{
		{{Field: "msgs", Max: 0}},
		{{Field: "msgs", Max: -1}},
		{{Field: "", Max: 1}},
		{{Field: "msgs", Max: 1}, {Field: "msgs", Max: 2}},
	} {
		if _, err := s.Load(ctx, session.LoadRequest{SessionID: "t", Tail: bad}); !errors.Is(err, session.ErrInvalidRequest) {
			t.Errorf("Load with tail %v = %v, want ErrInvalidRequest", bad, err)
		}
	}
}

// testTailRandomized interleaves appends, sets and whole saves of two
// list fields with tail loads of random sizes, against a model.
func testTailRandomized(t *testing.T, s session.Store) {
	a := appender(t, s)
	ctx := t.Context()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	model := map[string][]json.RawMessage{"a": items(0, 3), "b": nil}
	wholeState := func() map[string]json.RawMessage {
		st := map[string]json.RawMessage{}
		for f, l := range model {
			st[f] = joinJSON(l)
		}
		return st
	}
	version := save(t, s, "r", "v1", wholeState()).Version
	next := 1000
	for step := range 120 {
		switch op := rng.IntN(10); {
		case op < 7: // append to one or both lists
			app := map[string][]json.RawMessage{}
			for _, f := range []string{"a", "b"} {
				if rng.IntN(2) == 0 {
					k := rng.IntN(6)
					app[f] = items(next, next+k)
					next += k
					model[f] = append(model[f], app[f]...)
				}
			}
			w, err := a.Append(ctx, session.AppendRequest{SessionID: "r", ExpectedVersion: version, Append: app})
			if err != nil {
				t.Fatalf("seed %d step %d: append: %v", seed, step, err)
			}
			version = w.Version
		case op < 8: // replace one list
			k := rng.IntN(4)
			model["b"] = items(next, next+k)
			next += k
			w, err := a.Append(ctx, session.AppendRequest{SessionID: "r", ExpectedVersion: version,
				Set: map[string]json.RawMessage{"b": joinJSON(model["b"])}})
			if err != nil {
				t.Fatalf("seed %d step %d: set: %v", seed, step, err)
			}
			version = w.Version
		default: // save the whole record
			if rng.IntN(3) == 0 {
				model["a"] = model["a"][:len(model["a"])/2]
			}
			version = save(t, s, "r", "v1", wholeState()).Version
		}
		var tails []session.ListTail
		for _, f := range []string{"a", "b"} {
			if rng.IntN(3) > 0 {
				tails = append(tails, session.ListTail{Field: f, Max: 1 + rng.IntN(len(model[f])+3)})
			}
		}
		r := loadTail(t, s, "r", tails...)
		if r.Version != version {
			t.Fatalf("seed %d step %d: version %d, want %d", seed, step, r.Version, version)
		}
		checkTail(t, r, wholeState(), tails)
		if t.Failed() {
			t.Fatalf("seed %d step %d: tails %v", seed, step, tails)
		}
	}
}
