package graph_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func TestParseType(t *testing.T) {
	person := graph.RecordOf("Person", map[string]graph.Type{"name": graph.TypeString})
	records := map[string]graph.Type{"Person": person}
	tests := []struct {
		in      string
		records map[string]graph.Type
		want    string // String() of the parsed type; "" means a parse error
	}{
		{in: "string", want: "string"},
		{in: "str", want: "string"},
		{in: "int", want: "int"},
		{in: "integer", want: "int"},
		{in: "float", want: "float"},
		{in: "number", want: "float"},
		{in: "bool", want: "bool"},
		{in: "boolean", want: "bool"},
		{in: "any", want: "any"},
		{in: "Any", want: "any"},
		{in: "list", want: "list"},
		{in: "list<int>", want: "list<int>"},
		{in: "list[str]", want: "list<string>"},
		{in: " list < int > ", want: "list<int>"},
		{in: "dict", want: "dict"},
		{in: "record", want: "dict"},
		{in: "dict<string,int>", want: "dict<string,int>"},
		{in: "dict[str, list<int>]", want: "dict<string,list<int>>"},
		{in: "dict<any,int>", want: "dict<any,int>"},
		{in: "record_map<string,any>", want: "dict<string,any>"},
		{in: "list<dict<string,list<list[bool]>>>", want: "list<dict<string,list<list<bool>>>>"},
		{in: "list<Person>", records: records, want: "list<Person>"},
		{in: "dict<str,Person>", records: records, want: "dict<string,Person>"},

		{in: ""},
		{in: "   "},
		{in: "lst"},
		{in: "Person"},
		{in: "list<"},
		{in: "list<int"},
		{in: "list<int]"},
		{in: "list<>"},
		{in: "list<int>>"},
		{in: "int extra"},
		{in: "\tint"},
		{in: "dict<string>"},
		{in: "dict<string,int"},
		{in: "dict<int,int>"},
		{in: "dict<list,int>"},
		{in: "list<list<nope>>"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			typ, err := graph.ParseType(tt.in, tt.records)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseType(%q) = %v, want an error", tt.in, typ)
				}
				if typ != nil {
					t.Errorf("ParseType returned a type with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseType(%q): %v", tt.in, err)
			}
			if got := typ.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			again, err := graph.ParseType(typ.String(), tt.records)
			if err != nil || again.String() != tt.want {
				t.Errorf("re-parse of %q = %v, %v", typ.String(), again, err)
			}
		})
	}
}

