package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/armature-go/armature/observe/otelobserver"
)

// tracing is the OpenTelemetry export of armature serve: on when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) variable
// is set, configured by the OTLP/HTTP exporter's standard variables.
type tracing struct {
	tp  *sdktrace.TracerProvider
	obs *otelobserver.Observer
}

// setupTracing returns nil when no OTLP endpoint is configured.
func setupTracing(ctx context.Context) (*tracing, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("serve: OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp, ImplementationVersion: version})
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, err
	}
	return &tracing{tp: tp, obs: obs}, nil
}

// shutdown flushes the spans still buffered.
func (t *tracing) shutdown(ctx context.Context) {
	if t != nil {
		_ = t.tp.Shutdown(ctx)
	}
}
