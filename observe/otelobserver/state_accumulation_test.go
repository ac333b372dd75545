package otelobserver_test

import (
	"context"
	"runtime"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The observer's per-invocation state (and its context.AfterFunc
// registrations) is released when an invocation's delivery ends: the
// live heap after 20,000 invocations is within 1 MiB of the heap after
// 2,000 (about 50 bytes an invocation), for asynchronous and Synchronous
// observers, with and without invocation events, and no span is left
// open.
func TestObserverStateDoesNotAccumulate(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	cases := []struct {
		name string
		opts []graph.ObserverOption
	}{
		{"async", []graph.ObserverOption{graph.InvocationEvents()}},
		{"sync", []graph.ObserverOption{graph.InvocationEvents(), graph.Synchronous()}},
		{"async-noinv", nil},
		{"sync-noinv", []graph.ObserverOption{graph.Synchronous()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp := sdktrace.NewTracerProvider()
			defer tp.Shutdown(context.Background())
			obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.NewBuilder(graph.MustSchema(x)).
				AddNode("a", set(1)).AddNode("b", set(2)).
				AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.AddObserver(obs.Observe, c.opts...); err != nil {
				t.Fatal(err)
			}
			run := func(n int) {
				for i := 0; i < n; i++ {
					if _, err := g.Invoke(context.Background(), nil); err != nil {
						t.Fatal(err)
					}
					if i%1000 == 999 {
						_, _ = g.Drain(context.Background())
					}
				}
				_, _ = g.Drain(context.Background())
			}
			run(2000)
			h1 := liveHeap()
			run(18000)
			h2 := liveHeap()
			t.Logf("%s: heap after 2k %d KiB, after 20k %d KiB, open spans %d", c.name, h1>>10, h2>>10, obs.OpenSpans())
			if obs.OpenSpans() != 0 {
				t.Errorf("open spans %d", obs.OpenSpans())
			}
			if h2 > h1+1<<20 {
				t.Errorf("heap grew %d KiB over 18,000 invocations", (h2-h1)>>10)
			}
		})
	}
}
