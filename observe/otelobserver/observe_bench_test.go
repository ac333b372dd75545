package otelobserver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// BenchmarkObserve renders the events of a one-node invocation (W1's
// shape: an invocation span and a node span) synchronously, through a
// batch span processor to a no-op exporter: the observer's own cost per
// turn, without the engine's.
func BenchmarkObserve(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ns := []string{"reply"}
	now := time.Now()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		id := "inv-" + strconv.Itoa(i)
		evs := [...]graph.Event{
			&graph.InvocationEvent{Phase: graph.PhaseStarted, EntryNode: "reply", InvocationID: id, CorrelationID: "c", SessionID: "s", Time: now},
			&graph.NodeEvent{Phase: graph.PhaseStarted, NodeName: "reply", Namespace: ns, ParentStates: []graph.State{}, InvocationID: id, CorrelationID: "c", Time: now},
			&graph.NodeEvent{Phase: graph.PhaseCompleted, NodeName: "reply", Namespace: ns, ParentStates: []graph.State{}, InvocationID: id, CorrelationID: "c", Time: now},
			&graph.InvocationEvent{Phase: graph.PhaseCompleted, Status: graph.Completed, EntryNode: "reply", InvocationID: id, CorrelationID: "c", SessionID: "s", Time: now},
		}
		for _, ev := range evs {
			if err := obs.Observe(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
