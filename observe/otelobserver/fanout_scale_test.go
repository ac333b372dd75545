package otelobserver_test

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// fanOutEvents records the observer events of a fan-out of n instances
// (8 at a time).
func fanOutEvents(tb testing.TB, n int) []graph.Event {
	tb.Helper()
	result := graph.NewField[int]("result")
	results := graph.NewField[[]int]("results")
	leaf, err := graph.NewBuilder(graph.MustSchema(result)).
		AddNode("work", func(context.Context, graph.State) (graph.Update, error) { return result.Set(1), nil }).
		AddEdge("work", graph.End).SetEntry("work").Compile()
	if err != nil {
		tb.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(results)).
		AddFanOut("fan", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(n), CollectField: "result", TargetField: "results", Concurrency: graph.Fixed(8)}).
		AddEdge("fan", graph.End).SetEntry("fan").Compile()
	if err != nil {
		tb.Fatal(err)
	}
	var evs []graph.Event
	rec := func(_ context.Context, ev graph.Event) error { evs = append(evs, ev); return nil }
	if _, err := g.AddObserver(rec, graph.InvocationEvents()); err != nil {
		tb.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		tb.Fatal(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return evs
}

// renderFanOut replays evs into a fresh observer exporting to exp.
func renderFanOut(tb testing.TB, exp sdktrace.SpanExporter, evs []graph.Event) *otelobserver.Observer {
	tb.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		tb.Fatal(err)
	}
	for _, ev := range evs {
		if err := obs.Observe(context.Background(), ev); err != nil {
			tb.Fatal(err)
		}
	}
	return obs
}

// A large fan-out renders completely: the invocation and fan-out node
// spans, each instance's span and its node span under it, none left
// open. Each event finds its span by its lineage in constant time, so
// that such a fan-out renders in time linear in its instances
// (BenchmarkFanOutRendering measures it).
func TestFanOutRenderingLarge(t *testing.T) {
	const n = 5000
	exp := tracetest.NewInMemoryExporter()
	obs := renderFanOut(t, exp, fanOutEvents(t, n))
	if open := obs.OpenSpans(); open != 0 {
		t.Fatalf("%d spans left open", open)
	}
	ss := exp.GetSpans()
	if got := len(ss); got != 2*n+2 {
		t.Fatalf("%d spans, want %d", got, 2*n+2)
	}
	ids := map[string]string{} // span id -> name
	for _, s := range ss {
		ids[s.SpanContext.SpanID().String()] = s.Name
	}
	units := 0
	for _, s := range ss {
		switch s.Name {
		case "work":
			if p := ids[s.Parent.SpanID().String()]; p != "fan" {
				t.Fatalf("a work span's parent is %q, want its instance span (fan)", p)
			}
		case "fan":
			if ids[s.Parent.SpanID().String()] == "fan" {
				units++
			}
		}
	}
	if units != n {
		t.Fatalf("%d instance spans under the fan-out node span, want %d", units, n)
	}
}

// BenchmarkFanOutRendering reports the observer's cost per fan-out
// instance at two sizes: about equal when rendering is linear.
func BenchmarkFanOutRendering(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			evs := fanOutEvents(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				renderFanOut(b, tracetest.NewNoopExporter(), evs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/instance")
		})
	}
}
