package otelobserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/observe/otelobserver"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"short", "abc", 256, "abc"},
		{"exact", strings.Repeat("a", 256), 256, strings.Repeat("a", 256)},
		{"ascii", strings.Repeat("a", 300), 256, strings.Repeat("a", 256-len("…[truncated, 300 bytes total]")) + "…[truncated, 300 bytes total]"},
		// "é" is two bytes; the cut backs off to a rune boundary.
		{"utf8", strings.Repeat("é", 200), 256, strings.Repeat("é", (256-len("…[truncated, 400 bytes total]"))/2) + "…[truncated, 400 bytes total]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otelobserver.Truncate(tc.in, tc.limit); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("hello", 256)
	f.Add(strings.Repeat("日本", 300), 300)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < otelobserver.MinPayloadMaxBytes || limit > 1<<20 || !utf8.ValidString(s) {
			return
		}
		got := otelobserver.Truncate(s, limit)
		if len(got) > limit || !utf8.ValidString(got) {
			t.Fatalf("Truncate(%d bytes, %d) = %d bytes, valid %t", len(s), limit, len(got), utf8.ValidString(got))
		}
		if len(s) > limit {
			i := strings.LastIndex(got, "…[truncated, ")
			if i < 0 || !strings.HasPrefix(s, got[:i]) {
				t.Fatalf("truncated value is not a prefix plus the marker: %q", got)
			}
		}
	})
}

func TestConfigPayloadCap(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	if _, err := otelobserver.New(otelobserver.Config{TracerProvider: tp, PayloadMaxBytes: 100}); !errors.Is(err, otelobserver.ErrInvalidConfig) {
		t.Errorf("a 100-byte cap: err = %v", err)
	}
}

// llmGraph is one node calling p with a tool call and a tool run.
func llmGraph(t *testing.T, p llm.Provider) *graph.Graph {
	t.Helper()
	g, err := graph.NewBuilder(graph.MustSchema(x)).AddNode("ask", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		req := &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Config: llm.Config{Temperature: new(0.5), Extras: map[string]any{"k": 1}}}
		if _, err := llm.Complete(ctx, p, req); err != nil {
			return nil, err
		}
		_, err := graph.CallTool(ctx, graph.ToolCall{Name: "w", ID: "c1", Arguments: map[string]any{"city": "P"}},
			func(context.Context) (string, error) { return "sunny", nil })
		return nil, err
	}).AddEdge("ask", graph.End).SetEntry("ask").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestLLMAndToolSpans(t *testing.T) {
	reply := llmtest.Step{Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Content: llm.Text("ok"),
			ToolCalls: []llm.ToolCall{{ID: "c1", Name: "w", Arguments: json.RawMessage(`{"city":"P"}`)}}},
		FinishReason: llm.FinishToolCalls, Usage: llm.Usage{CompletionTokens: new(2), CachedTokens: new(0)},
		Raw: json.RawMessage(`{"id":"r-1","model":"m-resp"}`),
	}}
	tests := []struct {
		name    string
		cfg     otelobserver.Config
		present []string
		absent  []string
	}{
		{"default", otelobserver.Config{},
			[]string{"gen_ai.request.temperature", "gen_ai.response.id", "gen_ai.usage.output_tokens", "openarmature.llm.cache_read.input_tokens",
				"openarmature.llm.output.tool_calls.names", "openarmature.llm.attempt_index"},
			[]string{"gen_ai.usage.input_tokens", "openarmature.llm.input.messages", "openarmature.llm.output.content",
				"openarmature.llm.request.extras", "openarmature.llm.output.tool_calls"}},
		{"payload", otelobserver.Config{CaptureProviderPayload: true},
			[]string{"openarmature.llm.input.messages", "openarmature.llm.output.content", "openarmature.llm.request.extras", "openarmature.llm.output.tool_calls"},
			nil},
		{"no semconv", otelobserver.Config{DisableGenAISemconv: true},
			[]string{"openarmature.llm.model", "openarmature.llm.usage.completion_tokens"},
			[]string{"gen_ai.request.temperature", "gen_ai.response.id", "openarmature.llm.cache_read.input_tokens"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spans := runLLMGraph(t, tc.cfg, llmtest.New(reply))
			llmSpan := byName(t, spans, otelobserver.LLMSpanName)
			node := byName(t, spans, "ask")
			if llmSpan.Parent.SpanID() != node.SpanContext.SpanID() {
				t.Error("the LLM span is not the calling node's child")
			}
			a := attrs(llmSpan)
			for _, k := range tc.present {
				if _, ok := a[k]; !ok {
					t.Errorf("%s absent", k)
				}
			}
			for _, k := range tc.absent {
				if _, ok := a[k]; ok {
					t.Errorf("%s present", k)
				}
			}
			tool := attrs(byName(t, spans, otelobserver.ToolSpanName))
			if _, ok := tool[otelobserver.AttrToolCallArguments]; ok != tc.cfg.CaptureProviderPayload {
				t.Errorf("tool arguments present = %t", ok)
			}
		})
	}
}

