package langfuse_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
)

type nopExporter struct{ n int }

func (e *nopExporter) Export(evs []langfuse.Event) { e.n += len(evs) }

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

// render replays evs into a fresh observer and returns its exporter.
func render(tb testing.TB, obs *langfuse.Observer, evs []graph.Event) {
	tb.Helper()
	for _, ev := range evs {
		if err := obs.Observe(context.Background(), ev); err != nil {
			tb.Fatal(err)
		}
	}
}

// A large fan-out renders completely: every instance's observations
// (its instance span and its node span, created and ended) and the
// fan-out node's, none left open. Each event finds its observation by
// its lineage in constant time, so that such a fan-out renders in time
// linear in its instances (BenchmarkFanOutRendering measures it).
func TestFanOutRenderingLarge(t *testing.T) {
	const n = 5000
	evs := fanOutEvents(t, n)
	exp := &nopExporter{}
	obs, err := langfuse.New(langfuse.Config{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	render(t, obs, evs)
	if n := obs.OpenObservations(); n != 0 {
		t.Fatalf("%d observations left open", n)
	}
	// 2 trace-creates, and a span-create and span-update for the fan-out
	// node, each instance span and each instance's node span.
	if want := 2 + 2*(1+2*n); exp.n != want {
		t.Fatalf("%d events exported, want %d", exp.n, want)
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
				obs, err := langfuse.New(langfuse.Config{Exporter: &nopExporter{}})
				if err != nil {
					b.Fatal(err)
				}
				render(b, obs, evs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/instance")
		})
	}
}
