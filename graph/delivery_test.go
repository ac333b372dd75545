package graph_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
)

// TestDeliveryGoroutinesBounded: with an observer that cannot keep up
// (blocked here until released), invocations do not wait for it and do
// not each leave a goroutine parked behind it: the graph's delivery
// goroutines stay bounded while the backlog waits with its events. Once
// the observer is released every event is delivered, each invocation's
// in order, and Drain returns.
func TestDeliveryGoroutinesBounded(t *testing.T) {
	release := make(chan struct{})
	g, seen := recordedGraph(t, release)
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
	seen.check(t, invocations)
}

// TestDeliveryAcrossIdleGoroutines: invocations started from several
// goroutines, in bursts with pauses between them (so delivery goroutines
// go idle, are woken, and some time out and exit while others are
// claimed), each get every event delivered, in order, and Drain returns.
func TestDeliveryAcrossIdleGoroutines(t *testing.T) {
	released := make(chan struct{})
	close(released)
	g, seen := recordedGraph(t, released)
	const callers, bursts, perBurst = 4, 4, 25
	pauses := []time.Duration{0, 30 * time.Millisecond, 120 * time.Millisecond, time.Millisecond}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for _, p := range pauses[:bursts] {
				time.Sleep(p)
				for range perBurst {
					if _, err := g.Invoke(context.Background(), nil); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen.check(t, callers*bursts*perBurst)
}

// deliveries records node/phase per invocation, in delivery order.
type deliveries struct {
	mu   sync.Mutex
	seen map[string][]string
}

// recordedGraph returns a two-node graph (a, then b) whose observer
// waits for release before recording each event.
func recordedGraph(t *testing.T, release <-chan struct{}) (*graph.Graph, *deliveries) {
	t.Helper()
	n := graph.NewField[int]("n")
	g, err := graph.NewBuilder(graph.MustSchema(n)).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return n.Set(1), nil }).
		AddNode("b", func(context.Context, graph.State) (graph.Update, error) { return n.Set(2), nil }).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	d := &deliveries{seen: map[string][]string{}}
	if _, err := g.AddObserver(func(_ context.Context, ev graph.Event) error {
		<-release
		if e, ok := ev.(*graph.NodeEvent); ok {
			d.mu.Lock()
			d.seen[e.InvocationID] = append(d.seen[e.InvocationID], e.NodeName+"/"+string(e.Phase))
			d.mu.Unlock()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return g, d
}

// check fails t unless the events of n invocations were delivered, each
// invocation's four in order.
func (d *deliveries) check(t *testing.T, n int) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) != n {
		t.Fatalf("events of %d invocations delivered, want %d", len(d.seen), n)
	}
	want := []string{"a/started", "a/completed", "b/started", "b/completed"}
	for id, got := range d.seen {
		if !slices.Equal(got, want) {
			t.Fatalf("%s delivered %v, want %v", id, got, want)
		}
	}
}
