package conformance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/graph"
)

// The caller's global OTel tracer provider (observability 005,
// caller_global_otel_active): the case installs an in-memory exporter on
// the OTel global TracerProvider, as an auto-instrumentation library
// would, and a node's also_emits_via_global_tracer emits a span through
// it. The §6 isolation rule: the observer's spans go to its private
// provider only (span_tree_private, checked as span_tree), never to the
// global one (span_tree_global, no_openarmature_spans_on_global). The
// suite runs cases one at a time; the previous global provider is put
// back when the case ends.

// globalOTel is the installed global provider and what it replaced.
type globalOTel struct {
	exp  *tracetest.InMemoryExporter
	tp   *sdktrace.TracerProvider
	prev trace.TracerProvider
}

// installGlobalOTel makes an in-memory provider the OTel global one.
func installGlobalOTel() *globalOTel {
	g := &globalOTel{exp: tracetest.NewInMemoryExporter(), prev: otel.GetTracerProvider()}
	g.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(g.exp))
	otel.SetTracerProvider(g.tp)
	return g
}

// restore puts the previous global provider back.
func (g *globalOTel) restore() {
	if g == nil {
		return
	}
	otel.SetTracerProvider(g.prev)
	_ = g.tp.Shutdown(context.Background())
}

// globalStep is also_emits_via_global_tracer: a span through the global
// provider, as an instrumented client library emits it.
func globalStep(d *obsCallDir) *geStep {
	name := d.global
	return &geStep{kind: stepCustom, pos: d.v.Pos, custom: func(ctx context.Context, _ graph.State, _ graph.Update) error {
		_, sp := otel.Tracer("conformance/external-instrumentation").Start(ctx, name)
		sp.End()
		return nil
	}}
}

// assertGlobal checks span_tree_global and no_openarmature_spans_on_global.
func (r *obsLLMRun) assertGlobal(m *matcher) error {
	ol := r.ol
	if ol.globalTree == nil && ol.noOAGlobal == nil {
		return nil
	}
	if r.global == nil {
		return schemaErrorf(Pos{}, "span_tree_global needs caller_global_otel_active: true")
	}
	spans := r.global.exp.GetSpans()
	var errs []error
	if ol.globalTree != nil {
		errs = append(errs, matchSpanList(m, "span_tree_global", ol.globalTree, stubForest(spans)))
	}
	if ol.noOAGlobal != nil {
		var oa []string
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "openarmature.") || strings.HasPrefix(s.InstrumentationScope.Name, "github.com/armature-go/") {
				oa = append(oa, s.Name)
			}
		}
		errs = append(errs, compareBool(ol.noOAGlobal, len(oa) == 0, fmt.Sprintf("openarmature spans on the global provider: %v", oa)))
	}
	return errors.Join(errs...)
}

// stubForest builds the span trees of exported spans, siblings in start
// order.
func stubForest(spans tracetest.SpanStubs) []*spanNode {
	nodes := map[trace.SpanID]*spanNode{}
	for _, s := range spans {
		nodes[s.SpanContext.SpanID()] = &spanNode{span: s}
	}
	var roots []*spanNode
	for _, s := range spans {
		n := nodes[s.SpanContext.SpanID()]
		if p, ok := nodes[s.Parent.SpanID()]; ok && s.Parent.IsValid() {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	var sortRec func(ns []*spanNode)
	sortRec = func(ns []*spanNode) {
		sort.SliceStable(ns, func(i, j int) bool { return ns[i].span.StartTime.Before(ns[j].span.StartTime) })
		for _, n := range ns {
			sortRec(n.children)
		}
	}
	sortRec(roots)
	return roots
}
