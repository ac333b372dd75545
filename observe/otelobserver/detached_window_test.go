package otelobserver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// §4.1: "for a detached fan-out, each per-instance detached invocation
// span matches its own instance's window — a sub-window of the parent's
// fan-out node span". A detached instance's invocation span (and its
// instance span) end with the instance's last span, not with the
// fan-out node: a 1 ms instance that ran beside a 300 ms one does not
// show as lasting the whole fan-out.
func TestDetachedFanOutInstanceWindow(t *testing.T) {
	var calls atomic.Int32
	result := graph.NewField[int]("result")
	results := graph.NewListField[int]("results", graph.Append)
	leaf, err := graph.NewBuilder(graph.MustSchema(result)).
		AddNode("leaf", func(ctx context.Context, _ graph.State) (graph.Update, error) {
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
	h := newHarness(t)
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: h.tp, DetachedFanOuts: []string{"fan"}})
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ss := h.spans(t, g)
	fan := byName(t, ss, "fan")
	// The leaf span of instance 0 and the detached invocation span of its trace.
	for _, s := range ss {
		if s.Name != "leaf" || s.EndTime.Sub(s.StartTime) > 100*time.Millisecond {
			continue // the fast instance's leaf only
		}
		leafEnd := s.EndTime
		for _, r := range ss {
			if r.Name == otelobserver.InvocationSpanName && r.SpanContext.TraceID() == s.SpanContext.TraceID() {
				if r.EndTime.Sub(leafEnd) > 150*time.Millisecond {
					t.Fatalf("the fast instance's work ended at +%v, but its detached invocation span ends at +%v (the fan-out node ends at +%v)",
						leafEnd.Sub(fan.StartTime), r.EndTime.Sub(fan.StartTime), fan.EndTime.Sub(fan.StartTime))
				}
				return
			}
		}
		t.Fatal("no detached invocation span for the fast instance")
	}
	t.Fatal("no fast leaf span")
}
