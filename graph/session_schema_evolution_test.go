package graph_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/store/sqlite"
)

// TestSessionSchemaEvolution: a field removed, added, or narrowed
// between a write and a read of one session (no version bump).
func TestSessionSchemaEvolution(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	noop := func(context.Context, graph.State) (graph.Update, error) { return nil, nil }
	mk := func(fields ...graph.FieldSpec) *graph.Graph {
		return mustCompile(t, graph.NewBuilder(graph.MustSchema(fields...)).AddNode("n", noop).AddEdge("n", graph.End).SetEntry("n"),
			graph.WithSessions(graph.SessionConfig{Store: st, CacheSize: -1}))
	}
	g1 := mk(graph.NewField[int]("a"), graph.NewField[int]("gone"), graph.NewListField[string]("l", graph.Append))
	if _, err := g1.Invoke(t.Context(), graph.Update{"a": 5, "gone": 7, "l": []string{"x"}}, graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	// removed field + added field
	g2 := mk(graph.NewField[int]("a"), graph.NewField[string]("new"), graph.NewListField[string]("l", graph.Append))
	res, err := g2.Invoke(t.Context(), graph.Update{"l": []string{"y"}}, graph.WithSessionID("s"))
	t.Logf("g2: %v %v", res.State.Map(), err)
	if err != nil {
		t.Errorf("g2: %v", err)
	}
	// narrowed type
	g3 := mk(graph.NewField[string]("a"), graph.NewListField[string]("l", graph.Append))
	res, err = g3.Invoke(t.Context(), nil, graph.WithSessionID("s"))
	t.Logf("g3: %v (%s)", err, errcat.Of(err))
	if err == nil {
		t.Logf("g3 state %v", res.State.Map())
	}
	// back to the original: is "gone" still there?
	res, err = g1.Invoke(t.Context(), nil, graph.WithSessionID("s"))
	t.Logf("g1 again: %v %v", res.State.Map(), err)
}
