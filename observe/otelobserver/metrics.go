package otelobserver

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

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
	// The token-budget instruments (proposal 0083) and their bound
	// dimension ("input" / "total", llm.BudgetKind).
	MetricTokenBudgetExceeded    = "openarmature.gen_ai.client.token_budget.exceeded"
	MetricTokenBudgetUtilization = "openarmature.gen_ai.client.token_budget.utilization"
	DimTokenBudgetKind           = "openarmature.gen_ai.token_budget.kind"
	// OperationChat, OperationEmbeddings and OperationRerank are the
	// DimOperation values of an LLM completion, an embedding call and a
	// rerank call.
	OperationChat       = "chat"
	OperationEmbeddings = "embeddings"
	OperationRerank     = "rerank"
)

// The §11.2 explicit bucket advisories.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	budgetBuckets   = []float64{0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0}
)

// llmMetrics holds the §11.2 instruments.
type llmMetrics struct {
	tokens      metric.Int64Histogram
	duration    metric.Float64Histogram
	exceeded    metric.Int64Counter
	utilization metric.Float64Histogram

	// chatSets caches the attribute sets of chat calls' records (a set
	// sorts and copies its attributes), at most maxChatSets of them.
	chatSets sync.Map // chatDims → metric.MeasurementOption
	nSets    atomic.Int32
}

// chatDims are the dimensions of one chat-call record: extraKey is
// error.type or gen_ai.token.type (or empty), extra its value.
type chatDims struct{ model, system, extraKey, extra string }

// maxChatSets bounds llmMetrics.chatSets: models and systems come from
// configuration, error and token types from short lists.
const maxChatSets = 1024

// chatAttrs returns the measurement option of a chat-call record with d.
func (m *llmMetrics) chatAttrs(d chatDims) metric.MeasurementOption {
	if o, ok := m.chatSets.Load(d); ok {
		return o.(metric.MeasurementOption)
	}
	attrs := []attribute.KeyValue{attribute.String(DimOperation, OperationChat),
		attribute.String(AttrGenAIRequestModel, d.model), attribute.String(AttrGenAISystem, d.system)}
	if d.extraKey != "" {
		attrs = append(attrs, attribute.String(d.extraKey, d.extra))
	}
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	if m.nSets.Load() < maxChatSets {
		if _, loaded := m.chatSets.LoadOrStore(d, o); !loaded {
			m.nSets.Add(1)
		}
	}
	return o
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
	exceeded, err := m.Int64Counter(MetricTokenBudgetExceeded, metric.WithUnit("{call}"),
		metric.WithDescription("Declared prompt token budget bounds exceeded by LLM calls."))
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", ErrInvalidConfig, MetricTokenBudgetExceeded, err)
	}
	utilization, err := m.Float64Histogram(MetricTokenBudgetUtilization, metric.WithUnit("1"),
		metric.WithDescription("Actual tokens over the declared prompt token budget bound, per LLM call."),
		metric.WithExplicitBucketBoundaries(budgetBuckets...))
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", ErrInvalidConfig, MetricTokenBudgetUtilization, err)
	}
	return &llmMetrics{tokens: tokens, duration: duration, exceeded: exceeded, utilization: utilization}, nil
}

// recordCall records one embedding or rerank call: its duration (with
// error.type when it failed) and, when reported, its input tokens.
func (m *llmMetrics) recordCall(op, model, system string, d time.Duration, err error, inputTokens *int) {
	ctx := context.Background()
	base := []attribute.KeyValue{attribute.String(DimOperation, op),
		attribute.String(AttrGenAIRequestModel, model), attribute.String(AttrGenAISystem, system)}
	dims := base
	if err != nil {
		dims = append(dims[:len(dims):len(dims)], attribute.String(AttrErrorType, string(errcat.Of(err))))
	}
	m.duration.Record(ctx, d.Seconds(), metric.WithAttributes(dims...))
	if err == nil && inputTokens != nil {
		m.tokens.Record(ctx, int64(*inputTokens), metric.WithAttributes(append(base[:len(base):len(base)],
			attribute.String(DimTokenType, "input"))...))
	}
}

// recordBudget records the token-budget instruments of one LLM call's
// evaluated bounds: a utilization observation per bound and an exceeded
// increment per crossed one.
func (m *llmMetrics) recordBudget(model, system string, checks []llm.BudgetCheck) {
	ctx := context.Background()
	for _, c := range checks {
		dims := metric.WithAttributes(attribute.String(DimOperation, OperationChat),
			attribute.String(AttrGenAIRequestModel, model), attribute.String(AttrGenAISystem, system),
			attribute.String(DimTokenBudgetKind, string(c.Kind)))
		if u := c.Utilization(); !math.IsInf(u, 0) && !math.IsNaN(u) {
			m.utilization.Record(ctx, u, dims)
		}
		if c.Exceeded {
			m.exceeded.Add(ctx, 1, dims)
		}
	}
}

// record records one LLM call: a duration sample per attempt (with
// error.type on a failed one) and the token usage of every attempt that
// received a usage record (§11.2 call-level retry), per reported counter.
func (m *llmMetrics) record(model, system string, final *graph.LLMResponse, attempts []llm.AttemptRecord) {
	ctx := context.Background()
	for i, a := range attempts {
		dims := chatDims{model: model, system: system}
		if a.Err != nil {
			dims.extraKey, dims.extra = AttrErrorType, string(errcat.Of(a.Err))
		}
		m.duration.Record(ctx, a.End.Sub(a.Start).Seconds(), m.chatAttrs(dims))
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
				m.tokens.Record(ctx, int64(*c.v), m.chatAttrs(chatDims{model, system, DimTokenType, c.typ}))
			}
		}
	}
}
