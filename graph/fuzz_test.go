package graph_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func fuzzMergeSchema(t testing.TB) *graph.Schema {
	d := func(name, typ string, r graph.Reducer) graph.FieldSpec {
		return graph.NewDynamicField(name, mustType(t, typ), graph.WithReducer(r))
	}
	id := graph.FieldKey("id")
	return mustSchema(t,
		d("lww", "any", graph.LastWriteWins),
		d("n", "int", graph.LastWriteWins),
		d("x", "float", graph.LastWriteWins),
		d("s", "string", graph.LastWriteWins),
		d("b", "bool", graph.LastWriteWins),
		d("log", "list<string>", graph.Append),
		d("anylog", "list", graph.Append),
		d("meta", "dict<string,any>", graph.Merge),
		d("counts", "dict<string,int>", graph.Merge),
		d("flat", "list<int>", graph.ConcatFlatten),
		d("flatany", "list", graph.ConcatFlatten),
		d("all", "dict", graph.MergeAll),
		d("win", "list<any>", graph.BoundedAppend(3)),
		d("uniq", "list<any>", graph.DedupeAppend(nil)),
		d("uniqk", "list<dict<string,any>>", graph.DedupeAppend(id)),
		d("recs", "list", graph.MergeByKey(id)),
		d("recs2", "list<dict<string,any>>", graph.MergeByKey(id)),
	)
}

// fuzzPrior returns a state whose appending fields hold a claimable
// backing array (so merges exercise the in-place path).
func fuzzPrior(t testing.TB, s *graph.Schema) graph.State {
	st := s.Defaults()
	for _, u := range []graph.Update{
		{"lww": map[string]any{"k": []any{1}}, "n": 1, "x": 1.5, "s": "s", "b": true,
			"log": []any{"a"}, "anylog": []any{1}, "meta": map[string]any{"m": 1}, "counts": map[string]any{"c": 1},
			"flat": []any{[]any{1}}, "flatany": []any{[]any{"f"}}, "all": []any{map[string]any{"a": 1}},
			"win": []any{1, 2}, "uniq": []any{"u", 1}, "uniqk": []any{map[string]any{"id": 1}},
			"recs": []any{map[string]any{"id": 1, "v": "r"}}, "recs2": []any{map[string]any{"id": "k"}}},
		{"log": []any{"b"}, "anylog": []any{2}, "flat": []any{[]any{2}}, "flatany": []any{[]any{}, []any{"g"}},
			"win": []any{3}, "uniq": []any{"v"}, "uniqk": []any{map[string]any{"id": 2}}},
	} {
		var err error
		if st, err = st.Merge(u); err != nil {
			t.Fatalf("building the prior state: %v", err)
		}
	}
	return st
}

func mustJSON(t *testing.T, what string, s graph.State) []byte {
	t.Helper()
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatalf("%s: MarshalJSON: %v", what, err)
	}
	return b
}

// roundTrip checks that s re-encodes, decodes, and reaches a fixpoint
// after one canonicalising round. It returns the field to blame when s
// cannot be encoded or decoded.
func roundTrip(t *testing.T, sc *graph.Schema, s graph.State) (badField string, err error) {
	t.Helper()
	enc, err := s.MarshalJSON()
	if err != nil {
		for name, v := range s.Map() {
			if _, e := json.Marshal(v); e != nil {
				return name, err
			}
		}
		return "", err
	}
	d1, err := sc.DecodeState(enc)
	if err != nil {
		var se *graph.StateError
		if errors.As(err, &se) {
			return se.Field, err
		}
		return "", err
	}
	j1 := mustJSON(t, "decoded", d1)
	d2, err := sc.DecodeState(j1)
	if err != nil {
		t.Fatalf("re-decoding %s: %v", j1, err)
	}
	if j2 := mustJSON(t, "re-decoded", d2); !bytes.Equal(j1, j2) {
		t.Fatalf("no fixpoint after a round trip:\n%s\n%s", j1, j2)
	}
	return "", nil
}

