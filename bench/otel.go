package bench

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/chat"
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

// OTelFloor is the OpenTelemetry SDK's own cost of the spans the OTel
// observer renders for one turn of build's graph (W1: ReplyGraph, W3:
// ToolGraph): the spans of one observed turn are recorded (names, kinds,
// attributes, span events, status, parent links), then b's loop creates
// and ends the same spans straight through the SDK, with the batch span
// processor and no-op exporter of Observed, and nothing else: no engine,
// no observer. It is the floor under what Observed adds to a turn: any
// observer that emits those spans through the SDK pays at least this.
// It reports the spans per turn (spans/op).
func OTelFloor(b *testing.B, be Backend, build func(Backend) (*graph.Graph, error), replies int) {
	b.Helper()
	rec := tracetest.NewSpanRecorder()
	rtp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: rtp})
	if err != nil {
		b.Fatal(err)
	}
	g, err := build(be)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents(), graph.WithoutTokenEvents(), graph.Synchronous()); err != nil {
		b.Fatal(err)
	}
	h, err := be.harnessFor(g)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if out, err := h.Send(ctx, "floor-1", userMsg); err != nil {
		b.Fatal(err)
	} else if c, ok := out.(*chat.Completed); !ok || len(c.Replies) != replies {
		b.Fatalf("floor turn: %#v", out)
	}
	spans := replayable(rec.Ended())
	if len(spans) == 0 {
		b.Fatal("the observer rendered no span")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("github.com/armature-go/armature/bench")
	ctxs := make([]context.Context, len(spans))
	started := make([]trace.Span, len(spans))
	b.ReportAllocs()
	for b.Loop() {
		for i, s := range spans {
			parent := ctx
			if s.parent >= 0 {
				parent = ctxs[s.parent]
			}
			ctxs[i], started[i] = tr.Start(parent, s.name, s.opts...)
			for _, e := range s.events {
				started[i].AddEvent(e.Name, trace.WithAttributes(e.Attributes...))
			}
		}
		for i := len(started) - 1; i >= 0; i-- {
			started[i].SetStatus(spans[i].status.Code, spans[i].status.Description)
			started[i].End()
		}
	}
	b.ReportMetric(float64(len(spans)), "spans/op")
}

// floorSpan is a recorded span to create again: parent is the index of
// its parent among the spans before it (-1 for a root).
type floorSpan struct {
	name   string
	opts   []trace.SpanStartOption
	events []sdktrace.Event
	status sdktrace.Status
	parent int
}

// replayable orders recorded spans parents first (by depth in the
// recorded tree, then start time) and links each to its parent's index.
func replayable(ended []sdktrace.ReadOnlySpan) []floorSpan {
	byID := make(map[trace.SpanID]sdktrace.ReadOnlySpan, len(ended))
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	depth := func(s sdktrace.ReadOnlySpan) (d int) {
		for p, ok := byID[s.Parent().SpanID()]; ok; p, ok = byID[p.Parent().SpanID()] {
			d++
		}
		return d
	}
	ended = slices.Clone(ended)
	slices.SortStableFunc(ended, func(a, b sdktrace.ReadOnlySpan) int {
		return cmp.Or(cmp.Compare(depth(a), depth(b)), a.StartTime().Compare(b.StartTime()))
	})
	index := make(map[trace.SpanID]int, len(ended))
	out := make([]floorSpan, 0, len(ended))
	for _, s := range ended {
		p, ok := index[s.Parent().SpanID()]
		if !ok {
			p = -1
		}
		index[s.SpanContext().SpanID()] = len(out)
		out = append(out, floorSpan{name: s.Name(), parent: p, events: s.Events(), status: s.Status(),
			opts: []trace.SpanStartOption{trace.WithSpanKind(s.SpanKind()),
				trace.WithAttributes(append([]attribute.KeyValue(nil), s.Attributes()...)...)}})
	}
	return out
}
