package conformance

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// Langfuse provider isolation (observability §6 / §8.9, fixture 157;
// conformance-adapter §5.5, §6.4). caller_global_otel_active installs an
// in-memory exporter on the OTel global TracerProvider for the case. In
// mode b (langfuse_client {mode: credentials}) the observer builds its
// own client from credentials — Armature's client speaks the ingestion
// API and never touches OTel, so nothing can reach either provider. In
// mode a (mode: supplied) the harness hands the observer a
// provider-faithful fake: a recorder that also emits each observation as
// an OTel span carrying the langfuse.observation.* attributes through the
// provider it is bound to (the global one by default), as a Langfuse v4
// client does; the observer must use it as supplied, so its observations
// reach that provider.

// lfObservationAttr prefixes the attributes of a Langfuse observation
// span.
const lfObservationAttr = "langfuse.observation."

// providerFake is the provider-faithful Langfuse client fake of §6.4.
type providerFake struct {
	rec    *langfusetest.Recorder
	tracer trace.Tracer
	// tp is the isolated provider of provider: isolated.
	tp *sdktrace.TracerProvider
}

func newProviderFake(provider string, global *globalOTel) (*providerFake, error) {
	f := &providerFake{rec: &langfusetest.Recorder{}}
	switch provider {
	case "isolated":
		f.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
		f.tracer = f.tp.Tracer("langfuse-fake")
	default:
		if global == nil {
			return nil, schemaErrorf(Pos{}, "langfuse_client provider global needs caller_global_otel_active")
		}
		f.tracer = otel.GetTracerProvider().Tracer("langfuse-fake")
	}
	return f, nil
}

// Export records the events and emits each observation as an OTel span.
func (f *providerFake) Export(events []langfuse.Event) {
	f.rec.Export(events)
	for _, ev := range events {
		typ, ok := langfuse.ObservationTypeOf(ev.Type)
		b, isObs := ev.Body.(*langfuse.ObservationBody)
		if !ok || !isObs {
			continue
		}
		_, sp := f.tracer.Start(context.Background(), b.Name, trace.WithAttributes(
			attribute.String(lfObservationAttr+"type", string(typ)),
			attribute.String(lfObservationAttr+"id", b.ID),
			attribute.String(lfObservationAttr+"trace_id", b.TraceID)))
		sp.End()
	}
}

// lfSpanCount counts the Langfuse observation spans among spans.
func lfSpanCount(spans tracetest.SpanStubs) int {
	n := 0
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if len(kv.Key) > len(lfObservationAttr) && string(kv.Key)[:len(lfObservationAttr)] == lfObservationAttr {
				n++
				break
			}
		}
	}
	return n
}

// assertIsolation checks the provider-isolation expectations.
func (le *lfExec) assertIsolation() error {
	lf := le.lf
	var errs []error
	var onGlobal int
	if le.global != nil {
		onGlobal = lfSpanCount(le.global.exp.GetSpans())
	} else if lf.noGlobal != nil || lf.onGlobal != nil {
		return fmt.Errorf("the global-provider expectations need caller_global_otel_active")
	}
	if lf.noGlobal != nil {
		errs = append(errs, compareBool(lf.noGlobal, onGlobal == 0, fmt.Sprintf("%d Langfuse observation spans reached the global provider", onGlobal)))
	}
	if lf.onGlobal != nil {
		errs = append(errs, compareBool(lf.onGlobal, onGlobal > 0, "no Langfuse observation span reached the global provider"))
	}
	if lf.noPrivate != nil {
		c, ok := le.x.otel.captures[implicitOTel]
		if !ok {
			return errors.Join(append(errs, fmt.Errorf("no_langfuse_observations_on_private: no private OTel observer"))...)
		}
		n := lfSpanCount(c.exp.GetSpans())
		errs = append(errs, compareBool(lf.noPrivate, n == 0, fmt.Sprintf("%d Langfuse observation spans reached the private provider", n)))
	}
	return errors.Join(errs...)
}
