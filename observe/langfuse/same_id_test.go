package langfuse_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// Two concurrent invocations with the same caller-supplied id (the engine
// supports them: graph.WithInvocationID, one delivery worker each) keep
// separate states in the observer, keyed by invocation and delivery:
// each gets its span observations and its final trace-create (output,
// status), and none is left open.
func TestConcurrentSameInvocationID(t *testing.T) {
	rec := &langfusetest.Recorder{}
	obs, err := langfuse.New(langfuse.Config{Exporter: rec})
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
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
	spans, outputs := 0, 0
	for _, ev := range rec.Events() {
		switch ev.Type {
		case string(langfuse.SpanCreate):
			spans++
		case string(langfuse.TraceCreate):
			if _, ok := ev.Body["output"]; ok {
				outputs++
			}
		}
	}
	if spans != 4 || outputs != 2 || obs.OpenObservations() != 0 {
		t.Fatalf("two invocations of nodes a, b: %d span-creates (want 4), %d final trace-creates (want 2), %d observations left open", spans, outputs, obs.OpenObservations())
	}
}
