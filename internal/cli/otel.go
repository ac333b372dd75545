package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// serviceName is the default service.name of the exported telemetry
// (OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES override it).
const serviceName = "armature"

// telemetry is the OpenTelemetry side of armature serve. The §11 gen_ai
// metrics of every turn are always recorded, for the server's /metrics.
// When the standard OTEL_EXPORTER_OTLP_ENDPOINT variable (or a
// per-signal ..._TRACES_ / ..._METRICS_ / ..._LOGS_ENDPOINT) is set,
// each turn's spans, its log records and the metrics are also exported
// over OTLP/HTTP, configured by the exporters' standard variables
// (OTEL_EXPORTER_OTLP_HEADERS, ..._PROTOCOL is http/protobuf), under a
// resource named by OTEL_SERVICE_NAME (default "armature") with
// OTEL_RESOURCE_ATTRIBUTES.
type telemetry struct {
	// obs renders the turns; its spans go nowhere without an endpoint.
	obs *otelobserver.Observer
	// tp, lp are the exporting providers, nil without an endpoint;
	// tracing reports tp != nil.
	tp *sdktrace.TracerProvider
	lp *sdklog.LoggerProvider
	mp *sdkmetric.MeterProvider
	// prom is the reader /metrics collects.
	prom *sdkmetric.ManualReader
}

// otlpEnv reports which signals have an OTLP endpoint configured.
func otlpEnv(getenv func(string) string) (traces, metrics, logs bool) {
	all := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	return all || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "",
		all || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "",
		all || getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") != ""
}

// setupTelemetry builds the providers and the observer. The exporters
// read their configuration from the process environment; getenv decides
// which of them to build.
func setupTelemetry(ctx context.Context, getenv func(string) string) (_ *telemetry, err error) {
	traces, metrics, logs := otlpEnv(getenv)
	t := &telemetry{prom: sdkmetric.NewManualReader()}
	defer func() {
		if err != nil {
			t.shutdown(context.Background())
		}
	}()
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(serviceName), semconv.ServiceVersion(version)),
		resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("serve: OpenTelemetry resource: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(t.prom)}
	if metrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("serve: OTLP metric exporter: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	t.mp = sdkmetric.NewMeterProvider(mopts...)
	cfg := otelobserver.Config{TracerProvider: noop.NewTracerProvider(), ImplementationVersion: version,
		EnableMetrics: true, MeterProvider: t.mp}
	if traces {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("serve: OTLP trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		cfg.TracerProvider = t.tp
	}
	if logs {
		exp, err := otlploghttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("serve: OTLP log exporter: %w", err)
		}
		t.lp = sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
	}
	if t.obs, err = otelobserver.New(cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// observerOptions are the options the telemetry's observer is
// registered with: without a traces endpoint it renders no spans and
// records only metrics, quick enough to run synchronously (an
// invocation then needs no delivery goroutine); with one it renders
// spans on a delivery goroutine, overlapping the turn.
func (t *telemetry) observerOptions() []graph.ObserverOption {
	if !t.obs.Spans() {
		return []graph.ObserverOption{graph.Synchronous(), graph.WithoutTokenEvents()}
	}
	return []graph.ObserverOption{graph.InvocationEvents(), graph.WithoutTokenEvents()}
}

// logHandler returns h extended with the telemetry: each record of a
// turn carries its invocation, correlation and session ids; with an OTLP
// logs endpoint every record is also exported; with a traces one each
// record of a turn carries (and is exported under) the trace and span of
// the node that logged it.
func (t *telemetry) logHandler(h slog.Handler) slog.Handler {
	if t.lp != nil {
		h = slog.NewMultiHandler(h, otelslog.NewHandler("github.com/armature-go/armature/cmd/armature",
			otelslog.WithLoggerProvider(t.lp), otelslog.WithVersion(version)))
	}
	if t.tp != nil {
		return t.obs.LogHandler(h)
	}
	return otelobserver.LogHandler(h)
}

// shutdownTimeout bounds the final flush of the exporters.
const shutdownTimeout = 10 * time.Second

// shutdown flushes what the exporters still buffer and stops them.
func (t *telemetry) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.lp != nil {
		errs = append(errs, t.lp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// routeOTelErrors sends the errors OpenTelemetry reports (an export that
// failed: the collector unreachable, a refused batch) to log as warnings,
// in the configured format, instead of OpenTelemetry's default plain
// lines on stderr. OpenTelemetry's error handler is process-global (and
// its first replacement cannot be undone): only armature serve's startup
// sets it, never a library package. log should not export over OTLP
// itself (a failed log export would log again).
func routeOTelErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("serve: OpenTelemetry failed", "error", err)
	}))
}
