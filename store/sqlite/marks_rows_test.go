package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// wantMarks checks which marks of session "s" a store returns.
func wantMarks(t *testing.T, s *sqlite.Store, step string, present map[string]string, absent ...string) {
	t.Helper()
	for k, v := range present {
		got, err := s.LoadMark(t.Context(), "s", k)
		if err != nil || string(got) != v {
			t.Errorf("%s: mark %q = %s, %v; want %s", step, k, got, err, v)
		}
	}
	for _, k := range absent {
		if got, err := s.LoadMark(t.Context(), "s", k); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s: mark %q = %s, %v; want ErrNotFound", step, k, got, err)
		}
	}
}

func mark(k, v string) session.Mark { return session.Mark{Key: k, Value: json.RawMessage(v)} }

func items(vs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(vs))
	for i, v := range vs {
		out[i] = json.RawMessage(v)
	}
	return out
}

// Marks ride on item rows, in session_marks rows when a write has no
// item, and survive every later write that replaces the rows carrying
// them, a reopen, and nothing else: Delete removes them.
func TestMarksSurviveEveryWrite(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	open := func() *sqlite.Store {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	defer func() { _ = s.Close(context.Background()) }()
	ver := int64(0)
	app := func(req session.AppendRequest) {
		t.Helper()
		req.SessionID, req.ExpectedVersion = "s", ver
		w, err := s.Append(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ver = w.Version
	}
	w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)},
		Marks: []session.Mark{mark("a", `"save"`)}})
	if err != nil {
		t.Fatal(err)
	}
	ver = w.Version
	all := map[string]string{"a": `"save"`}
	wantMarks(t, s, "after the first save", all, "b")

	app(session.AppendRequest{Append: map[string][]json.RawMessage{"messages": items(`1`, `2`)}, Marks: []session.Mark{mark("b", `"items"`)}})
	all["b"] = `"items"`
	app(session.AppendRequest{Set: map[string]json.RawMessage{"n": json.RawMessage(`1`)}, Marks: []session.Mark{mark("c", `"set only"`)}})
	all["c"] = `"set only"`
	app(session.AppendRequest{Append: map[string][]json.RawMessage{"messages": items(`3`), "other": items(`9`)},
		Marks: []session.Mark{mark("d", `{"x":1}`), mark("e", `[1,2]`)}})
	all["d"], all["e"] = `{"x":1}`, `[1,2]`
	app(session.AppendRequest{Append: map[string][]json.RawMessage{"messages": items(`4`)}}) // no marks
	wantMarks(t, s, "after appends", all, "f")

	// Another handle (a restart) rebuilds the index from the file.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = open()
	wantMarks(t, s, "after a reopen", all, "f")

	// Replacing the list deletes the rows carrying b, d and e.
	app(session.AppendRequest{Set: map[string]json.RawMessage{"messages": json.RawMessage(`[0]`)}, Marks: []session.Mark{mark("f", `"replace"`)}})
	all["f"] = `"replace"`
	wantMarks(t, s, "after a Set of the list", all)
	app(session.AppendRequest{Append: map[string][]json.RawMessage{"other": items(`10`)}, Marks: []session.Mark{mark("g", `"g"`)}})
	all["g"] = `"g"`

	// A full save over the session deletes every item row.
	w, err = s.Save(ctx, session.SaveRequest{SessionID: "s", ExpectedVersion: &ver, State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)},
		Marks: []session.Mark{mark("b", `"b again"`)}})
	if err != nil {
		t.Fatal(err)
	}
	ver = w.Version
	all["b"] = `"b again"` // a mark given again keeps its newest value
	wantMarks(t, s, "after a full save", all)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = open()
	wantMarks(t, s, "after a full save and a reopen", all)

	if err := s.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{}}); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, s, "after delete and recreate", nil, "a", "b", "c", "d", "e", "f", "g")
}

// Two handles on one file (two processes): each one's index of marks
// follows the other's writes, and a session deleted and recreated at the
// same version by one is another session to the other.
func TestMarkIndexAcrossHandles(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	a, _ := openStore(t, sqlite.Config{Path: path, Shared: true})
	b, _ := openStore(t, sqlite.Config{Path: path, Shared: true})
	save := func(s *sqlite.Store, marks ...session.Mark) int64 {
		t.Helper()
		w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}, Marks: marks})
		if err != nil {
			t.Fatal(err)
		}
		return w.Version
	}
	v := save(a)
	w, err := a.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: v,
		Append: map[string][]json.RawMessage{"messages": items(`1`)}, Marks: []session.Mark{mark("k1", `1`)}})
	if err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b, "b reads a's mark", map[string]string{"k1": `1`}, "k2")
	if _, err := a.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": items(`2`)}, Marks: []session.Mark{mark("k2", `2`)}}); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b, "b reads a's next mark", map[string]string{"k1": `1`, "k2": `2`})

	// a deletes the session and writes it up to the version b indexed.
	if err := a.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // another incarnation: another created_at
	v = save(a)
	for range 2 {
		w, err := a.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: v, Append: map[string][]json.RawMessage{"messages": items(`0`)}})
		if err != nil {
			t.Fatal(err)
		}
		v = w.Version
	}
	wantMarks(t, b, "b after a recreated the session", nil, "k1", "k2")
}