func FuzzMergeUpdate(f *testing.F) {
	for _, seed := range []string{
		`{}`, `null`, `[]`, `{"n": 1, "s": "x", "b": false, "x": 2}`, `{"n": "x"}`, `{"n": 1.5}`, `{"x": 1e400}`,
		`{"lww": {"a": [1, 2.5, null, "s", {"b": true}]}}`, `{"lww": -0.0}`,
		`{"log": ["c", "d"]}`, `{"log": "c"}`, `{"log": [1]}`, `{"log": null}`, `{"log": []}`,
		`{"anylog": [1, "x", {"k": []}]}`, `{"anylog": [1e400]}`,
		`{"meta": {"k": [1, {"z": null}]}}`, `{"meta": [1]}`, `{"counts": {"a": 1, "b": "x"}}`,
		`{"flat": [[1, 2], [], [3]]}`, `{"flat": [1, 2]}`, `{"flat": [["a"]]}`, `{"flat": [null]}`,
		`{"flatany": [["x"], [1.5]]}`,
		`{"all": [{"a": 1}, {"a": 2, "b": 3}, {}]}`, `{"all": {"a": 1}}`, `{"all": [1]}`,
		`{"win": [1, 2, 3, 4, 5]}`, `{"win": [9]}`, `{"win": {}}`,
		`{"uniq": ["a", "a", 1, 1.0, "u"]}`, `{"uniq": [{"a": 1}]}`, `{"uniq": [[1]]}`,
		`{"uniqk": [{"id": 1}, {"id": 3, "v": 2}, {"id": 3}]}`, `{"uniqk": [{"v": 1}]}`, `{"uniqk": [{"id": [1]}]}`,
		`{"recs": [{"id": 1, "v": "x"}, {"id": 9}, {"id": 9, "v": "y"}]}`, `{"recs": [{"id": {"a": 1}}]}`, `{"recs": [1]}`,
		`{"recs2": [{"id": "k", "v": 1}, {"id": 1.0}]}`,
		`{"zzz": 1}`, `{"log": ["ok"], "zzz": 1}`, `{"s": "\u00e9\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := fuzzMergeSchema(t)
		prior := fuzzPrior(t, sc)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var upd map[string]any
		if err := dec.Decode(&upd); err != nil {
			return
		}
		before := mustJSON(t, "prior", prior)

		r1, err1 := prior.Merge(upd)
		r2, err2 := prior.Merge(upd) // the same merge again from the same prior
		if after := mustJSON(t, "prior after merge", prior); !bytes.Equal(before, after) {
			t.Fatalf("Merge changed the prior state:\n%s\n%s", before, after)
		}
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("the same merge succeeded once and failed once: %v / %v", err1, err2)
		}
		if err1 != nil {
			cat := errcat.Of(err1)
			if cat != errcat.ReducerError && cat != errcat.StateValidationError {
				t.Fatalf("Merge error category %q (%v)", cat, err1)
			}
			var me *graph.MergeError
			if !errors.As(err1, &me) || me.Reducer == "" {
				t.Fatalf("Merge error %T (%v) is not a complete *graph.MergeError", err1, err1)
			}
			if _, ok := upd[me.Field]; !ok {
				t.Fatalf("Merge error names field %q, which the update does not set", me.Field)
			}
			if !strings.HasPrefix(err1.Error(), "graph: "+string(cat)) {
				t.Fatalf("message %q", err1.Error())
			}
			if !r1.IsZero() {
				t.Fatalf("failed Merge returned a state")
			}
			return
		}
		if field, err := roundTrip(t, sc, r1); err != nil {
			t.Fatalf("merged state does not round-trip (field %q): %v", field, err)
		}
		j1, j2 := mustJSON(t, "r1", r1), mustJSON(t, "r2", r2)
		if !bytes.Equal(j1, j2) {
			t.Fatalf("the same merge from the same prior differs:\n%s\n%s", j1, j2)
		}
		// Merge once more from the result: r1 must stay unchanged too.
		_, _ = r1.Merge(upd)
		if again := mustJSON(t, "r1 after merge", r1); !bytes.Equal(j1, again) {
			t.Fatalf("Merge changed its prior (a merge result):\n%s\n%s", j1, again)
		}
	})
}

func FuzzParseType(f *testing.F) {
	for _, seed := range []string{
		"string", "str", "int", "float", "bool", "any", "list", "list<int>", "list[str]", "dict", "record",
		"dict<string,int>", "dict[str, list<any>]", "record_map<any,Rec>", "list<dict<string,list<list[bool]>>>",
		"Rec", "list<Rec>", "", "list<", "dict<int,int>", "dict<string>", " list < int > ", "list<int]", "int x",
	} {
		f.Add(seed)
	}
	records := map[string]graph.Type{"Rec": graph.RecordOf("Rec", map[string]graph.Type{"a": graph.TypeInt})}
	f.Fuzz(func(t *testing.T, s string) {
		typ, err := graph.ParseType(s, records)
		if err != nil {
			if typ != nil {
				t.Fatalf("ParseType(%q) returned a type and an error", s)
			}
			if !strings.HasPrefix(err.Error(), "graph: type ") {
				t.Fatalf("error %q lacks the graph: prefix", err)
			}
			return
		}
		str := typ.String()
		again, err := graph.ParseType(str, records)
		if err != nil {
			t.Fatalf("ParseType(%q) = %s, which does not re-parse: %v", s, str, err)
		}
		if again.String() != str {
			t.Fatalf("ParseType(%q) = %s, re-parsed as %s", s, str, again.String())
		}
		// Checking a few values never panics.
		for _, v := range []any{nil, 1, "s", []any{1}, map[string]any{"a": 1}} {
			_, _ = typ.Check(v)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	for _, seed := range []string{
		`{}`, `null`, `[]`, ``, `{"n":1,"log":["a"],"meta":{"k":[1,{"z":null}]},"tn":2,"tl":["x"],"tm":{"a":1.5},"tp":"p"}`,
		`{"n":"x"}`, `{"n":1.0}`, `{"x":1e400}`, `{"lww":-0.0}`, `{"tl":null}`, `{"tm":{"a":"x"}}`, `{"tp":null}`,
		`{"zzz":1}`, `{"log":[1]}`, `{"n":1,"n":2}`, `{"recs":[{"id":1}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := func(name, typ string, r graph.Reducer) graph.FieldSpec {
			return graph.NewDynamicField(name, mustType(t, typ), graph.WithReducer(r))
		}
		sc := mustSchema(t,
			d("lww", "any", graph.LastWriteWins),
			d("n", "int", graph.LastWriteWins),
			d("x", "float", graph.LastWriteWins),
			d("log", "list<string>", graph.Append),
			d("meta", "dict<string,any>", graph.Merge),
			d("recs", "list<dict<string,any>>", graph.MergeByKey(graph.FieldKey("id"))),
			graph.NewField[int]("tn"),
			graph.NewListField[string]("tl", graph.Append),
			graph.NewMapField[string, float64]("tm", graph.Merge),
			graph.NewField[*string]("tp"),
		)
		st, err := sc.DecodeState(data)
		if err != nil {
			var se *graph.StateError
			if !errors.As(err, &se) || errcat.Of(err) != errcat.StateValidationError {
				t.Fatalf("DecodeState error %T (%v) is not a *graph.StateError", err, err)
			}
			if !st.IsZero() {
				t.Fatalf("failed DecodeState returned a state")
			}
			return
		}
		if field, err := roundTrip(t, sc, st); err != nil {
			t.Fatalf("decoded state does not round-trip (field %q): %v", field, err)
		}
		// A decoded state merges like any other.
		if _, err := st.Merge(graph.Update{"log": []any{"z"}, "tl": []string{"z"}}); err != nil {
			t.Fatalf("Merge on a decoded state: %v", err)
		}
	})
}
