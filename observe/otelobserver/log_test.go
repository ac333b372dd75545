package otelobserver_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// recHandler collects records' attributes.
type recHandler struct {
	mu   *sync.Mutex
	recs *[]map[string]string
}

func (h recHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, m)
	h.mu.Unlock()
	return nil
}
func (h recHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recHandler) WithGroup(string) slog.Handler      { return h }

// Observer.LogHandler gives a node's records the trace and span ids of
// the node's span and the correlation and user metadata fields (§7).
func TestObserverLogHandler(t *testing.T) {
	h := newHarness(t)
	var recs []map[string]string
	logger := slog.New(h.obs.LogHandler(recHandler{mu: &sync.Mutex{}, recs: &recs}))
	logNode := func(msg string) graph.NodeFunc {
		return func(ctx context.Context, _ graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, msg)
			return nil, nil
		}
	}
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", logNode("in a")).AddNode("b", logNode("in b")).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil, graph.WithCorrelationID("c-1"), graph.WithMetadata(map[string]any{"tenantId": "acme"})); err != nil {
		t.Fatal(err)
	}
	ss := h.spans(t, g)
	logger.Info("outside") // passes through at once, without ids
	if len(recs) != 3 {
		t.Fatalf("records %v", recs)
	}
	for i, node := range []string{"a", "b"} {
		sp := byName(t, ss, node)
		r := recs[i]
		want := map[string]string{
			"msg": "in " + node, otelobserver.LogTraceID: sp.SpanContext.TraceID().String(),
			otelobserver.LogSpanID: sp.SpanContext.SpanID().String(), otelobserver.AttrCorrelationID: "c-1",
			otelobserver.AttrUserPrefix + "tenantId": "acme",
		}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("record %d: %s = %q, want %q", i, k, r[k], v)
			}
		}
	}
	if r := recs[2]; r["msg"] != "outside" || r[otelobserver.LogTraceID] != "" {
		t.Errorf("outside record %v", r)
	}
}

// Without spans (the no-op TracerProvider), Observer.LogHandler still
// gives a node's records the correlation and user metadata fields, and
// no trace or span ids.
func TestObserverLogHandlerWithoutSpans(t *testing.T) {
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]string
	logger := slog.New(obs.LogHandler(recHandler{mu: &sync.Mutex{}, recs: &recs}))
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, "in a")
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(t.Context(), nil, graph.WithCorrelationID("c-1"), graph.WithMetadata(map[string]any{"tenantId": "acme"})); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if obs.Spans() || len(recs) != 1 {
		t.Fatalf("spans %t, records %v", obs.Spans(), recs)
	}
	r := recs[0]
	if r[otelobserver.AttrCorrelationID] != "c-1" || r[otelobserver.AttrUserPrefix+"tenantId"] != "acme" || r[otelobserver.LogTraceID] != "" {
		t.Errorf("record %v", r)
	}
}
