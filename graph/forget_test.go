package graph_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// failingDelete is a session store whose Delete fails.
type failingDelete struct{ session.Store }

func (failingDelete) Delete(context.Context, string) error { return errors.New("disk full") }

// DeleteSession calls the WithSessionForget functions of the graph and
// of the graphs it runs as subgraphs, once each, after the session's
// record is deleted; not when the delete fails (the session stays).
func TestDeleteSessionForgets(t *testing.T) {
	var got []string
	forget := func(who string) graph.CompileOption {
		return graph.WithSessionForget(func(id string) { got = append(got, who+":"+id) })
	}
	schema, err := graph.NewSchema(notes)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(ctx context.Context, s graph.State) (graph.Update, error) { return notes.Add("x"), nil }
	sub, err := graph.NewBuilder(schema).AddNode("n", leaf).AddEdge("n", graph.End).SetEntry("n").
		Compile(forget("sub"), graph.WithSessionForget(nil))
	if err != nil {
		t.Fatal(err)
	}
	build := func(store session.Store) *graph.Graph {
		g, err := graph.NewBuilder(schema).
			AddSubgraph("a", sub).AddSubgraph("b", sub). // one graph twice: forgotten once
			AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").
			Compile(graph.WithSessions(graph.SessionConfig{Store: store}), forget("outer"), forget("outer2"))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	if err := build(failingDelete{store}).DeleteSession(ctx, "s1"); err == nil {
		t.Fatal("a failed store delete succeeded")
	}
	if len(got) != 0 {
		t.Fatalf("a failed delete forgot %q", got)
	}
	if err := build(store).DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"outer:s1", "outer2:s1", "sub:s1"}, got); diff != "" {
		t.Fatalf("forgotten (-want +got):\n%s", diff)
	}
}