func TestTypeCheck(t *testing.T) {
	person := graph.RecordOf("Person", map[string]graph.Type{"name": graph.TypeString, "age": graph.TypeInt})
	tests := []struct {
		name string
		typ  graph.Type
		in   any
		want any // canonical value; ignored when wantErr
		err  bool
	}{
		{"int/int", graph.TypeInt, 3, 3, false},
		{"int/int64", graph.TypeInt, int64(3), 3, false},
		{"int/uint16", graph.TypeInt, uint16(3), 3, false},
		{"int/integral float", graph.TypeInt, 2.0, 2, false},
		{"int/json number", graph.TypeInt, json.Number("7"), 7, false},
		{"int/fraction", graph.TypeInt, 2.5, nil, true},
		{"int/string", graph.TypeInt, "1", nil, true},
		{"int/bool", graph.TypeInt, true, nil, true},
		{"int/null", graph.TypeInt, nil, nil, true},
		{"int/uint64 overflow", graph.TypeInt, uint64(math.MaxUint64), nil, true},
		{"float/int", graph.TypeFloat, 1, 1.0, false},
		{"float/float32", graph.TypeFloat, float32(1.5), 1.5, false},
		{"float/json number", graph.TypeFloat, json.Number("1.5"), 1.5, false},
		{"float/NaN", graph.TypeFloat, math.NaN(), nil, true},
		{"float/Inf", graph.TypeFloat, math.Inf(1), nil, true},
		{"float/out of range json number", graph.TypeFloat, json.Number("1e400"), nil, true},
		{"float/string", graph.TypeFloat, "1", nil, true},
		{"string/string", graph.TypeString, "s", "s", false},
		{"string/int", graph.TypeString, 1, nil, true},
		{"bool/bool", graph.TypeBool, false, false, false},
		{"bool/string", graph.TypeBool, "true", nil, true},
		{"any/normalises", graph.TypeAny, []any{int8(1), json.Number("2.5"), map[string]int{"a": 1}},
			[]any{1, 2.5, map[string]any{"a": 1}}, false},
		{"any/NaN nested", graph.TypeAny, map[string]any{"a": []any{math.NaN()}}, nil, true},
		{"list/go slice", graph.ListOf(graph.TypeInt), []int64{1, 2}, []any{1, 2}, false},
		{"list/nil slice", graph.ListOf(graph.TypeInt), []any(nil), []any{}, false},
		{"list/element mismatch", graph.ListOf(graph.TypeInt), []any{1, "2"}, nil, true},
		{"list/not a list", graph.ListOf(nil), "x", nil, true},
		{"dict/go map", graph.DictOf(graph.TypeString, graph.TypeInt), map[string]int64{"a": 1}, map[string]any{"a": 1}, false},
		{"dict/value mismatch", graph.DictOf(nil, graph.TypeInt), map[string]any{"a": "x"}, nil, true},
		{"dict/non-string keys", graph.DictOf(nil, nil), map[int]any{1: 1}, nil, true},
		{"record/ok", person, map[string]any{"name": "n", "age": json.Number("3")}, map[string]any{"name": "n", "age": 3}, false},
		{"record/undeclared key", person, map[string]any{"nick": "n"}, nil, true},
		{"record/field mismatch", person, map[string]any{"age": "x"}, nil, true},
		{"any/too deep", graph.TypeAny, deepList(300), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.typ.Check(tt.in)
			if tt.err {
				if err == nil {
					t.Fatalf("Check(%#v) = %#v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check(%#v): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("canonical value (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTypeIntAcceptsIntegralJSONNumber(t *testing.T) {
	for _, n := range []json.Number{"2.0", "2e0"} {
		if got, err := graph.TypeInt.Check(n); err != nil || got != 2 {
			t.Errorf("TypeInt.Check(%q) = %v, %v; want 2", n, got, err)
		}
	}
}

func deepList(n int) any {
	var v any = 1
	for range n {
		v = []any{v}
	}
	return v
}

// checkStateErr asserts err is a *graph.StateError naming field.
func checkStateErr(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want a *graph.StateError")
	}
	var se *graph.StateError
	if !errors.As(err, &se) {
		t.Fatalf("error %T (%v) is not a *graph.StateError", err, err)
	}
	if se.Field != field {
		t.Errorf("StateError.Field = %q, want %q", se.Field, field)
	}
	if errcat.Of(err) != errcat.StateValidationError || !errors.Is(err, errcat.StateValidationError) {
		t.Errorf("category = %q, want state_validation_error", errcat.Of(err))
	}
}

func newTestSchema(t *testing.T) *graph.Schema {
	return mustSchema(t,
		graph.NewDynamicField("name", graph.TypeString, graph.Default("anon")),
		graph.NewDynamicField("n", graph.TypeInt),
		graph.NewDynamicField("x", graph.TypeFloat),
		graph.NewDynamicField("ok", graph.TypeBool),
		graph.NewDynamicField("blob", graph.TypeAny),
		graph.NewDynamicField("log", mustType(t, "list<string>"), graph.WithReducer(graph.Append)),
		graph.NewDynamicField("meta", mustType(t, "dict<string,any>"), graph.WithReducer(graph.Merge)),
	)
}

func TestSchemaNew(t *testing.T) {
	s := newTestSchema(t)
	if diff := cmp.Diff([]string{"name", "n", "x", "ok", "blob", "log", "meta"}, s.Fields()); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
	if !s.Has("log") || s.Has("nope") {
		t.Errorf("Has: log=%v nope=%v", s.Has("log"), s.Has("nope"))
	}
	if got := s.Type("log").String(); got != "list<string>" {
		t.Errorf("Type(log) = %s", got)
	}
	if s.Type("nope") != nil {
		t.Errorf("Type(nope) != nil")
	}
	if r, ok := s.Reducer("log"); !ok || r.Name() != "append" {
		t.Errorf("Reducer(log) = %v, %v", r.Name(), ok)
	}
	if got, want := stateJSON(t, s.Defaults()), `{"name":"anon","n":0,"x":0,"ok":false,"blob":null,"log":[],"meta":{}}`; got != want {
		t.Errorf("Defaults = %s, want %s", got, want)
	}

	tests := []struct {
		name     string
		init     graph.Update
		want     string
		badField string
	}{
		{name: "nil input is the defaults", init: nil,
			want: `{"name":"anon","n":0,"x":0,"ok":false,"blob":null,"log":[],"meta":{}}`},
		{name: "fields set directly, not through reducers",
			init: graph.Update{"log": []string{"a"}, "meta": map[string]any{"k": 1}, "n": int64(4), "x": 1},
			want: `{"name":"anon","n":4,"x":1,"ok":false,"blob":null,"log":["a"],"meta":{"k":1}}`},
		{name: "any field normalised", init: graph.Update{"blob": []int{1}},
			want: `{"name":"anon","n":0,"x":0,"ok":false,"blob":[1],"log":[],"meta":{}}`},
		{name: "undeclared field", init: graph.Update{"nope": 1}, badField: "nope"},
		{name: "wrong type", init: graph.Update{"n": "x"}, badField: "n"},
		{name: "wrong element type", init: graph.Update{"log": []any{1}}, badField: "log"},
		{name: "first bad field in name order", init: graph.Update{"ok": 1, "n": "x"}, badField: "n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := s.New(tt.init)
			if tt.badField != "" {
				checkStateErr(t, err, tt.badField)
				if !st.IsZero() {
					t.Errorf("failed New returned a non-zero state")
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := stateJSON(t, st); got != tt.want {
				t.Errorf("state = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestZeroState(t *testing.T) {
	var z graph.State
	if !z.IsZero() || z.Schema() != nil || z.Map() != nil {
		t.Errorf("zero State: IsZero=%v Schema=%v Map=%v", z.IsZero(), z.Schema(), z.Map())
	}
	if _, ok := z.Get("x"); ok {
		t.Errorf("zero State Get reported a field")
	}
	if got := stateJSON(t, z); got != "null" {
		t.Errorf("zero State JSON = %s", got)
	}
	s := newTestSchema(t)
	if st := s.Defaults(); st.IsZero() || st.Schema() != s {
		t.Errorf("Defaults() is zero or has another schema")
	}
	if _, ok := s.Defaults().Get("nope"); ok {
		t.Errorf("Get of an undeclared field reported ok")
	}
}

func TestStateJSONRoundTrip(t *testing.T) {
	type point struct{ X, Y int }
	num := graph.NewField[int]("num")
	pt := graph.NewField[point]("pt")
	names := graph.NewListField[string]("names", graph.Append)
	pts := graph.NewListField[point]("pts", graph.MergeByKey(graph.FieldKey("X")))
	counts := graph.NewMapField[string, int]("counts", graph.Merge)
	opt := graph.NewField[*string]("opt")

	tests := []struct {
		name    string
		schema  func(t *testing.T) *graph.Schema
		updates []graph.Update
		want    string
	}{
		{
			name:   "dynamic",
			schema: newTestSchema,
			updates: []graph.Update{
				{"name": "bob", "n": 3, "x": 2.5, "ok": true, "blob": map[string]any{"a": []any{1, "b", nil, 1.5}}},
				{"log": []any{"a", "b"}, "meta": map[string]any{"k": map[string]any{"deep": true}}},
				{"log": []any{"c"}},
			},
			want: `{"name":"bob","n":3,"x":2.5,"ok":true,"blob":{"a":[1,"b",null,1.5]},"log":["a","b","c"],"meta":{"k":{"deep":true}}}`,
		},
		{
			name:    "dynamic defaults",
			schema:  newTestSchema,
			updates: nil,
			want:    `{"name":"anon","n":0,"x":0,"ok":false,"blob":null,"log":[],"meta":{}}`,
		},
		{
			name:   "typed",
			schema: func(t *testing.T) *graph.Schema { return mustSchema(t, num, pt, names, pts, counts, opt) },
			updates: []graph.Update{
				num.Set(7).With(pt.Set(point{1, 2}), names.Add("x"), pts.Add(point{1, 1}, point{2, 2}), counts.Put("a", 1)),
				names.Add("y").With(pts.Add(point{1, 9}), counts.Put("b", 2)),
			},
			want: `{"num":7,"pt":{"X":1,"Y":2},"names":["x","y"],"pts":[{"X":1,"Y":9},{"X":2,"Y":2}],"counts":{"a":1,"b":2},"opt":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.schema(t)
			st := s.Defaults()
			for _, u := range tt.updates {
				st = mustMerge(t, st, u)
			}
			enc := stateJSON(t, st)
			if enc != tt.want {
				t.Errorf("MarshalJSON = %s\nwant          %s", enc, tt.want)
			}
			back, err := s.DecodeState([]byte(enc))
			if err != nil {
				t.Fatalf("DecodeState: %v", err)
			}
			if got := stateJSON(t, back); got != enc {
				t.Errorf("round trip = %s, want %s", got, enc)
			}
			if diff := cmp.Diff(st.Map(), back.Map()); diff != "" {
				t.Errorf("decoded values differ (-merged +decoded):\n%s", diff)
			}
			// The decoded state keeps merging through the reducers.
			if _, err := back.Merge(graph.Update{}); err != nil {
				t.Errorf("Merge on decoded state: %v", err)
			}
		})
	}
	t.Run("decoded list keeps appending", func(t *testing.T) {
		s := newTestSchema(t)
		back, err := s.DecodeState([]byte(`{"log":["a"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := stateJSON(t, mustMerge(t, back, graph.Update{"log": []any{"b"}})); got !=
			`{"name":"anon","n":0,"x":0,"ok":false,"blob":null,"log":["a","b"],"meta":{}}` {
			t.Errorf("got %s", got)
		}
	})
}

func TestDecodeStateErrors(t *testing.T) {
	num := graph.NewField[int]("num")
	names := graph.NewListField[string]("names", graph.Append)
	typed := mustSchema(t, num, names)
	dyn := newTestSchema(t)
	tests := []struct {
		name   string
		schema *graph.Schema
		in     string
		field  string
	}{
		{"dynamic/unknown field", dyn, `{"nope":1}`, "nope"},
		{"dynamic/wrong type", dyn, `{"n":"x"}`, "n"},
		{"dynamic/fractional int", dyn, `{"n":1.5}`, "n"},
		{"dynamic/wrong element type", dyn, `{"log":[1]}`, "log"},
		{"dynamic/null for a list", dyn, `{"log":null}`, "log"},
		{"dynamic/out of range float", dyn, `{"x":1e400}`, "x"},
		{"dynamic/too deep", dyn, `{"blob":` + jsonOf(t, deepList(300)) + `}`, "blob"},
		{"typed/unknown field", typed, `{"num":1,"zzz":2}`, "zzz"},
		{"typed/wrong type", typed, `{"num":"1"}`, "num"},
		{"typed/wrong element type", typed, `{"names":[1]}`, "names"},
		{"malformed", dyn, `{"n":`, ""},
		{"not an object", dyn, `[1]`, ""},
		{"empty", dyn, ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := tt.schema.DecodeState([]byte(tt.in))
			checkStateErr(t, err, tt.field)
			if !st.IsZero() {
				t.Errorf("failed DecodeState returned a non-zero state")
			}
		})
	}
	t.Run("missing fields take defaults", func(t *testing.T) {
		st, err := dyn.DecodeState([]byte(`{"n":2}`))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := stateJSON(t, st), `{"name":"anon","n":2,"x":0,"ok":false,"blob":null,"log":[],"meta":{}}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

func TestUpdateWith(t *testing.T) {
	tests := []struct {
		name   string
		base   graph.Update
		others []graph.Update
		want   graph.Update
	}{
		{"nil base", nil, []graph.Update{{"a": 1}, {"b": 2}}, graph.Update{"a": 1, "b": 2}},
		{"nil base no others", nil, nil, graph.Update{}},
		{"later wins", graph.Update{"a": 1}, []graph.Update{{"a": 2}, {"a": 3, "b": 1}}, graph.Update{"a": 3, "b": 1}},
		{"nil others", graph.Update{"a": 1}, []graph.Update{nil}, graph.Update{"a": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.base.With(tt.others...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("With (-want +got):\n%s", diff)
			}
			if tt.base != nil {
				got["marker"] = true
				if _, ok := tt.base["marker"]; !ok {
					t.Errorf("With on a non-nil Update did not return the receiver")
				}
			}
		})
	}
}
