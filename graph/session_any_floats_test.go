package graph_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// TestFloatsInAnyKeepTheirTypeCold: float64 values (as JSON decoded with
// encoding/json yields them) stored in a map[string]any session field
// read back as float64 on a cold turn (cache off, another replica, a
// restart) as on a warm one, whole ones and 1e20 included: code doing
// m["k"].(float64) works on both.
func TestFloatsInAnyKeepTheirTypeCold(t *testing.T) {
	ss := session.NewMemoryStore(session.MemoryConfig{})
	meta := graph.NewField[map[string]any]("meta")
	seen := map[string]string{}
	build := func(cache int) *graph.Graph {
		return mustCompile(t, graph.NewBuilder(graph.MustSchema(meta)).
			AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
				m := meta.Get(s)
				if m == nil {
					return meta.Set(map[string]any{"score": 2.0, "big": 1e20, "half": 0.5}), nil
				}
				for k, v := range m {
					seen[k] = fmt.Sprintf("%T", v)
				}
				return nil, nil
			}).AddEdge("a", graph.End).SetEntry("a"),
			graph.WithSessions(graph.SessionConfig{Store: ss, CacheSize: cache}))
	}
	warm := build(0)
	if _, err := warm.Invoke(t.Context(), nil, graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Invoke(t.Context(), nil, graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	warmTypes := fmt.Sprint(seen)
	clear(seen)
	cold := build(-1)
	if _, err := cold.Invoke(t.Context(), nil, graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	coldTypes := fmt.Sprint(seen)
	t.Logf("warm %s cold %s", warmTypes, coldTypes)
	if warmTypes != coldTypes {
		t.Errorf("the float64 values of a map[string]any field change type on a cold turn: warm %s, cold %s", warmTypes, coldTypes)
	}
}
