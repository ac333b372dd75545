package otelobserver_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// Detached subgraphs and fan-outs (§4.4) get traces of their own, rooted
// in an invocation span sharing the invocation id and linked from the
// dispatching span; everything else stays in the invocation's trace.
func TestDetachedTraces(t *testing.T) {
	result := graph.NewField[int]("result")
	results := graph.NewListField[int]("results", graph.Append)
	leaf, err := graph.NewBuilder(graph.MustSchema(result)).
		AddNode("leaf", func(context.Context, graph.State) (graph.Update, error) { return result.Set(1), nil }).
		AddEdge("leaf", graph.End).SetEntry("leaf").Compile(graph.WithName("worker"))
	if err != nil {
		t.Fatal(err)
	}
	build := func() *graph.Graph {
		g, err := graph.NewBuilder(graph.MustSchema(results, result)).
			AddSubgraph("sub", leaf).
			AddFanOut("fan", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(2), CollectField: "result", TargetField: "results"}).
			AddEdge("sub", "fan").AddEdge("fan", graph.End).SetEntry("sub").Compile()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	tests := []struct {
		name      string
		cfg       otelobserver.Config
		traces    int
		subLinks  int
		fanLinks  int
		rootNames []string
	}{
		{name: "default", traces: 1},
		{name: "detached subgraph", cfg: otelobserver.Config{DetachedSubgraphs: []string{"worker"}}, traces: 2, subLinks: 1},
		{name: "detached fan-out", cfg: otelobserver.Config{DetachedFanOuts: []string{"fan"}}, traces: 3, fanLinks: 2},
		{name: "both", cfg: otelobserver.Config{DetachedSubgraphs: []string{"worker"}, DetachedFanOuts: []string{"fan"}}, traces: 4, subLinks: 1, fanLinks: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := tt.cfg
			cfg.TracerProvider = h.tp
			obs, err := otelobserver.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			h.obs = obs
			g := build()
			h.attach(t, g)
			res, err := g.Invoke(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			ss := h.spans(t, g)
			roots := map[trace.TraceID]tracetest.SpanStub{}
			for _, s := range ss {
				if !s.Parent.IsValid() {
					roots[s.SpanContext.TraceID()] = s
				}
			}
			if len(roots) != tt.traces {
				t.Fatalf("%d traces, want %d", len(roots), tt.traces)
			}
			for _, r := range roots {
				if r.Name != otelobserver.InvocationSpanName || attrs(r)[otelobserver.AttrInvocationID].AsString() != res.InvocationID {
					t.Errorf("root %s has invocation id %v", r.Name, attrs(r)[otelobserver.AttrInvocationID])
				}
			}
			// The fan-out node span is always in the parent trace.
			var parent trace.TraceID
			for _, s := range ss {
				if _, ok := attrs(s)[otelobserver.AttrFanOutItemCount]; ok {
					parent = s.SpanContext.TraceID()
				}
			}
			for name, want := range map[string]int{"sub": tt.subLinks, "fan": tt.fanLinks} {
				var links int
				for _, s := range ss {
					if s.Name == name && s.SpanContext.TraceID() == parent {
						links += len(s.Links)
					}
				}
				if links != want {
					t.Errorf("%s: %d links in the parent trace, want %d", name, links, want)
				}
			}
			// Every leaf span sits in a trace whose root is an
			// invocation span (its own trace when detached).
			for _, s := range ss {
				if s.Name == "leaf" {
					if _, ok := roots[s.SpanContext.TraceID()]; !ok {
						t.Errorf("leaf span in a trace without a root")
					}
				}
			}
		})
	}
}
