package otelobserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// A Synchronous OTel observer beside a slow asynchronous one: a drain
// with a timeout, called while the invocation still runs (a shutdown
// with requests in flight), abandons the asynchronous delivery. The
// synchronous observer is still called for the rest of the invocation
// (on the emitting goroutine), with the now cancelled context: its
// trace should stay whole.
func TestSyncObserverAfterDrainTimeout(t *testing.T) {
	h := newHarness(t)
	inA, goOn := make(chan struct{}), make(chan struct{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			close(inA)
			<-goOn
			return graph.Update{"x": 1}, nil
		}).
		AddNode("b", set(2)).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(h.obs.Observe, graph.InvocationEvents(), graph.Synchronous()); err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	defer close(stall)
	slow := func(ctx context.Context, ev graph.Event) error {
		select {
		case <-stall:
		case <-ctx.Done():
		}
		return nil
	}
	if _, err := g.AddObserver(slow); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := g.Invoke(context.Background(), nil); done <- err }()
	<-inA
	sum, err := g.Drain(context.Background(), graph.DrainTimeout(50*time.Millisecond))
	if err != nil || !sum.TimeoutReached {
		t.Fatalf("drain %v %v", sum, err)
	}
	time.Sleep(50 * time.Millisecond) // the abandonment is noticed
	close(goOn)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ss := h.exp.GetSpans()
	var inv, b *int
	for i, s := range ss {
		switch s.Name {
		case otelobserver.InvocationSpanName:
			inv = &i
		case "b":
			b = &i
		}
		t.Logf("span %-28s trace %s parent %s status %v", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), s.Status.Code)
	}
	if inv == nil || b == nil {
		t.Fatalf("spans: invocation %v, b %v", inv != nil, b != nil)
	}
	if ss[*b].SpanContext.TraceID() != ss[*inv].SpanContext.TraceID() {
		t.Fatalf("node b's span (rendered by the synchronous observer after the drain timeout) is in trace %s, not the invocation's %s",
			ss[*b].SpanContext.TraceID(), ss[*inv].SpanContext.TraceID())
	}
	if !ss[*inv].EndTime.After(ss[*b].EndTime) && !ss[*inv].EndTime.Equal(ss[*b].EndTime) {
		t.Fatalf("invocation span ended %v, before node b's end %v", ss[*inv].EndTime, ss[*b].EndTime)
	}
}
