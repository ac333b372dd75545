package otelobserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

func Example() {
	// A private provider; production code would add an OTLP exporter.
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	// Log records emitted with the node's context carry the correlation ids.
	logger := slog.New(otelobserver.LogHandler(slog.NewTextHandler(os.Stderr, nil)))

	n := graph.NewField[int]("n")
	g, err := graph.NewBuilder(graph.MustSchema(n)).
		AddNode("work", func(ctx context.Context, s graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, "working")
			return n.Set(1), nil
		}).
		AddEdge("work", graph.End).
		SetEntry("work").
		Compile()
	if err != nil {
		panic(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		panic(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		panic(err)
	}
	_, _ = g.Drain(context.Background())
	for _, s := range exp.GetSpans() {
		fmt.Println(s.Name, s.Status.Code)
	}
	// Output:
	// work Ok
	// openarmature.invocation Ok
}