// The sweep clears expired marks from item rows as well as from
// session_marks.
func TestMarkSweepClearsItemRows(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)
	path := filepath.Join(t.TempDir(), "armature.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Now: func() time.Time { return now }, MarkRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{}, Marks: []session.Mark{mark("old-row", `0`)}})
	if err != nil {
		t.Fatal(err)
	}
	w, err = s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": items(`1`)}, Marks: []session.Mark{mark("old", `1`)}})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": items(`2`)}, Marks: []session.Mark{mark("new", `2`)}}); err != nil {
		t.Fatal(err)
	}
	if err := sqlite.SweepMarks(ctx, s); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, s, "after the sweep", map[string]string{"new": `2`}, "old", "old-row")
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	var rows, tbl int
	if err := db.QueryRow(`SELECT count(*) FROM session_items WHERE marks IS NOT NULL`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM session_marks`).Scan(&tbl); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || tbl != 0 {
		t.Fatalf("after the sweep: %d marked item rows, %d session_marks rows; want 1 and 0", rows, tbl)
	}
}

// LoadMarkAt answers from the index when it holds the session at the
// given version, and as LoadMark does otherwise: a stale version, another
// handle's newer write, an unknown session.
func TestLoadMarkAt(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	a, _ := openStore(t, sqlite.Config{Path: path, Shared: true})
	b, _ := openStore(t, sqlite.Config{Path: path, Shared: true})
	w, err := a.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	w, err = a.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": items(`1`)}, Marks: []session.Mark{mark("k1", `1`)}})
	if err != nil {
		t.Fatal(err)
	}
	v1 := w.Version
	// b writes k2: a's index, at v1, does not see it.
	w, err = b.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: v1,
		Append: map[string][]json.RawMessage{"messages": items(`2`)}, Marks: []session.Mark{mark("k2", `2`)}})
	if err != nil {
		t.Fatal(err)
	}
	v2 := w.Version
	for _, tc := range []struct {
		name    string
		s       *sqlite.Store
		id, key string
		version int64
		want    string // "" when not found
	}{
		{"at the indexed version", a, "s", "k1", v1, `1`},
		{"a later mark, at the version the index holds", a, "s", "k2", v1, ""},
		{"a later mark, at the current version", a, "s", "k2", v2, `2`},
		{"the writer's own index", b, "s", "k2", v2, `2`},
		{"a stale version on the writer", b, "s", "k1", v1, `1`},
		{"no version", a, "s", "k1", 0, `1`},
		{"unknown key", a, "s", "k9", v2, ""},
		{"unknown session", a, "nope", "k1", 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.LoadMarkAt(ctx, tc.id, tc.key, tc.version)
			switch {
			case tc.want == "" && !errors.Is(err, session.ErrNotFound):
				t.Errorf("= %s, %v; want ErrNotFound", got, err)
			case tc.want != "" && (err != nil || string(got) != tc.want):
				t.Errorf("= %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	if _, err := a.LoadMarkAt(ctx, "", "k1", v2); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("invalid id: %v", err)
	}
	if _, err := a.LoadMarkAt(ctx, "s", "", v2); !errors.Is(err, session.ErrInvalidRequest) {
		t.Errorf("empty key: %v", err)
	}
}

// Appends of every item count, with and without marks, store the items
// in order (rows are inserted two at a time) and the marks on the last.
func TestAppendItemCounts(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "armature.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	for n := range 6 {
		for _, marked := range []bool{false, true} {
			id := fmt.Sprintf("s-%d-%v", n, marked)
			if _, err := s.Save(ctx, session.SaveRequest{SessionID: id, SchemaVersion: "v1",
				State: map[string]json.RawMessage{"l": json.RawMessage(`[0]`)}}); err != nil {
				t.Fatal(err)
			}
			want := []int{0}
			var vals []string
			for i := range n {
				vals = append(vals, fmt.Sprint(i+1))
				want = append(want, i+1)
			}
			req := session.AppendRequest{SessionID: id, ExpectedVersion: 1, Append: map[string][]json.RawMessage{"l": items(vals...)}}
			if marked {
				req.Marks = []session.Mark{mark("m:a", `{"a":1}`), mark("m:b", `{"b":2}`)}
			}
			if _, err := s.Append(ctx, req); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			// A second append continues the sequence.
			if _, err := s.Append(ctx, session.AppendRequest{SessionID: id, ExpectedVersion: 2,
				Append: map[string][]json.RawMessage{"l": items("99")}}); err != nil {
				t.Fatal(err)
			}
			want = append(want, 99)
			rec, err := s.Load(ctx, session.LoadRequest{SessionID: id})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			if err := json.Unmarshal(rec.State["l"], &got); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: list %s (%v), want %v", id, rec.State["l"], err, want)
			}
			for k, v := range map[string]string{"m:a": `{"a":1}`, "m:b": `{"b":2}`} {
				raw, err := s.LoadMark(ctx, id, k)
				switch {
				case marked && (err != nil || string(raw) != v):
					t.Errorf("%s: mark %s = %s, %v", id, k, raw, err)
				case !marked && !errors.Is(err, session.ErrNotFound):
					t.Errorf("%s: unmarked append has mark %s: %s, %v", id, k, raw, err)
				}
			}
		}
	}
}
