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

// Caller metadata on every span, a detached subgraph in a trace of its
// own, and node logs carrying the span they were logged in.
func ExampleObserver_LogHandler() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp, DetachedSubgraphs: []string{"enrich"}})
	if err != nil {
		panic(err)
	}
	// Drop the time and the (random) ids to keep the output stable.
	logger := slog.New(obs.LogHandler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, otelobserver.AttrInvocationID, otelobserver.AttrCorrelationID:
				return slog.Attr{}
			case otelobserver.LogTraceID, otelobserver.LogSpanID:
				a.Value = slog.StringValue(fmt.Sprintf("<%d hex digits>", len(a.Value.String())))
			}
			return a
		},
	})))
	n := graph.NewField[int]("n")
	sub, err := graph.NewBuilder(graph.MustSchema(n)).
		AddNode("lookup", func(ctx context.Context, s graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, "looking up")
			return n.Set(1), nil
		}).
		AddEdge("lookup", graph.End).SetEntry("lookup").Compile(graph.WithName("enrich"))
	if err != nil {
		panic(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(n)).
		AddSubgraph("enrich_step", sub).AddEdge("enrich_step", graph.End).SetEntry("enrich_step").Compile()
	if err != nil {
		panic(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		panic(err)
	}
	if _, err := g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"tenantId": "acme"})); err != nil {
		panic(err)
	}
	_, _ = g.Drain(context.Background())
	traces := map[string]bool{}
	for _, s := range exp.GetSpans() {
		traces[s.SpanContext.TraceID().String()] = true
	}
	fmt.Println(len(exp.GetSpans()), "spans in", len(traces), "traces")
	// Output:
	// level=INFO msg="looking up" openarmature.user.tenantId=acme trace_id="<32 hex digits>" span_id="<16 hex digits>"
	// 5 spans in 2 traces
}
