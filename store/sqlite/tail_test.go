package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// TestTailExact checks that SQLite answers a tail of an appended list
// with exactly the items asked for (the contract allows more; this store
// reads the range), and the plan reads it by the primary key, not by
// scanning the session's items.
func TestTailExact(t *testing.T) {
	s, path := openStore(t, sqlite.Config{})
	ctx := t.Context()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "x", State: map[string]json.RawMessage{
		"a": json.RawMessage(`[]`), "m": json.RawMessage(`[]`), "z": json.RawMessage(`[]`), "v": json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	version := int64(1)
	for i := range 50 {
		w, err := s.Append(ctx, session.AppendRequest{SessionID: "x", ExpectedVersion: version, Append: map[string][]json.RawMessage{
			"a": {json.RawMessage(fmt.Sprint(i))}, "m": {json.RawMessage(fmt.Sprint(100 + i))}, "z": {json.RawMessage(fmt.Sprint(200 + i))}}})
		if err != nil {
			t.Fatal(err)
		}
		version = w.Version
	}
	for _, max := range []int{1, 3, 49, 50, 80} {
		r, err := s.Load(ctx, session.LoadRequest{SessionID: "x", Tail: []session.ListTail{{Field: "m", Max: max}}})
		if err != nil {
			t.Fatal(err)
		}
		var m []int
		if err := json.Unmarshal(r.State["m"], &m); err != nil {
			t.Fatal(err)
		}
		want := min(max, 50)
		if len(m) != want || m[0] != 150-want || r.Skipped["m"] != 50-want {
			t.Errorf("tail %d: %d items from %d, skipped %d; want %d from %d, skipped %d", max, len(m), m[0], r.Skipped["m"], want, 150-want, 50-want)
		}
		for _, f := range []string{"a", "z"} {
			var l []int
			if err := json.Unmarshal(r.State[f], &l); err != nil || len(l) != 50 {
				t.Errorf("tail %d: field %q = %s, want it whole", max, f, r.State[f])
			}
		}
		if string(r.State["v"]) != "1" {
			t.Errorf("field v = %s", r.State["v"])
		}
	}
	plan := queryPlan(t, rawDB(t, path), sqlite.LoadTailSQL, "x", "m", 3)
	for _, d := range plan {
		// A search of session_items by session_id alone would read the
		// whole tailed list.
		if strings.HasPrefix(d, "SCAN") || strings.Contains(d, "TEMP B-TREE") || strings.Contains(d, "session_items") && strings.HasSuffix(d, "(session_id=?)") {
			t.Errorf("tail read plan %q: scans or sorts", plan)
		}
	}
}

// TestTailGap checks that a hole in a list's item numbers, which would
// make the skipped count wrong, is reported as corruption.
func TestTailGap(t *testing.T) {
	s, path := openStore(t, sqlite.Config{})
	ctx := t.Context()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "g", State: map[string]json.RawMessage{"l": json.RawMessage(`[]`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "g", ExpectedVersion: 1, Append: map[string][]json.RawMessage{
		"l": {json.RawMessage(`1`), json.RawMessage(`2`), json.RawMessage(`3`), json.RawMessage(`4`)}}}); err != nil {
		t.Fatal(err)
	}
	exec(t, rawDB(t, path), `DELETE FROM session_items WHERE session_id = 'g' AND seq = 2`)
	_, err := s.Load(ctx, session.LoadRequest{SessionID: "g", Tail: []session.ListTail{{Field: "l", Max: 3}}})
	if errcat.Of(err) != errcat.SessionLoadFailed || errors.Is(err, session.ErrNotFound) {
		t.Fatalf("tail load over a gap = %v, want session_load_failed", err)
	}
}
