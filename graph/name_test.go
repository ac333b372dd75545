package graph_test

import (
	"context"
	"sync"
	"testing"

	"github.com/armature-go/armature/graph"
)

// A named subgraph reports its name and entry node on its SubgraphEvents.
func TestSubgraphEventName(t *testing.T) {
	x := graph.NewField[int]("x")
	tests := []struct{ name, want string }{{"", ""}, {"worker", "worker"}}
	for _, tt := range tests {
		sub := mustCompile(t, graph.NewBuilder(graph.MustSchema(x)).
			AddNode("inner", func(context.Context, graph.State) (graph.Update, error) { return x.Set(1), nil }).
			AddEdge("inner", graph.End).SetEntry("inner"), graph.WithName(tt.name))
		if sub.Name() != tt.want {
			t.Fatalf("Name() = %q, want %q", sub.Name(), tt.want)
		}
		g := mustCompile(t, graph.NewBuilder(graph.MustSchema(x)).AddSubgraph("sub", sub).AddEdge("sub", graph.End).SetEntry("sub"))
		var mu sync.Mutex
		var got []string
		obs := func(_ context.Context, ev graph.Event) error {
			if e, ok := ev.(*graph.SubgraphEvent); ok {
				mu.Lock()
				got = append(got, e.SubgraphName+"/"+e.EntryNode)
				mu.Unlock()
			}
			return nil
		}
		if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(obs, graph.InvocationEvents())); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != tt.want+"/inner" || got[1] != got[0] {
			t.Fatalf("subgraph events %q", got)
		}
	}
}
