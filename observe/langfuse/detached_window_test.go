package langfuse_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// §4.1: each detached fan-out instance's trace matches its own
// instance's window. The instance observation rooting a detached trace
// ends with the instance's last node, not with the fan-out node: a 1 ms
// instance that ran beside a 300 ms one does not show as lasting the
// whole fan-out.
func TestDetachedFanOutInstanceWindow(t *testing.T) {
	var calls atomic.Int32
	result := graph.NewField[int]("result")
	results := graph.NewListField[int]("results", graph.Append)
	leaf, err := graph.NewBuilder(graph.MustSchema(result)).
		AddNode("leaf", func(context.Context, graph.State) (graph.Update, error) {
			if calls.Add(1) == 2 { // the second instance to run is slow
				time.Sleep(300 * time.Millisecond)
			}
			return result.Set(1), nil
		}).
		AddEdge("leaf", graph.End).SetEntry("leaf").Compile(graph.WithName("worker"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(results, result)).
		AddFanOut("fan", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(2), CollectField: "result", TargetField: "results", Unbounded: true}).
		AddEdge("fan", graph.End).SetEntry("fan").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, langfuse.Config{DetachedFanOuts: []string{"fan"}})
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	trs := h.traces(t, g)
	if len(trs) != 3 {
		t.Fatalf("%d traces, want the parent and one per instance", len(trs))
	}
	at := func(o *langfusetest.Observation, field string) time.Time {
		s, _ := o.Fields[field].(string)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("%s of %s: %q", field, o.Name(), s)
		}
		return tm
	}
	fanEnd := at(trs[0].Observations[0], "endTime")
	fast := 0
	for _, tr := range trs[1:] {
		inst := tr.Observations[0]
		leafEnd := at(inst.Children[0], "endTime")
		if got := at(inst, "endTime"); !got.Equal(leafEnd) {
			t.Errorf("a detached instance observation ends at %v, its last node at %v (the fan-out node at %v)", got, leafEnd, fanEnd)
		}
		if fanEnd.Sub(leafEnd) > 150*time.Millisecond {
			fast++
		}
	}
	if fast != 1 {
		t.Fatalf("%d fast instances, want 1", fast)
	}
}
