package conformance

import (
	"context"
	"encoding/json"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The llm-provider suite's llm_spans expectations (the per-attempt LLM
// span of observability §5.5 under §7.1 call-level retry) are read from
// the spans the product emits: the call runs in the body of a one-node
// graph observed by an otelobserver on a private TracerProvider.

// lpExpectsSpans reports whether a call item expects llm_spans.
func lpExpectsSpans(it *Value) bool {
	e, ok := it.Get("expected")
	if !ok {
		return false
	}
	_, ok = e.Get("llm_spans")
	return ok
}

// lpTraced performs the call from a traced node and returns its LLM
// spans, in start order, and its outcome.
func lpTraced(ctx context.Context, p llm.Provider, req *llm.Request) (spans []tracetest.SpanStub, resp *llm.Response, callErr error) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		return nil, nil, err
	}
	g, err := graph.NewBuilder(graph.MustSchema()).AddNode("call", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		resp, callErr = llm.Complete(ctx, p, req)
		return nil, nil
	}).AddEdge("call", graph.End).SetEntry("call").Compile()
	if err != nil {
		return nil, nil, err
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		return nil, nil, err
	}
	if _, err := g.Invoke(ctx, nil); err != nil {
		return nil, nil, err
	}
	if _, err := g.Drain(ctx); err != nil {
		return nil, nil, err
	}
	for _, s := range exp.GetSpans() {
		if s.Name == otelobserver.LLMSpanName {
			spans = append(spans, s)
		}
	}
	return spans, resp, callErr
}

// lpAssertSpans checks llm_spans against the LLM spans the call emitted:
// one per attempt, in order, with the attributes and the error category
// (openarmature.error.category of a failed attempt's span).
func lpAssertSpans(m *matcher, call *lpCall, _ string, v *Value) error {
	if len(call.spans) != len(v.Items) {
		return fmt.Errorf("llm_spans: want %d spans, got %d", len(v.Items), len(call.spans))
	}
	for i, it := range v.Items {
		if err := hcStrictKeys(it, "llm_spans[]", "attempt_index", "attributes", "attributes_absent", "error_category"); err != nil {
			return err
		}
		attrs := spanAttrs(call.spans[i])
		var cat any
		if c, ok := attrs[otelobserver.AttrErrorCategory]; ok {
			cat = c
		}
		got := map[string]any{"attempt_index": attrs[otelobserver.AttrLLMAttemptIndex], "error_category": cat}
		for _, f := range it.Fields {
			switch f.Key {
			case "attributes_absent":
				for _, k := range f.Value.Items {
					if _, ok := attrs[k.Str]; ok {
						return fmt.Errorf("llm_spans[%d]: attribute %s is set", i, k.Str)
					}
				}
			case "attributes":
				if err := m.match(fmt.Sprintf("llm_spans[%d].attributes", i), f.Value.Native(), attrs, subsetTop); err != nil {
					return err
				}
			default:
				if err := m.match(fmt.Sprintf("llm_spans[%d].%s", i, f.Key), f.Value.Native(), got[f.Key], exact); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// lpBoundModel is the model the mapping is bound to when no expected
// wire request names one: the model the scripted responses report (the
// call-level retry fixtures expect it on openarmature.llm.model, the
// bound model, observability §5.5), else lpDefaultModel.
func lpBoundModel(mock *lpMock) string {
	for _, r := range mock.responses {
		var top struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(r.body, &top) == nil && top.Model != "" {
			return top.Model
		}
	}
	return lpDefaultModel
}

// lpSpanAttempts checks that every wire request has one LLM span, the
// spans carrying attempt indices 0..n-1 in order.
func lpSpanAttempts(call *lpCall) error {
	if len(call.spans) != len(call.wire) {
		return fmt.Errorf("%d LLM spans for %d requests", len(call.spans), len(call.wire))
	}
	for i, s := range call.spans {
		if got := spanAttrs(s)[otelobserver.AttrLLMAttemptIndex]; got != int64(i) {
			return fmt.Errorf("LLM span %d has attempt index %v", i, got)
		}
	}
	return nil
}
