package otelobserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

func failingToolGraph(t *testing.T, errText string) *graph.Graph {
	t.Helper()
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			_, _ = graph.CallTool(ctx, graph.ToolCall{Name: "fetch", ID: "c1", Arguments: map[string]any{"q": 1}},
				func(context.Context) (string, error) { return "", errors.New(errText) })
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// README (Observability): payloads stay out of spans unless
// CaptureProviderPayload is set, "and are then truncated
// (PayloadMaxBytes) with inline images redacted; so does the text of a
// failure's error (which may quote them)". With the option set, the tool
// span's exception.message is the error's text capped at
// PayloadMaxBytes: a 1 MiB error (a tool quoting a response body) does
// not land in the span whole.
func TestCapturedErrorTextIsTruncated(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp, CaptureProviderPayload: true, PayloadMaxBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	g := failingToolGraph(t, "upstream said: "+strings.Repeat("x", 1<<20))
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	sp := byName(t, exp.GetSpans(), otelobserver.ToolSpanName)
	for _, ev := range sp.Events {
		for _, kv := range ev.Attributes {
			if kv.Key == "exception.message" && len(kv.Value.AsString()) > 1024 {
				t.Fatalf("exception.message is %d bytes with PayloadMaxBytes 1024", len(kv.Value.AsString()))
			}
		}
	}
}

// otlpSink is an OTLP/HTTP trace receiver counting the spans it decodes.
type otlpSink struct {
	spans, requests atomic.Int64
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.requests.Add(1)
	var req collpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans.Add(int64(len(ss.Spans)))
		}
	}
	out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// The observer copies caller metadata strings (accepted by
// graph.WithMetadata without a UTF-8 check) and, with payload capture,
// error texts into span attributes with invalid UTF-8 replaced by U+FFFD
// (§5.5.5 step 4): an invalid byte would make the OTLP exporter's
// protobuf encoding fail for the whole batch, losing every span of it —
// here the other, clean invocation's too.
func TestInvalidUTF8AttributeKeepsOTLPBatch(t *testing.T) {
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(x)).AddNode("a", set(1)).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	// A clean invocation, then one whose tenant name came from a
	// Latin-1 header.
	if _, err := g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"tenant": "acme"})); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"tenant": "caf\xe9"})); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	shutdownErr := tp.Shutdown(context.Background())
	if got := sink.spans.Load(); got != 4 {
		t.Fatalf("the collector received %d of the 4 spans (requests %d, shutdown error: %v)", got, sink.requests.Load(), shutdownErr)
	}
}
