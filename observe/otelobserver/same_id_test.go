package otelobserver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The engine runs two invocations with the same caller-supplied id side
// by side (graph.WithInvocationID; its drain keeps a chain of workers
// per id). The observer keys its state by invocation and delivery, so
// each invocation's span is ended and exported and its node spans nest
// under it.
func TestConcurrentSameInvocationID(t *testing.T) {
	h := newHarness(t)
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) {
			time.Sleep(100 * time.Millisecond)
			return x.Set(1), nil
		}).
		AddNode("b", set(2)).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 30 * time.Millisecond)
			if _, err := g.Invoke(context.Background(), nil, graph.WithInvocationID("order-42-attempt")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	ss := h.exp.GetSpans()
	inv, roots := 0, 0
	for _, s := range ss {
		if s.Name == otelobserver.InvocationSpanName {
			inv++
		} else if !s.Parent.IsValid() {
			roots++
		}
	}
	if inv != 2 || roots != 0 || h.obs.OpenSpans() != 0 {
		t.Fatalf("two invocations exported %d invocation spans, %d parentless node spans, %d spans left open (want 2, 0, 0)", inv, roots, h.obs.OpenSpans())
	}
}
