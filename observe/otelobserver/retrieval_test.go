package otelobserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/observe/otelobserver"
)

type testEmbedder struct{ err error }

func (e testEmbedder) Model() string               { return "emb" }
func (e testEmbedder) System() string              { return "openai" }
func (e testEmbedder) Ready(context.Context) error { return nil }
func (e testEmbedder) Embed(_ context.Context, in []string, _ retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if e.err != nil {
		return nil, e.err
	}
	r := &retrieval.EmbeddingResponse{Model: "emb-v2", ResponseID: "e1", Dimensions: 3, Usage: &retrieval.EmbeddingUsage{InputTokens: 4}}
	for range in {
		r.Vectors = append(r.Vectors, []float64{1, 2, 3})
	}
	return r, nil
}

type testReranker struct{ usage *retrieval.RerankUsage }

func (r testReranker) Model() string               { return "rr" }
func (r testReranker) System() string              { return "cohere" }
func (r testReranker) Ready(context.Context) error { return nil }
func (r testReranker) Rerank(_ context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	doc := "d0"
	return &retrieval.RerankResponse{Model: "rr", ResponseID: "r1", Usage: r.usage,
		Results: []retrieval.ScoredDocument{{Index: 0, RelevanceScore: 0.9, Document: &doc}}}, nil
}

// runNode invokes a one-node graph running body under an observer built
// from cfg, returning its spans.
func runNode(t *testing.T, cfg otelobserver.Config, body func(ctx context.Context) error) tracetest.SpanStubs {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	obs, err := otelobserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(x)).AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		return nil, body(ctx)
	}).AddEdge("n", graph.End).SetEntry("n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	_, _ = g.Invoke(t.Context(), nil)
	if _, err := g.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	return exp.GetSpans()
}

func TestEmbeddingSpan(t *testing.T) {
	for _, payload := range []bool{false, true} {
		spans := runNode(t, otelobserver.Config{CaptureProviderPayload: payload}, func(ctx context.Context) error {
			_, err := retrieval.Embed(ctx, testEmbedder{}, []string{"a", "b"},
				retrieval.EmbeddingConfig{InputType: retrieval.InputQuery, Extras: map[string]any{"k": 1}})
			return err
		})
		sp := byName(t, spans, otelobserver.EmbeddingSpanName)
		if node := byName(t, spans, "n"); sp.Parent.SpanID() != node.SpanContext.SpanID() {
			t.Error("the embedding span is not a child of the node span")
		}
		a := attrs(sp)
		for k, want := range map[string]any{
			"gen_ai.system": "openai", "gen_ai.request.model": "emb", "gen_ai.response.model": "emb-v2",
			"gen_ai.response.id": "e1", "gen_ai.usage.input_tokens": int64(4),
			otelobserver.AttrEmbeddingInputCount: int64(2), otelobserver.AttrEmbeddingDimensions: int64(3),
			otelobserver.AttrEmbeddingInputType: "query",
		} {
			if got := a[k].AsInterface(); got != want {
				t.Errorf("%s = %v, want %v", k, got, want)
			}
		}
		if _, ok := a["gen_ai.operation.name"]; ok {
			t.Error("gen_ai.operation.name emitted")
		}
		_, hasStrings := a[otelobserver.AttrEmbeddingInputStrings]
		_, hasExtras := a[otelobserver.AttrEmbeddingRequestExtras]
		if hasStrings != payload || hasExtras != payload {
			t.Errorf("payload %v: input strings %v, extras %v", payload, hasStrings, hasExtras)
		}
		if payload && a[otelobserver.AttrEmbeddingInputStrings].AsString() != `["a","b"]` {
			t.Errorf("input strings %v", a[otelobserver.AttrEmbeddingInputStrings].AsString())
		}
		if sp.Status.Code != codes.Ok {
			t.Errorf("status %v", sp.Status)
		}
	}
}

