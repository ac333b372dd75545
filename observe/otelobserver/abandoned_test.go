package otelobserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// Graph.Drain with DrainTimeout abandons the pending deliveries of a
// slow invocation and "the graph stays usable" (the pattern the graph
// docs recommend to serverless functions, whose process is reused). The
// observer learns it (the delivery context it was given is cancelled)
// and ends the abandoned invocation's open spans, rather than keeping
// its state and spans for the life of the process, never exported.
func TestAbandonedDeliveryEndsOpenSpans(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", set(1)).AddNode("b", set(2)).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	// A slow observer after the OTel one: a recorder writing to a
	// database that stalls on node b's start.
	slow := func(ctx context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.NodeEvent); ok && e.NodeName == "b" && e.Phase == graph.PhaseStarted {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	if _, err := g.AddObserver(slow); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	sum, err := g.Drain(context.Background(), graph.DrainTimeout(100*time.Millisecond))
	if err != nil || !sum.TimeoutReached {
		t.Fatalf("drain %v %v", sum, err)
	}
	close(release)
	time.Sleep(100 * time.Millisecond)
	if n := h.obs.OpenSpans(); n != 0 {
		t.Fatalf("after the abandoned delivery the observer holds %d spans open forever; exported %d spans, none of them the invocation span",
			n, len(h.exp.GetSpans()))
	}
	_ = otelobserver.InvocationSpanName
}
