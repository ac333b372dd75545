package langfuse_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
)

// As the OTel attack test: a Synchronous Langfuse observer beside a slow
// async one; a drain timeout while the invocation runs. The synchronous
// observer still receives the rest of the invocation.
func TestLangfuseSyncObserverAfterDrainTimeout(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	inA, goOn := make(chan struct{}), make(chan struct{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			close(inA)
			<-goOn
			return x.Set(1), nil
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
	time.Sleep(50 * time.Millisecond)
	close(goOn)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(stall)
	trs := h.traces(t, g)
	for _, tr := range trs {
		out, _ := json.Marshal(tr.Fields["output"])
		t.Logf("trace %s name=%v output=%s", tr.ID, tr.Fields["name"], out)
		for _, o := range tr.Observations {
			t.Logf("  root obs %s level=%v end=%v children=%d", o.Name(), o.Fields["level"], o.Fields["endTime"] != nil, len(o.Children))
		}
	}
	if len(trs) != 1 || len(trs[0].Observations) != 2 {
		t.Fatalf("want one trace with observations a and b")
	}
	if trs[0].Fields["output"] == nil {
		t.Fatalf("the trace has no output: the completed event was not rendered")
	}
}