func TestEmbeddingFailureSpan(t *testing.T) {
	spans := runNode(t, otelobserver.Config{DisableGenAISemconv: true}, func(ctx context.Context) error {
		_, err := retrieval.Embed(ctx, testEmbedder{err: &llm.ProviderError{Cat: errcat.ProviderUnavailable}}, []string{"a"}, retrieval.EmbeddingConfig{})
		return err
	})
	sp := byName(t, spans, otelobserver.EmbeddingSpanName)
	a := attrs(sp)
	if sp.Status.Code != codes.Error || sp.Status.Description != "provider_unavailable" ||
		a[otelobserver.AttrErrorCategory].AsString() != "provider_unavailable" || a[otelobserver.AttrEmbeddingInputCount].AsInt64() != 1 {
		t.Errorf("failure span %v %v", sp.Status, a)
	}
	for k := range a {
		if strings.HasPrefix(k, "gen_ai.") {
			t.Errorf("%s emitted under DisableGenAISemconv", k)
		}
	}
}

func TestRerankSpan(t *testing.T) {
	su := 2
	for _, tc := range []struct {
		name  string
		usage *retrieval.RerankUsage
		want  map[string]any
		none  []string
	}{
		{"search units", &retrieval.RerankUsage{SearchUnits: &su}, map[string]any{otelobserver.AttrRerankSearchUnits: int64(2)}, []string{"gen_ai.usage.input_tokens"}},
		{"no usage", nil, nil, []string{"gen_ai.usage.input_tokens", otelobserver.AttrRerankSearchUnits}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := runNode(t, otelobserver.Config{}, func(ctx context.Context) error {
				_, err := retrieval.Rerank(ctx, testReranker{usage: tc.usage}, retrieval.RerankRequest{Query: "héllo", Documents: []string{"d0", "d1"}, TopK: 1})
				return err
			})
			a := attrs(byName(t, spans, otelobserver.RerankSpanName))
			want := map[string]any{"gen_ai.system": "cohere", "gen_ai.request.model": "rr", "gen_ai.response.id": "r1",
				otelobserver.AttrRerankQueryLength: int64(6), otelobserver.AttrRerankDocumentCount: int64(2),
				otelobserver.AttrRerankTopK: int64(1), otelobserver.AttrRerankResultCount: int64(1)}
			for k, v := range tc.want {
				want[k] = v
			}
			for k, v := range want {
				if got := a[k].AsInterface(); got != v {
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
			for _, k := range append(tc.none, otelobserver.AttrRerankQuery, otelobserver.AttrRerankDocuments, otelobserver.AttrRerankResults) {
				if _, ok := a[k]; ok {
					t.Errorf("%s emitted", k)
				}
			}
		})
	}
}

// collect flattens the reader's observations as "instrument|dims=value".
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value(otelobserver.DimOperation)
					out[m.Name+"|"+op.AsString()] += float64(p.Sum)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value(otelobserver.DimOperation)
					k, _ := p.Attributes.Value(otelobserver.DimTokenBudgetKind)
					e, _ := p.Attributes.Value(otelobserver.AttrErrorType)
					name := m.Name + "|" + op.AsString() + k.AsString() + e.AsString()
					if m.Name == otelobserver.MetricOperationDuration {
						out[name] += float64(p.Count)
					} else {
						out[name] += p.Sum
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					k, _ := p.Attributes.Value(otelobserver.DimTokenBudgetKind)
					out[m.Name+"|"+k.AsString()] += float64(p.Value)
				}
			}
		}
	}
	return out
}

func TestRetrievalMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	cfg := otelobserver.Config{EnableMetrics: true, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	it := 9
	runNode(t, cfg, func(ctx context.Context) error {
		_, _ = retrieval.Embed(ctx, testEmbedder{}, []string{"a"}, retrieval.EmbeddingConfig{})
		_, _ = retrieval.Rerank(ctx, testReranker{usage: &retrieval.RerankUsage{InputTokens: &it}}, retrieval.RerankRequest{Query: "q", Documents: []string{"d"}})
		_, err := retrieval.Embed(ctx, testEmbedder{err: &llm.ProviderError{Cat: errcat.ProviderRateLimit}}, []string{"a"}, retrieval.EmbeddingConfig{})
		return err
	})
	got := collect(t, reader)
	for k, want := range map[string]float64{
		otelobserver.MetricTokenUsage + "|embeddings":                           4,
		otelobserver.MetricTokenUsage + "|rerank":                               9,
		otelobserver.MetricOperationDuration + "|embeddings":                    1,
		otelobserver.MetricOperationDuration + "|embeddingsprovider_rate_limit": 1,
		otelobserver.MetricOperationDuration + "|rerank":                        1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all %v)", k, got[k], want, got)
		}
	}
}

