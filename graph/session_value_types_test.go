package graph_test

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

type valueTypesRec struct {
	A   uint64            `json:"a"`
	B   []byte            `json:"b"`
	T   time.Time         `json:"t"`
	M   map[string]string `json:"m"`
	Any any               `json:"any"`
	Ptr *any              `json:"ptr"`
}

// valueTypesGraph writes (write) or reads into *seen the session fields
// of every kind a typed field admits, with no session cache: each read
// decodes the stored session.
func valueTypesGraph(t *testing.T, st session.Store, write bool, seen *map[string]any) *graph.Graph {
	fu := graph.NewField[uint64]("u")
	fi := graph.NewField[int64]("i")
	ff := graph.NewField[float64]("f")
	fb := graph.NewField[[]byte]("b")
	ft := graph.NewField[time.Time]("tm")
	fm := graph.NewField[map[string]any]("m")
	fn := graph.NewField[map[string]map[string]int]("n")
	fr := graph.NewField[valueTypesRec]("r")
	fl := graph.NewListField[any]("l", graph.Append)
	fs := graph.NewField[map[string][]any]("s")
	g, err := graph.NewBuilder(graph.MustSchema(fu, fi, ff, fb, ft, fm, fn, fr, fl, fs)).
		AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) {
			if write {
				var p any = int64(-7)
				return graph.Update{
					"u": uint64(math.MaxUint64), "i": int64(math.MinInt64), "f": 1.7976931348623157e308,
					"b": []byte{0, 1, 254, 255}, "tm": time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600)),
					"m": map[string]any{"big": uint64(math.MaxUint64), "neg": int64(math.MinInt64), "nil": nil, "nested": map[string]any{"k": 9007199254740993}, "half": 0.5},
					"n": map[string]map[string]int{"a": nil, "b": {"x": 1}},
					"r": valueTypesRec{A: math.MaxUint64, B: []byte("hi"), T: time.Unix(1, 5).UTC(), Any: []any{int64(1) << 60}, Ptr: &p},
					"l": []any{uint64(math.MaxUint64), 1.5, "s", nil, []any{}, map[string]any{"k": int64(9007199254740993)}, json.Number("123456789012345678901234567890")},
					"s": map[string][]any{"x": {9007199254740993, "y"}},
				}, nil
			}
			*seen = s.Map()
			return nil, nil
		}).AddEdge("n", graph.End).SetEntry("n").
		Compile(graph.WithSessions(graph.SessionConfig{Store: st, CacheSize: -1}))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSessionValueTypes: a stored session reads back every value of a
// Go-typed field as written, and the numbers inside its values of type
// any as encoding/json has them (float64), except an integer float64
// cannot hold exactly, which keeps its value (an int, uint64 beyond int,
// json.Number beyond 64 bits) rather than rounded.
func TestSessionValueTypes(t *testing.T) {
	for name, open := range map[string]func() session.Store{
		"memory": func() session.Store { return session.NewMemoryStore(session.MemoryConfig{}) },
		"sqlite": func() session.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close(context.Background()) })
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := open()
			res, err := valueTypesGraph(t, st, true, nil).Invoke(t.Context(), nil, graph.WithSessionID("s1"))
			if err != nil {
				t.Fatal(err)
			}
			wrote := res.State.Map()
			var seen map[string]any
			if _, err := valueTypesGraph(t, st, false, &seen).Invoke(t.Context(), nil, graph.WithSessionID("s1")); err != nil {
				t.Fatal(err)
			}
			// Within any, JSON keeps the number, not its Go type: an
			// int64 float64 holds exactly reads back as a float64, one it
			// would round as an int.
			var p any = -7.0
			want := map[string]any{
				"m": map[string]any{"big": uint64(math.MaxUint64), "neg": float64(math.MinInt64), "nil": nil, "nested": map[string]any{"k": 9007199254740993}, "half": 0.5},
				"r": valueTypesRec{A: math.MaxUint64, B: []byte("hi"), T: time.Unix(1, 5).UTC(), Any: []any{float64(1 << 60)}, Ptr: &p},
				"l": []any{uint64(math.MaxUint64), 1.5, "s", nil, []any{}, map[string]any{"k": 9007199254740993}, json.Number("123456789012345678901234567890")},
				"s": map[string][]any{"x": {9007199254740993, "y"}},
			}
			for k, w := range wrote {
				if e, ok := want[k]; ok {
					w = e
				}
				if k == "tm" { // the zone's name is not JSON's to keep; the instant is
					if !w.(time.Time).Equal(seen[k].(time.Time)) {
						t.Errorf("tm: %v != %v", w, seen[k])
					}
					continue
				}
				if !reflect.DeepEqual(w, seen[k]) {
					t.Errorf("field %s: want %#v, read back %#v", k, w, seen[k])
				}
			}
		})
	}
}

type hiddenAnyInner struct {
	N any `json:"n"`
}

type hiddenAnyRec struct {
	hiddenAnyInner
	M any `json:"m"`
}

// TestSessionValueTypesEmbeddedUnexported: a type whose value of type
// any sits in an embedded unexported struct (which encoding/json fills
// and reflection cannot) still loads, its numbers as json.Unmarshal
// decodes them.
func TestSessionValueTypesEmbeddedUnexported(t *testing.T) {
	st := session.NewMemoryStore(session.MemoryConfig{})
	fr := graph.NewField[hiddenAnyRec]("r")
	var seen hiddenAnyRec
	build := func(write bool) *graph.Graph {
		return mustCompile(t, graph.NewBuilder(graph.MustSchema(fr)).
			AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) {
				if write {
					return fr.Set(hiddenAnyRec{hiddenAnyInner{N: 2}, 3}), nil
				}
				seen = fr.Get(s)
				return nil, nil
			}).AddEdge("n", graph.End).SetEntry("n"),
			graph.WithSessions(graph.SessionConfig{Store: st, CacheSize: -1}))
	}
	if _, err := build(true).Invoke(t.Context(), nil, graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := build(false).Invoke(t.Context(), nil, graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	if seen.N != 2.0 || seen.M != 3.0 {
		t.Errorf("read back %#v, want the numbers as float64", seen)
	}
}
