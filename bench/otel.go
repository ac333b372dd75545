package bench

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// Observed returns build with the OTel observer (observe/otelobserver)
// attached to every graph it compiles, as armature serve attaches it:
// its spans go through a batch span processor to a no-op exporter, so a
// turn pays for rendering and recording its spans and nothing leaves
// the process. The tracer provider is shut down when b ends. As on the
// server, the observer renders a turn's events on the graph's delivery
// goroutine, concurrently with the next turns.
func Observed(b testing.TB, build func(Backend) (*graph.Graph, error)) func(Backend) (*graph.Graph, error) {
	b.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	return func(be Backend) (*graph.Graph, error) {
		g, err := build(be)
		if err != nil {
			return nil, err
		}
		if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents(), graph.WithoutTokenEvents()); err != nil {
			return nil, err
		}
		return g, nil
	}
}

// ChatW1Observed is W1 (ChatW1) with the OTel observer installed
// (Observed): what tracing costs a warm turn.
func ChatW1Observed(b *testing.B, be Backend, history int) {
	b.Helper()
	chatW1(b, be, Observed(b, ReplyGraph), history, false)
}

// ChatW3Observed is W3 (ChatW3) with the OTel observer installed
// (Observed): what tracing costs a tool turn.
func ChatW3Observed(b *testing.B, be Backend) {
	b.Helper()
	newSessionTurns(b, be, Observed(b, ToolGraph), "w3-", 3)
}
