package otelobserver

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// Metric instruments and dimensions (observability §11).
const (
	MetricTokenUsage        = "openarmature.gen_ai.client.token.usage"
	MetricOperationDuration = "openarmature.gen_ai.client.operation.duration"
	DimOperation            = "openarmature.gen_ai.operation"
	DimTokenType            = "openarmature.gen_ai.token.type"
	// OperationChat is the DimOperation value of an LLM completion.
	OperationChat = "chat"
)

// The §11.2 explicit bucket advisories.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// llmMetrics holds the §11.2 instruments.
type llmMetrics struct {
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
}

func newLLMMetrics(mp metric.MeterProvider) (*llmMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(TracerName)
	tokens, err := m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used by provider calls."), metric.WithExplicitBucketBoundaries(tokenBuckets...))
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", ErrInvalidConfig, MetricTokenUsage, err)
	}
	duration, err := m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of provider call attempts."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", ErrInvalidConfig, MetricOperationDuration, err)
	}
	return &llmMetrics{tokens: tokens, duration: duration}, nil
}

// record records one LLM call: a duration sample per attempt (with
// error.type on a failed one) and the token usage of every attempt that
// received a usage record (§11.2 call-level retry), per reported counter.
func (m *llmMetrics) record(model, system string, final *graph.LLMResponse, attempts []llm.AttemptRecord) {
	ctx := context.Background()
	base := []attribute.KeyValue{attribute.String(DimOperation, OperationChat),
		attribute.String(AttrGenAIRequestModel, model), attribute.String(AttrGenAISystem, system)}
	for i, a := range attempts {
		dims := base
		if a.Err != nil {
			dims = append(dims[:len(dims):len(dims)], attribute.String(AttrErrorType, string(errcat.Of(a.Err))))
		}
		m.duration.Record(ctx, a.End.Sub(a.Start).Seconds(), metric.WithAttributes(dims...))
		var u *llm.Usage
		switch {
		case a.Response != nil:
			u = &a.Response.Usage
		case i == len(attempts)-1 && final != nil && a.Err == nil:
			u = &final.Usage
		}
		if u == nil {
			continue
		}
		for _, c := range []struct {
			typ string
			v   *int
		}{{"input", u.PromptTokens}, {"output", u.CompletionTokens}} {
			if c.v != nil {
				m.tokens.Record(ctx, int64(*c.v), metric.WithAttributes(append(base[:len(base):len(base)], attribute.String(DimTokenType, c.typ))...))
			}
		}
	}
}
