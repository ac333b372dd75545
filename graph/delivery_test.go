package graph_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/armature-go/armature/graph"
)

// TestDeliveryGoroutinesBounded: with an observer that cannot keep up
// (blocked here until released), invocations do not wait for it and do
// not each leave a goroutine parked behind it: the graph's delivery
// goroutines stay bounded while the backlog waits with its events. Once
// the observer is released every event is delivered, each invocation's
// in order, and Drain returns.
func TestDeliveryGoroutinesBounded(t *testing.T) {
	n := graph.NewField[int]("n")
	g, err := graph.NewBuilder(graph.MustSchema(n)).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return n.Set(1), nil }).
		AddNode("b", func(context.Context, graph.State) (graph.Update, error) { return n.Set(2), nil }).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[string][]string{} // invocation → node/phase, in delivery order
	if _, err := g.AddObserver(func(_ context.Context, ev graph.Event) error {
		<-release
		if e, ok := ev.(*graph.NodeEvent); ok {
			mu.Lock()
			seen[e.InvocationID] = append(seen[e.InvocationID], e.NodeName+"/"+string(e.Phase))
			mu.Unlock()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const invocations = 1000
	for range invocations {
		if _, err := g.Invoke(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The bound is the graph's delivery pool (64), not the backlog.
	if got := runtime.NumGoroutine() - before; got > 80 {
		t.Errorf("%d goroutines for %d invocations behind a blocked observer", got, invocations)
	}
	close(release)
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != invocations {
		t.Fatalf("events of %d invocations delivered, want %d", len(seen), invocations)
	}
	want := []string{"a/started", "a/completed", "b/started", "b/completed"}
	for id, got := range seen {
		if len(got) != len(want) {
			t.Fatalf("%s: %v", id, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s delivered %v, want %v", id, got, want)
			}
		}
	}
}
