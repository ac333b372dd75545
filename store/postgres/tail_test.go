package postgres_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/session"
)

// TestTailExact checks that Postgres answers a tail of an appended list
// with exactly the items asked for (the contract allows more; this store
// reads the range), the other lists whole.
func TestTailExact(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "x", State: map[string]json.RawMessage{
		"a": json.RawMessage(`[]`), "m": json.RawMessage(`[]`), "z": json.RawMessage(`[]`), "v": json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	version := int64(1)
	for i := range 30 {
		w, err := s.Append(ctx, session.AppendRequest{SessionID: "x", ExpectedVersion: version, Append: map[string][]json.RawMessage{
			"a": {json.RawMessage(fmt.Sprint(i))}, "m": {json.RawMessage(fmt.Sprint(100 + i))}, "z": {json.RawMessage(fmt.Sprint(200 + i))}}})
		if err != nil {
			t.Fatal(err)
		}
		version = w.Version
	}
	for _, max := range []int{1, 3, 29, 30, 80} {
		r, err := s.Load(ctx, session.LoadRequest{SessionID: "x", Tail: []session.ListTail{{Field: "m", Max: max}}})
		if err != nil {
			t.Fatal(err)
		}
		var m []int
		if err := json.Unmarshal(r.State["m"], &m); err != nil {
			t.Fatal(err)
		}
		want := min(max, 30)
		if len(m) != want || m[0] != 130-want || r.Skipped["m"] != 30-want {
			t.Errorf("tail %d: %d items from %d, skipped %d; want %d from %d, skipped %d", max, len(m), m[0], r.Skipped["m"], want, 130-want, 30-want)
		}
		for _, f := range []string{"a", "z"} {
			var l []int
			if err := json.Unmarshal(r.State[f], &l); err != nil || len(l) != 30 || l[0] != 0 && l[0] != 200 {
				t.Errorf("tail %d: field %q = %s, want it whole", max, f, r.State[f])
			}
		}
		if string(r.State["v"]) != "1" || r.Version != version {
			t.Errorf("field v = %s, version %d", r.State["v"], r.Version)
		}
	}
}
