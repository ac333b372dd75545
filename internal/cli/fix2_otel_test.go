package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRouteOTelErrors: OpenTelemetry's errors reach the given logger, a
// JSON record at warn level.
func TestRouteOTelErrors(t *testing.T) {
	var buf lockedBuffer
	routeOTelErrors(slog.New(slog.NewJSONHandler(&buf, nil)))
	otel.Handle(errors.New("exporter: connection refused"))
	var rec struct{ Level, Msg, Error string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &rec); err != nil {
		t.Fatalf("not one JSON record: %q", buf.String())
	}
	if rec.Level != "WARN" || rec.Error != "exporter: connection refused" || !strings.Contains(rec.Msg, "OpenTelemetry") {
		t.Errorf("record %+v", rec)
	}
}

// TestServeOTelErrorsAsJSON: under --log json, a failing OTLP export (a
// collector that is not there) is logged as a JSON record, not as a
// plain line.
func TestServeOTelErrorsAsJSON(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "ARMATURE_TOKENS", "ARMATURE_WORKSPACE",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"} {
		t.Setenv(k, "")
	}
	// Nothing listens there; the metrics are exported every 50ms.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:19251")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
	var stderr lockedBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--log", "json", "--data", t.TempDir(), "--addr", "127.0.0.1:19252", "--grace", "1s"},
			io.Discard, &stderr, Options{})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "OpenTelemetry failed") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("runServe: %v", err)
	}
	found := false
	for line := range strings.SplitSeq(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line of stderr is not JSON: %q", line)
			continue
		}
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "OpenTelemetry failed") {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON record of the failed export:\n%s", stderr.String())
	}
}
