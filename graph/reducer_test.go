package graph_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func rec(id any, v string) map[string]any { return map[string]any{"id": id, "v": v} }

// checkMergeErr asserts err is a *graph.MergeError of category want for
// field and reducer.
func checkMergeErr(t *testing.T, err error, want errcat.Category, field, reducer string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Merge succeeded, want %s", want)
	}
	if got := errcat.Of(err); got != want {
		t.Fatalf("errcat.Of(%v) = %q, want %q", err, got, want)
	}
	if !errors.Is(err, want) {
		t.Errorf("errors.Is(err, %s) = false", want)
	}
	var me *graph.MergeError
	if !errors.As(err, &me) {
		t.Fatalf("errors.As(%T, *graph.MergeError) = false", err)
	}
	if me.Field != field || me.Reducer != reducer {
		t.Errorf("MergeError field/reducer = %q/%q, want %q/%q", me.Field, me.Reducer, field, reducer)
	}
}

func TestCanonicalReducersDynamic(t *testing.T) {
	panicKey := func(any) (any, error) { panic("key boom") }
	sum := graph.CustomReducer("sum", func(prior, update any) (any, error) {
		p, _ := prior.(int)
		u, ok := update.(int)
		if !ok {
			return nil, fmt.Errorf("want int")
		}
		return p + u, nil
	}, false)

	tests := []struct {
		name    string
		typ     string
		reducer graph.Reducer
		init    any // initial field value (set directly), nil for the default
		updates []any
		want    any
		wantCat errcat.Category // category of the last update's failure
	}{
		// last_write_wins
		{name: "lww/replace", typ: "int", reducer: graph.LastWriteWins, updates: []any{5, 7}, want: 7},
		{name: "lww/json number normalised", typ: "int", reducer: graph.LastWriteWins, updates: []any{json.Number("42")}, want: 42},
		{name: "lww/int kinds normalised", typ: "int", reducer: graph.LastWriteWins, updates: []any{int64(3), uint8(4)}, want: 4},
		{name: "lww/any nested normalised", typ: "any", reducer: graph.LastWriteWins,
			updates: []any{map[string]any{"a": []int{1, 2}}}, want: map[string]any{"a": []any{1, 2}}},
		{name: "lww/type mismatch", typ: "int", reducer: graph.LastWriteWins, updates: []any{"x"}, wantCat: errcat.StateValidationError},
		{name: "lww/element mismatch", typ: "list<string>", reducer: graph.LastWriteWins,
			updates: []any{[]any{"a", 1}}, wantCat: errcat.StateValidationError},
		{name: "custom/sum", typ: "int", reducer: sum, init: 1, updates: []any{2, 3}, want: 6},
		{name: "custom/error is reducer_error", typ: "int", reducer: sum, updates: []any{"x"}, wantCat: errcat.ReducerError},

		// append
		{name: "append/two updates", typ: "list<string>", reducer: graph.Append,
			updates: []any{[]any{"a", "b"}, []any{"c"}}, want: []any{"a", "b", "c"}},
		{name: "append/onto initial", typ: "list<string>", reducer: graph.Append, init: []any{"x"},
			updates: []any{[]any{"y"}}, want: []any{"x", "y"}},
		{name: "append/empty update no-op", typ: "list<string>", reducer: graph.Append, init: []any{"x"},
			updates: []any{[]any{}}, want: []any{"x"}},
		{name: "append/go slice update", typ: "list<string>", reducer: graph.Append,
			updates: []any{[]string{"a"}}, want: []any{"a"}},
		{name: "append/any field", typ: "any", reducer: graph.Append,
			updates: []any{[]any{1}, []any{2}}, want: []any{1, 2}},
		{name: "append/non-list update", typ: "list<string>", reducer: graph.Append,
			updates: []any{"a"}, wantCat: errcat.ReducerError},
		{name: "append/null update", typ: "list<string>", reducer: graph.Append,
			updates: []any{nil}, wantCat: errcat.ReducerError},
		{name: "append/element mismatch", typ: "list<string>", reducer: graph.Append,
			updates: []any{[]any{"a"}, []any{1}}, wantCat: errcat.StateValidationError},

		// merge
		{name: "merge/shallow later wins", typ: "dict<string,int>", reducer: graph.Merge, init: map[string]any{"a": 1, "b": 2},
			updates: []any{map[string]any{"b": 3, "c": 4}}, want: map[string]any{"a": 1, "b": 3, "c": 4}},
		{name: "merge/empty update no-op", typ: "dict<string,int>", reducer: graph.Merge, init: map[string]any{"a": 1},
			updates: []any{map[string]any{}}, want: map[string]any{"a": 1}},
		{name: "merge/any field from null", typ: "any", reducer: graph.Merge,
			updates: []any{map[string]any{"a": 1}, map[string]any{"b": 2}}, want: map[string]any{"a": 1, "b": 2}},
		{name: "merge/non-mapping update", typ: "dict<string,int>", reducer: graph.Merge,
			updates: []any{[]any{1}}, wantCat: errcat.ReducerError},
		{name: "merge/value mismatch", typ: "dict<string,int>", reducer: graph.Merge,
			updates: []any{map[string]any{"a": "x"}}, wantCat: errcat.StateValidationError},

		// concat_flatten
		{name: "concat_flatten/one level", typ: "list<int>", reducer: graph.ConcatFlatten, init: []any{0},
			updates: []any{[]any{[]any{1, 2}, []any{}, []any{3}}}, want: []any{0, 1, 2, 3}},
		{name: "concat_flatten/empty update no-op", typ: "list<int>", reducer: graph.ConcatFlatten, init: []any{0},
			updates: []any{[]any{}}, want: []any{0}},
		{name: "concat_flatten/only empty sub-lists", typ: "list<int>", reducer: graph.ConcatFlatten, init: []any{0},
			updates: []any{[]any{[]any{}, []any{}}}, want: []any{0}},
		{name: "concat_flatten/no auto-detect of flat list", typ: "list<int>", reducer: graph.ConcatFlatten,
			updates: []any{[]any{1, 2}}, wantCat: errcat.ReducerError},
		{name: "concat_flatten/non-list update", typ: "list<int>", reducer: graph.ConcatFlatten,
			updates: []any{"x"}, wantCat: errcat.ReducerError},
		{name: "concat_flatten/null sub-list", typ: "list<int>", reducer: graph.ConcatFlatten,
			updates: []any{[]any{nil}}, wantCat: errcat.ReducerError},
		{name: "concat_flatten/element mismatch", typ: "list<int>", reducer: graph.ConcatFlatten,
			updates: []any{[]any{[]any{"a"}}}, wantCat: errcat.StateValidationError},

		// merge_all
		{name: "merge_all/fold later wins", typ: "dict<string,int>", reducer: graph.MergeAll, init: map[string]any{"a": 0, "z": 9},
			updates: []any{[]any{map[string]any{"a": 1}, map[string]any{"a": 2, "b": 3}, map[string]any{}}},
			want:    map[string]any{"a": 2, "b": 3, "z": 9}},
		{name: "merge_all/empty update no-op", typ: "dict<string,int>", reducer: graph.MergeAll, init: map[string]any{"a": 1},
			updates: []any{[]any{}}, want: map[string]any{"a": 1}},
		{name: "merge_all/no auto-detect of single mapping", typ: "dict<string,int>", reducer: graph.MergeAll,
			updates: []any{map[string]any{"a": 1}}, wantCat: errcat.ReducerError},
		{name: "merge_all/element not a mapping", typ: "dict<string,int>", reducer: graph.MergeAll,
			updates: []any{[]any{map[string]any{"a": 1}, 1}}, wantCat: errcat.ReducerError},
		{name: "merge_all/value mismatch", typ: "dict<string,int>", reducer: graph.MergeAll,
			updates: []any{[]any{map[string]any{"a": "x"}}}, wantCat: errcat.StateValidationError},

		// bounded_append
		{name: "bounded_append/front drop", typ: "list<int>", reducer: graph.BoundedAppend(3), init: []any{1, 2},
			updates: []any{[]any{3, 4}}, want: []any{2, 3, 4}},
		{name: "bounded_append/update larger than max_len", typ: "list<int>", reducer: graph.BoundedAppend(3), init: []any{1, 2},
			updates: []any{[]any{5, 6, 7, 8}}, want: []any{6, 7, 8}},
		{name: "bounded_append/update equal to max_len", typ: "list<int>", reducer: graph.BoundedAppend(3), init: []any{1},
			updates: []any{[]any{4, 5, 6}}, want: []any{4, 5, 6}},
		{name: "bounded_append/sequential", typ: "list<int>", reducer: graph.BoundedAppend(3),
			updates: []any{[]any{1, 2}, []any{3}, []any{4}, []any{5, 6}}, want: []any{4, 5, 6}},
		{name: "bounded_append/max_len 1", typ: "list<int>", reducer: graph.BoundedAppend(1),
			updates: []any{[]any{1}, []any{2}}, want: []any{2}},
		{name: "bounded_append/empty update keeps oversize prior", typ: "list<int>", reducer: graph.BoundedAppend(3),
			init: []any{1, 2, 3, 4, 5}, updates: []any{[]any{}}, want: []any{1, 2, 3, 4, 5}},
		{name: "bounded_append/non-list update", typ: "list<int>", reducer: graph.BoundedAppend(3),
			updates: []any{map[string]any{}}, wantCat: errcat.ReducerError},
		{name: "bounded_append/element mismatch", typ: "list<int>", reducer: graph.BoundedAppend(3),
			updates: []any{[]any{"a"}}, wantCat: errcat.StateValidationError},

		// dedupe_append
		{name: "dedupe_append/items as keys", typ: "list<string>", reducer: graph.DedupeAppend(nil), init: []any{"a", "b"},
			updates: []any{[]any{"b", "c", "c", "d", "a"}}, want: []any{"a", "b", "c", "d"}},
		{name: "dedupe_append/key first wins", typ: "list", reducer: graph.DedupeAppend(graph.FieldKey("id")),
			init:    []any{rec(1, "a")},
			updates: []any{[]any{rec(1, "x"), rec(2, "y"), rec(2, "z")}},
			want:    []any{rec(1, "a"), rec(2, "y")}},
		{name: "dedupe_append/numeric keys canonical", typ: "list<any>", reducer: graph.DedupeAppend(nil), init: []any{1},
			updates: []any{[]any{1.0, 2}}, want: []any{1, 2}},
		{name: "dedupe_append/prior duplicates kept", typ: "list<string>", reducer: graph.DedupeAppend(nil), init: []any{"a", "a"},
			updates: []any{[]any{"a", "b"}}, want: []any{"a", "a", "b"}},
		{name: "dedupe_append/empty update no-op", typ: "list<string>", reducer: graph.DedupeAppend(nil), init: []any{"a"},
			updates: []any{[]any{}}, want: []any{"a"}},
		{name: "dedupe_append/unhashable item", typ: "list", reducer: graph.DedupeAppend(nil),
			updates: []any{[]any{map[string]any{"a": 1}}}, wantCat: errcat.ReducerError},
		{name: "dedupe_append/unhashable key", typ: "list", reducer: graph.DedupeAppend(graph.FieldKey("id")),
			updates: []any{[]any{map[string]any{"id": []any{1}}}}, wantCat: errcat.ReducerError},
		{name: "dedupe_append/key function error", typ: "list", reducer: graph.DedupeAppend(graph.FieldKey("id")),
			updates: []any{[]any{map[string]any{"v": 1}}}, wantCat: errcat.ReducerError},
		{name: "dedupe_append/key function panic", typ: "list", reducer: graph.DedupeAppend(panicKey),
			updates: []any{[]any{1}}, wantCat: errcat.ReducerError},
		{name: "dedupe_append/non-list update", typ: "list", reducer: graph.DedupeAppend(nil),
			updates: []any{1}, wantCat: errcat.ReducerError},
		{name: "dedupe_append/element mismatch", typ: "list<int>", reducer: graph.DedupeAppend(nil),
			updates: []any{[]any{"a"}}, wantCat: errcat.StateValidationError},

		// merge_by_key
		{name: "merge_by_key/replace in place", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			init:    []any{rec(1, "p"), rec(2, "p"), rec(3, "p")},
			updates: []any{[]any{rec(2, "done"), rec(1, "running"), rec(3, "errored")}},
			want:    []any{rec(1, "running"), rec(2, "done"), rec(3, "errored")}},
		{name: "merge_by_key/novel keys appended in update order", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			init:    []any{rec(1, "p")},
			updates: []any{[]any{rec(7, "a"), rec(2, "b"), rec(5, "c")}},
			want:    []any{rec(1, "p"), rec(7, "a"), rec(2, "b"), rec(5, "c")}},
		{name: "merge_by_key/mixed", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			init:    []any{rec(1, "p"), rec(2, "p")},
			updates: []any{[]any{rec(1, "done"), rec(3, "running"), rec(2, "errored"), rec(4, "queued")}},
			want:    []any{rec(1, "done"), rec(2, "errored"), rec(3, "running"), rec(4, "queued")}},
		{name: "merge_by_key/last prior duplicate targeted, update duplicates last wins", typ: "list",
			reducer: graph.MergeByKey(graph.FieldKey("id")),
			init:    []any{rec(1, "old-a"), rec(1, "old-b"), rec(2, "old-c")},
			updates: []any{[]any{rec(2, "c1"), rec(1, "new"), rec(2, "c2"), rec(3, "x"), rec(3, "y")}},
			want:    []any{rec(1, "old-a"), rec(1, "new"), rec(2, "c2"), rec(3, "y")}},
		{name: "merge_by_key/sequential", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			updates: []any{[]any{rec(1, "a"), rec(2, "b")}, []any{rec(2, "B")}, []any{rec(3, "c")}},
			want:    []any{rec(1, "a"), rec(2, "B"), rec(3, "c")}},
		{name: "merge_by_key/empty update no-op", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			init: []any{rec(1, "p")}, updates: []any{[]any{}}, want: []any{rec(1, "p")}},
		{name: "merge_by_key/unhashable key", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			updates: []any{[]any{map[string]any{"id": map[string]any{}}}}, wantCat: errcat.ReducerError},
		{name: "merge_by_key/key function error", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			init: []any{rec(1, "p")}, updates: []any{[]any{"not a record"}}, wantCat: errcat.ReducerError},
		{name: "merge_by_key/non-list update", typ: "list", reducer: graph.MergeByKey(graph.FieldKey("id")),
			updates: []any{rec(1, "a")}, wantCat: errcat.ReducerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchema(t, graph.NewDynamicField("f", mustType(t, tt.typ), graph.WithReducer(tt.reducer)))
			init := graph.Update{}
			if tt.init != nil {
				init["f"] = tt.init
			}
			st, err := s.New(init)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			for i, u := range tt.updates {
				before := stateJSON(t, st)
				next, err := st.Merge(graph.Update{"f": u})
				if tt.wantCat != "" && i == len(tt.updates)-1 {
					checkMergeErr(t, err, tt.wantCat, "f", tt.reducer.Name())
					if !next.IsZero() {
						t.Errorf("failed Merge returned a non-zero state")
					}
					if after := stateJSON(t, st); after != before {
						t.Errorf("failed Merge changed the prior state: %s -> %s", before, after)
					}
					return
				}
				if err != nil {
					t.Fatalf("Merge #%d (%#v): %v", i, u, err)
				}
				if after := stateJSON(t, st); after != before {
					t.Errorf("Merge #%d changed the prior state: %s -> %s", i, before, after)
				}
				st = next
			}
			got, _ := st.Get("f")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("field value mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUntypedListAppendNormalises pins the dynamic-type contract for list
// fields whose element type is unconstrained ("list", "any"): appended
// items must be normalised and validated exactly as a last_write_wins
// write of the same value is, otherwise Merge admits state that its own
// MarshalJSON / DecodeState cannot round-trip.
func TestUntypedListAppendNormalises(t *testing.T) {
	for _, r := range []graph.Reducer{graph.Append, graph.BoundedAppend(5), graph.DedupeAppend(nil)} {
		for _, typ := range []string{"list", "any"} {
			t.Run(r.Name()+"/"+typ, func(t *testing.T) {
				s := mustSchema(t, graph.NewDynamicField("f", mustType(t, typ), graph.WithReducer(r)))
				st := mustMerge(t, s.Defaults(), graph.Update{"f": []any{json.Number("1")}})
				got, _ := st.Get("f")
				if diff := cmp.Diff([]any{1}, got); diff != "" {
					t.Errorf("json.Number not normalised (-want +got):\n%s", diff)
				}
				for _, bad := range []any{math.NaN(), json.Number("1e400")} {
					_, err := s.Defaults().Merge(graph.Update{"f": []any{bad}})
					if errcat.Of(err) != errcat.StateValidationError {
						t.Errorf("Merge of %v: err = %v, want state_validation_error", bad, err)
					}
				}
			})
		}
	}
}

type item struct {
	ID int
	V  string
}

func TestCanonicalReducersTyped(t *testing.T) {
	num := graph.NewField[int]("num")
	name := graph.NewField[string]("name", graph.Default("d"))
	log := graph.NewListField[string]("log", graph.Append)
	lwwList := graph.NewListField[string]("lwwlist", graph.LastWriteWins)
	flat := graph.NewListField[int]("flat", graph.ConcatFlatten)
	bounded := graph.NewListField[int]("bounded", graph.BoundedAppend(2))
	dedupe := graph.NewListField[string]("dedupe", graph.DedupeAppend(nil))
	dedupeKey := graph.NewListField[item]("dedupekey", graph.DedupeAppend(graph.FieldKey("ID")))
	dedupeSlices := graph.NewListField[[]int]("dedupeslices", graph.DedupeAppend(nil))
	byKey := graph.NewListField[item]("bykey", graph.MergeByKey(graph.FieldKey("ID")))
	byKeyUnhashable := graph.NewListField[item]("bykeyu", graph.MergeByKey(func(it any) (any, error) {
		return []int{it.(item).ID}, nil
	}))
	m := graph.NewMapField[string, int]("m", graph.Merge)
	mall := graph.NewMapField[string, int]("mall", graph.MergeAll)

	tests := []struct {
		name    string
		field   graph.FieldSpec
		updates []graph.Update
		get     func(graph.State) any
		want    any
		wantCat errcat.Category
		reducer string
	}{
		{name: "field/lww", field: num, updates: []graph.Update{num.Set(1), num.Set(2)},
			get: func(s graph.State) any { return num.Get(s) }, want: 2},
		{name: "field/default", field: name, get: func(s graph.State) any { return name.Get(s) }, want: "d"},
		{name: "field/wrong type", field: num, updates: []graph.Update{{"num": "x"}},
			wantCat: errcat.StateValidationError, reducer: "last_write_wins"},

		{name: "append/two updates", field: log, updates: []graph.Update{log.Add("a", "b"), log.Add("c")},
			get: func(s graph.State) any { return log.Get(s) }, want: []string{"a", "b", "c"}},
		{name: "append/empty update no-op", field: log, updates: []graph.Update{log.Add("a"), log.Add()},
			get: func(s graph.State) any { return log.Get(s) }, want: []string{"a"}},
		{name: "append/non-list update", field: log, updates: []graph.Update{{"log": "x"}},
			wantCat: errcat.ReducerError, reducer: "append"},
		{name: "append/null update", field: log, updates: []graph.Update{{"log": nil}},
			wantCat: errcat.ReducerError, reducer: "append"},
		{name: "list lww/replace", field: lwwList, updates: []graph.Update{lwwList.Add("a"), lwwList.Add("b", "c")},
			get: func(s graph.State) any { return lwwList.Get(s) }, want: []string{"b", "c"}},

		{name: "concat_flatten/add wraps one sub-list", field: flat,
			updates: []graph.Update{flat.Add(1, 2), {"flat": [][]int{{3}, {}, {4, 5}}}},
			get:     func(s graph.State) any { return flat.Get(s) }, want: []int{1, 2, 3, 4, 5}},
		{name: "concat_flatten/empty update no-op", field: flat,
			updates: []graph.Update{flat.Add(1), {"flat": [][]int{}}},
			get:     func(s graph.State) any { return flat.Get(s) }, want: []int{1}},
		{name: "concat_flatten/flat list rejected", field: flat, updates: []graph.Update{{"flat": []int{1}}},
			wantCat: errcat.ReducerError, reducer: "concat_flatten"},

		{name: "bounded_append/front drop", field: bounded, updates: []graph.Update{bounded.Add(1, 2, 3), bounded.Add(4)},
			get: func(s graph.State) any { return bounded.Get(s) }, want: []int{3, 4}},
		{name: "bounded_append/empty update no-op", field: bounded, updates: []graph.Update{bounded.Add(1), bounded.Add()},
			get: func(s graph.State) any { return bounded.Get(s) }, want: []int{1}},

		{name: "dedupe_append/items", field: dedupe, updates: []graph.Update{dedupe.Add("a", "b", "a"), dedupe.Add("b", "c")},
			get: func(s graph.State) any { return dedupe.Get(s) }, want: []string{"a", "b", "c"}},
		{name: "dedupe_append/struct key first wins", field: dedupeKey,
			updates: []graph.Update{dedupeKey.Add(item{1, "a"}, item{1, "b"}), dedupeKey.Add(item{2, "c"}, item{1, "d"})},
			get:     func(s graph.State) any { return dedupeKey.Get(s) }, want: []item{{1, "a"}, {2, "c"}}},
		{name: "dedupe_append/unhashable items", field: dedupeSlices, updates: []graph.Update{dedupeSlices.Add([]int{1})},
			wantCat: errcat.ReducerError, reducer: "dedupe_append"},

		{name: "merge_by_key/replace and append", field: byKey,
			updates: []graph.Update{byKey.Add(item{1, "a"}, item{2, "b"}), byKey.Add(item{2, "B"}, item{3, "c"}, item{1, "A"})},
			get:     func(s graph.State) any { return byKey.Get(s) }, want: []item{{1, "A"}, {2, "B"}, {3, "c"}}},
		{name: "merge_by_key/unhashable key", field: byKeyUnhashable, updates: []graph.Update{byKeyUnhashable.Add(item{1, "a"})},
			wantCat: errcat.ReducerError, reducer: "merge_by_key"},

		{name: "merge/put", field: m, updates: []graph.Update{m.Put("a", 1), m.Put("b", 2), m.Put("a", 3)},
			get: func(s graph.State) any { return m.Get(s) }, want: map[string]int{"a": 3, "b": 2}},
		{name: "merge/empty update no-op", field: m, updates: []graph.Update{m.Put("a", 1), {"m": map[string]int{}}},
			get: func(s graph.State) any { return m.Get(s) }, want: map[string]int{"a": 1}},
		{name: "merge/non-mapping update", field: m, updates: []graph.Update{{"m": "x"}},
			wantCat: errcat.ReducerError, reducer: "merge"},

		{name: "merge_all/fold", field: mall,
			updates: []graph.Update{mall.Put("a", 1), {"mall": []map[string]int{{"a": 2, "b": 3}, {"b": 4}}}},
			get:     func(s graph.State) any { return mall.Get(s) }, want: map[string]int{"a": 2, "b": 4}},
		{name: "merge_all/empty update no-op", field: mall,
			updates: []graph.Update{mall.Put("a", 1), {"mall": []map[string]int{}}},
			get:     func(s graph.State) any { return mall.Get(s) }, want: map[string]int{"a": 1}},
		{name: "merge_all/single mapping rejected", field: mall, updates: []graph.Update{{"mall": map[string]int{"a": 1}}},
			wantCat: errcat.ReducerError, reducer: "merge_all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchema(t, tt.field)
			st := s.Defaults()
			for i, u := range tt.updates {
				before := stateJSON(t, st)
				next, err := st.Merge(u)
				if tt.wantCat != "" && i == len(tt.updates)-1 {
					checkMergeErr(t, err, tt.wantCat, tt.field.FieldName(), tt.reducer)
					return
				}
				if err != nil {
					t.Fatalf("Merge #%d: %v", i, err)
				}
				if after := stateJSON(t, st); after != before {
					t.Errorf("Merge #%d changed the prior state: %s -> %s", i, before, after)
				}
				st = next
			}
			if diff := cmp.Diff(tt.want, tt.get(st)); diff != "" {
				t.Errorf("field value mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTypedElementMismatchCategory: a list or mapping update whose
// elements do not fit the field's element type is a state validation
// failure on dynamic fields; typed fields should classify it the same way.
func TestTypedElementMismatchCategory(t *testing.T) {
	log := graph.NewListField[string]("log", graph.Append)
	m := graph.NewMapField[string, int]("m", graph.Merge)
	s := mustSchema(t, log, m)
	tests := []struct {
		name  string
		u     graph.Update
		field string
		red   string
	}{
		{"list elements", graph.Update{"log": []int{1}}, "log", "append"},
		{"map values", graph.Update{"m": map[string]string{"a": "x"}}, "m", "merge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Defaults().Merge(tt.u)
			checkMergeErr(t, err, errcat.StateValidationError, tt.field, tt.red)
		})
	}
}

func TestReducerSchemaErrors(t *testing.T) {
	intT, listT := graph.TypeInt, graph.ListOf(nil)
	fn := func(p, u any) (any, error) { return u, nil }
	tests := []struct {
		name   string
		fields []graph.FieldSpec
		want   errcat.Category
	}{
		{"bounded_append(0)", []graph.FieldSpec{graph.NewDynamicField("f", listT, graph.WithReducer(graph.BoundedAppend(0)))},
			errcat.ReducerConfigurationInvalid},
		{"bounded_append(-1) typed", []graph.FieldSpec{graph.NewListField[int]("f", graph.BoundedAppend(-1))},
			errcat.ReducerConfigurationInvalid},
		{"merge_by_key(nil)", []graph.FieldSpec{graph.NewDynamicField("f", listT, graph.WithReducer(graph.MergeByKey(nil)))},
			errcat.ReducerConfigurationInvalid},
		{"merge_by_key(nil) typed", []graph.FieldSpec{graph.NewListField[item]("f", graph.MergeByKey(nil))},
			errcat.ReducerConfigurationInvalid},
		{"custom without name", []graph.FieldSpec{graph.NewDynamicField("f", intT, graph.WithReducer(graph.CustomReducer("", fn, true)))},
			errcat.ReducerConfigurationInvalid},
		{"custom without function", []graph.FieldSpec{graph.NewDynamicField("f", intT, graph.WithReducer(graph.CustomReducer("c", nil, true)))},
			errcat.ReducerConfigurationInvalid},
		{"append on int field", []graph.FieldSpec{graph.NewDynamicField("f", intT, graph.WithReducer(graph.Append))},
			errcat.ReducerConfigurationInvalid},
		{"merge on list field", []graph.FieldSpec{graph.NewDynamicField("f", listT, graph.WithReducer(graph.Merge))},
			errcat.ReducerConfigurationInvalid},
		{"two reducers on one field", []graph.FieldSpec{graph.NewDynamicField("f", listT,
			graph.WithReducer(graph.Append), graph.WithReducer(graph.DedupeAppend(nil)))}, errcat.ConflictingReducers},
		{"two reducers on a typed field", []graph.FieldSpec{graph.NewListField[int]("f", graph.Append, graph.WithReducer(graph.Append))},
			errcat.ConflictingReducers},
		{"field declared twice with different reducers", []graph.FieldSpec{
			graph.NewDynamicField("f", listT, graph.WithReducer(graph.Append)),
			graph.NewDynamicField("f", listT, graph.WithReducer(graph.ConcatFlatten))}, errcat.ConflictingReducers},
		{"field declared twice", []graph.FieldSpec{graph.NewDynamicField("f", intT), graph.NewField[int]("f")},
			errcat.InvalidGraph},
		{"empty field name", []graph.FieldSpec{graph.NewField[int]("")}, errcat.InvalidGraph},
		{"nil field", []graph.FieldSpec{nil}, errcat.InvalidGraph},
		{"default of wrong type", []graph.FieldSpec{graph.NewDynamicField("f", intT, graph.Default("x"))}, errcat.InvalidGraph},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := graph.NewSchema(tt.fields...)
			if err == nil {
				t.Fatalf("NewSchema succeeded, want %s", tt.want)
			}
			if s != nil {
				t.Errorf("NewSchema returned a schema with an error")
			}
			if got := errcat.Of(err); got != tt.want {
				t.Errorf("errcat.Of(%v) = %q, want %q", err, got, tt.want)
			}
			var ce *graph.CompileError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *graph.CompileError", err)
			}
		})
	}
}

func TestReducerNamesAndIdempotence(t *testing.T) {
	tests := []struct {
		r          graph.Reducer
		name       string
		idempotent bool
	}{
		{graph.Reducer{}, "last_write_wins", true},
		{graph.LastWriteWins, "last_write_wins", true},
		{graph.Append, "append", false},
		{graph.Merge, "merge", true},
		{graph.ConcatFlatten, "concat_flatten", false},
		{graph.MergeAll, "merge_all", false},
		{graph.BoundedAppend(2), "bounded_append", false},
		{graph.DedupeAppend(nil), "dedupe_append", true},
		{graph.MergeByKey(graph.FieldKey("id")), "merge_by_key", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Name(); got != tt.name {
				t.Errorf("Name() = %q, want %q", got, tt.name)
			}
			if got := tt.r.RoundTripIdempotent(); got != tt.idempotent {
				t.Errorf("RoundTripIdempotent() = %v, want %v", got, tt.idempotent)
			}
		})
	}
}

// TestAppendSnapshotImmutability exercises the amortised in-place append:
// a state whose list holds the claimed end of a shared backing array may
// be extended in place, but only once; every other extension must copy.
func TestAppendSnapshotImmutability(t *testing.T) {
	reducers := []graph.Reducer{graph.Append, graph.BoundedAppend(4), graph.DedupeAppend(nil), graph.ConcatFlatten}
	for _, r := range reducers {
		t.Run("dynamic/"+r.Name(), func(t *testing.T) {
			s := mustSchema(t, graph.NewDynamicField("f", graph.ListOf(graph.TypeString), graph.WithReducer(r)))
			upd := func(items ...any) graph.Update {
				if r.Name() == graph.ReducerConcatFlatten {
					return graph.Update{"f": []any{items}}
				}
				return graph.Update{"f": items}
			}
			get := func(st graph.State) []any { v, _ := st.Get("f"); return v.([]any) }
			a := mustMerge(t, s.Defaults(), upd("a1", "a2"))
			b := mustMerge(t, a, upd("b"))  // may extend a's array in place
			c := mustMerge(t, a, upd("c"))  // must not overwrite b's slot
			d := mustMerge(t, b, upd("d"))  // may extend b's array in place
			e := mustMerge(t, b, upd("e"))  // must not overwrite d's slot
			f := mustMerge(t, c, upd("f1")) // c's own array
			want := map[string][]any{
				"a": {"a1", "a2"},
				"b": {"a1", "a2", "b"},
				"c": {"a1", "a2", "c"},
				"d": {"a1", "a2", "b", "d"},
				"e": {"a1", "a2", "b", "e"},
				"f": {"a1", "a2", "c", "f1"},
			}
			got := map[string][]any{"a": get(a), "b": get(b), "c": get(c), "d": get(d), "e": get(e), "f": get(f)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("snapshots changed (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("bounded_append front drop keeps snapshots", func(t *testing.T) {
		h := graph.NewListField[int]("f", graph.BoundedAppend(3))
		s := mustSchema(t, h)
		a := mustMerge(t, s.Defaults(), h.Add(1, 2, 3))
		b := mustMerge(t, a, h.Add(4))
		c := mustMerge(t, a, h.Add(5))
		d := mustMerge(t, b, h.Add(6))
		e := mustMerge(t, b, h.Add(7))
		got := [][]int{h.Get(a), h.Get(b), h.Get(c), h.Get(d), h.Get(e)}
		want := [][]int{{1, 2, 3}, {2, 3, 4}, {2, 3, 5}, {3, 4, 6}, {3, 4, 7}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("snapshots changed (-want +got):\n%s", diff)
		}
	})

	t.Run("typed append", func(t *testing.T) {
		h := graph.NewListField[string]("f", graph.Append)
		s := mustSchema(t, h)
		a := mustMerge(t, s.Defaults(), h.Add("a"))
		b := mustMerge(t, a, h.Add("b"))
		c := mustMerge(t, a, h.Add("c"))
		if diff := cmp.Diff([][]string{{"a"}, {"a", "b"}, {"a", "c"}}, [][]string{h.Get(a), h.Get(b), h.Get(c)}); diff != "" {
			t.Errorf("snapshots changed (-want +got):\n%s", diff)
		}
	})

	t.Run("typed merge maps", func(t *testing.T) {
		h := graph.NewMapField[string, int]("f", graph.Merge)
		s := mustSchema(t, h)
		a := mustMerge(t, s.Defaults(), h.Put("a", 1))
		b := mustMerge(t, a, h.Put("b", 2))
		_ = mustMerge(t, a, h.Put("a", 9))
		if diff := cmp.Diff([]map[string]int{{"a": 1}, {"a": 1, "b": 2}}, []map[string]int{h.Get(a), h.Get(b)}); diff != "" {
			t.Errorf("snapshots changed (-want +got):\n%s", diff)
		}
	})
}

// TestGetResultAppendDoesNotWriteState: appending to a slice read from
// state must never write into memory a snapshot (or a later in-place
// extension) can see.
func TestGetResultAppendDoesNotWriteState(t *testing.T) {
	t.Run("ListField.Get", func(t *testing.T) {
		h := graph.NewListField[string]("f", graph.Append)
		s := mustSchema(t, h)
		a := mustMerge(t, s.Defaults(), h.Add("a"))
		got := h.Get(a)
		if cap(got) != len(got) {
			t.Errorf("Get returned cap %d > len %d", cap(got), len(got))
		}
		evil := append(got, "evil")
		b := mustMerge(t, a, h.Add("b"))
		evil2 := append(h.Get(a), "evil2")
		want := [][]string{{"a"}, {"a", "b"}, {"a", "evil"}, {"a", "evil2"}}
		if diff := cmp.Diff(want, [][]string{h.Get(a), h.Get(b), evil, evil2}); diff != "" {
			t.Errorf("state or reader slices aliased (-want +got):\n%s", diff)
		}
	})
	t.Run("State.Get and State.Map", func(t *testing.T) {
		s := mustSchema(t, graph.NewDynamicField("f", graph.ListOf(nil), graph.WithReducer(graph.Append)))
		a := mustMerge(t, s.Defaults(), graph.Update{"f": []any{1}})
		v, _ := a.Get("f")
		_ = append(v.([]any), "evil")
		_ = append(a.Map()["f"].([]any), "evil")
		b := mustMerge(t, a, graph.Update{"f": []any{2}})
		if got, want := stateJSON(t, a)+stateJSON(t, b), `{"f":[1]}{"f":[1,2]}`; got != want {
			t.Errorf("states = %s, want %s", got, want)
		}
	})
	t.Run("ListField.Get of last_write_wins", func(t *testing.T) {
		h := graph.NewListField[string]("f", graph.LastWriteWins)
		s := mustSchema(t, h)
		a := mustMerge(t, s.Defaults(), h.Set(make([]string, 1, 8)))
		if got := h.Get(a); cap(got) != len(got) {
			t.Errorf("Get returned cap %d > len %d", cap(got), len(got))
		}
	})
}

// TestConcurrentMergesFromSharedPrior merges into one shared prior state
// from many goroutines; at most one may extend the shared array in place,
// and no result may see another's items (run with -race).
func TestConcurrentMergesFromSharedPrior(t *testing.T) {
	for _, r := range []graph.Reducer{graph.Append, graph.BoundedAppend(100), graph.DedupeAppend(nil)} {
		t.Run(r.Name(), func(t *testing.T) {
			s := mustSchema(t, graph.NewDynamicField("f", graph.ListOf(graph.TypeInt), graph.WithReducer(r)))
			prior := mustMerge(t, s.Defaults(), graph.Update{"f": []any{-1}})
			prior = mustMerge(t, prior, graph.Update{"f": []any{-2}}) // now holds a claimable array
			const n = 32
			results := make([]graph.State, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					st := prior
					for j := range 3 {
						var err error
						st, err = st.Merge(graph.Update{"f": []any{i*10 + j}})
						if err != nil {
							t.Error(err)
							return
						}
					}
					results[i] = st
				})
			}
			wg.Wait()
			for i, st := range results {
				got, _ := st.Get("f")
				want := []any{-1, -2, i * 10, i*10 + 1, i*10 + 2}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("goroutine %d (-want +got):\n%s", i, diff)
				}
			}
			if got := stateJSON(t, prior); got != `{"f":[-1,-2]}` {
				t.Errorf("shared prior changed: %s", got)
			}
		})
	}
}