// TestTokenBudget: the LLM span carries the prompt identity and the
// declared budget; exceeded is set when a bound was evaluated, absent
// when none was; the budget instruments and the WARNING log follow.
func TestTokenBudget(t *testing.T) {
	in, total := 10, 100
	tests := []struct {
		name     string
		usage    llm.Usage
		exceeded any // nil: absent
		metrics  map[string]float64
		warned   bool
	}{
		{"input exceeded", llm.Usage{PromptTokens: new(20), CompletionTokens: new(1), TotalTokens: new(21)}, true,
			map[string]float64{otelobserver.MetricTokenBudgetExceeded + "|input": 1,
				otelobserver.MetricTokenBudgetUtilization + "|chatinput": 2, otelobserver.MetricTokenBudgetUtilization + "|chattotal": 0.21}, true},
		{"under budget", llm.Usage{PromptTokens: new(5), CompletionTokens: new(1), TotalTokens: new(6)}, false,
			map[string]float64{otelobserver.MetricTokenBudgetExceeded + "|input": 0, otelobserver.MetricTokenBudgetUtilization + "|chatinput": 0.5}, false},
		{"counters unreported", llm.Usage{CompletionTokens: new(5)}, nil,
			map[string]float64{otelobserver.MetricTokenBudgetUtilization + "|chatinput": 0, otelobserver.MetricTokenBudgetUtilization + "|chattotal": 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			var logs bytes.Buffer
			cfg := otelobserver.Config{EnableMetrics: true, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
			p := llmtest.New(llmtest.Step{Response: &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop,
				Usage: tc.usage, Raw: json.RawMessage(`{}`)}})
			spans := runNode(t, cfg, func(ctx context.Context) error {
				ctx = llm.WithActivePromptGroup(ctx, &llm.PromptGroupIdentity{GroupName: "grp"})
				ctx = llm.WithActivePrompt(ctx, &llm.PromptIdentity{Name: "p", Version: "7", Label: "production", TemplateHash: "th", RenderedHash: "rh"},
					&llm.TokenBudget{InputMaxTokens: &in, TotalMaxTokens: &total})
				_, err := llm.Complete(ctx, p, &llm.Request{Messages: []llm.Message{llm.UserText("q")}})
				return err
			})
			a := attrs(byName(t, spans, otelobserver.LLMSpanName))
			for k, want := range map[string]any{otelobserver.AttrPromptName: "p", otelobserver.AttrPromptVersion: "7",
				otelobserver.AttrPromptLabel: "production", otelobserver.AttrPromptTemplateHash: "th", otelobserver.AttrPromptRenderedHash: "rh",
				otelobserver.AttrPromptGroupName: "grp", otelobserver.AttrPromptBudgetInputMaxTokens: int64(10),
				otelobserver.AttrPromptBudgetTotalMaxTokens: int64(100)} {
				if got := a[k].AsInterface(); got != want {
					t.Errorf("%s = %v, want %v", k, got, want)
				}
			}
			v, ok := a[otelobserver.AttrLLMTokenBudgetExceeded]
			if (tc.exceeded == nil) == ok || (ok && v.AsBool() != tc.exceeded) {
				t.Errorf("exceeded %v (present %v), want %v", v.AsInterface(), ok, tc.exceeded)
			}
			got := collect(t, reader)
			for k, want := range tc.metrics {
				if got[k] != want {
					t.Errorf("%s = %v, want %v (all %v)", k, got[k], want, got)
				}
			}
			warned := strings.Contains(logs.String(), `"level":"WARN"`)
			if warned != tc.warned || (warned && !strings.Contains(logs.String(), `"openarmature.token_budget.input":{"max_tokens":10,"actual_tokens":20}`)) {
				t.Errorf("warning %v: %s", warned, logs.String())
			}
		})
	}
}