func TestDisableLLMSpans(t *testing.T) {
	spans := runLLMGraph(t, otelobserver.Config{DisableLLMSpans: true}, llmtest.New(llmtest.Reply("ok")))
	for _, s := range spans {
		if s.Name == otelobserver.LLMSpanName {
			t.Error("an LLM span with DisableLLMSpans")
		}
	}
	byName(t, spans, otelobserver.ToolSpanName)
}

// runLLMGraph invokes llmGraph over p under an observer built from cfg
// and returns the spans.
func runLLMGraph(t *testing.T, cfg otelobserver.Config, p llm.Provider) tracetest.SpanStubs {
	t.Helper()
	spans, err := runLLMGraphErr(t, cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

// runLLMGraphErr is runLLMGraph returning the invocation's error.
func runLLMGraphErr(t *testing.T, cfg otelobserver.Config, p llm.Provider) (tracetest.SpanStubs, error) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	}
	obs, err := otelobserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := llmGraph(t, p)
	opts := []graph.ObserverOption{graph.InvocationEvents()}
	if !obs.Spans() {
		opts = []graph.ObserverOption{graph.Synchronous()}
	}
	if _, err := g.AddObserver(obs.Observe, opts...); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if n := obs.OpenSpans(); n != 0 {
			t.Errorf("%d spans left open", n)
		}
	}()
	_, invokeErr := g.Invoke(t.Context(), nil)
	if _, err := g.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	return exp.GetSpans(), invokeErr
}

func TestMetrics(t *testing.T) {
	usage := llm.Usage{PromptTokens: new(5), CompletionTokens: new(2)}
	ok := llmtest.Step{Response: &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop, Usage: usage, Raw: json.RawMessage(`{}`)}}
	tests := []struct {
		name    string
		enabled bool
		// noSpans uses the no-op TracerProvider: the observer keeps no
		// state, and is registered synchronous.
		noSpans bool
		step    llmtest.Step
		// want counts observations per instrument; errType is the
		// duration's error.type.
		tokens, durations int
		errType           string
	}{
		{"success", true, false, ok, 2, 1, ""},
		{"failure", true, false, llmtest.Fail(&llm.ProviderError{Cat: "provider_unavailable"}), 0, 1, "provider_unavailable"},
		{"disabled", false, false, ok, 0, 0, ""},
		{"success without spans", true, true, ok, 2, 1, ""},
		{"failure without spans", true, true, llmtest.Fail(&llm.ProviderError{Cat: "provider_unavailable"}), 0, 1, "provider_unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			cfg := otelobserver.Config{EnableMetrics: tc.enabled, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
			if tc.noSpans {
				cfg.TracerProvider = noop.NewTracerProvider()
			}
			runLLMGraphErr(t, cfg, llmtest.New(tc.step))
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(t.Context(), &rm); err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			errType := ""
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					switch d := m.Data.(type) {
					case metricdata.Histogram[int64]:
						for _, p := range d.DataPoints {
							counts[m.Name] += int(p.Count)
						}
					case metricdata.Histogram[float64]:
						for _, p := range d.DataPoints {
							counts[m.Name] += int(p.Count)
							if v, ok := p.Attributes.Value(otelobserver.AttrErrorType); ok {
								errType = v.AsString()
							}
						}
					}
				}
			}
			if counts[otelobserver.MetricTokenUsage] != tc.tokens || counts[otelobserver.MetricOperationDuration] != tc.durations || errType != tc.errType {
				t.Errorf("counts %v error.type %q", counts, errType)
			}
		})
	}
}
