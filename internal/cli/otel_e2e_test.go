package cli

import (
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector is an OTLP/HTTP receiver decoding the protobuf exports
// of the three signals.
type otlpCollector struct {
	t       *testing.T
	mu      sync.Mutex
	traces  []*coltrace.ExportTraceServiceRequest
	metrics []*colmetrics.ExportMetricsServiceRequest
	logs    []*collogs.ExportLogsServiceRequest
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		msg = &coltrace.ExportTraceServiceRequest{}
	case "/v1/metrics":
		msg = &colmetrics.ExportMetricsServiceRequest{}
	case "/v1/logs":
		msg = &collogs.ExportLogsServiceRequest{}
	default:
		http.NotFound(w, r)
		return
	}
	if err := proto.Unmarshal(raw, msg); err != nil {
		c.t.Errorf("%s: undecodable export: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	switch m := msg.(type) {
	case *coltrace.ExportTraceServiceRequest:
		c.traces = append(c.traces, m)
	case *colmetrics.ExportMetricsServiceRequest:
		c.metrics = append(c.metrics, m)
	case *collogs.ExportLogsServiceRequest:
		c.logs = append(c.logs, m)
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func resourceAttr(r *resourcepb.Resource, key string) string {
	return attrString(r.GetAttributes(), key)
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestE2EOpenTelemetryExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, a
// turn's spans, the §11 metrics and the log records reach an OTLP/HTTP
// collector under the armature service (flushed at shutdown at the
// latest), and the §11 metrics are on /metrics too.
func TestE2EOpenTelemetryExport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	col := &otlpCollector{t: t}
	endpoint := httptestServer(t, col.ServeHTTP)
	// An OpenAI-compatible model reporting usage, for the token metric.
	upstream := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"order 1 ships today"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`)
	})
	ws := filepath.Join(t.TempDir(), "ws.yaml")
	if err := os.WriteFile(ws, []byte("agents:\n  - id: a\n    provider: openai\n    model: m\n    base_url: "+upstream+"/v1\n    api_key_env: E2E_KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerEnv(t, t.TempDir(), []string{"ARMATURE_WORKSPACE=" + ws, "E2E_KEY=k",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=e2e"}, "--log", "json")
	var out e2eOutcome
	s.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "where is order 1?"}, &out)
	if out.Outcome != "completed" {
		t.Fatalf("%+v", out)
	}
	// The observer renders the turn's events after the turn answered:
	// scrape until the call's metrics are in (the deadline only bounds a
	// failure).
	var scrape []byte
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get(s.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		scrape, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(scrape), "openarmature_gen_ai_client_token_usage_count") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{
		"# TYPE openarmature_gen_ai_client_operation_duration_seconds histogram",
		`openarmature_gen_ai_client_operation_duration_seconds_count{gen_ai_request_model="m",gen_ai_system="openai",openarmature_gen_ai_operation="chat"} 1`,
		"# TYPE openarmature_gen_ai_client_token_usage histogram",
		`openarmature_gen_ai_client_token_usage_sum{gen_ai_request_model="m",gen_ai_system="openai",openarmature_gen_ai_operation="chat",openarmature_gen_ai_token_type="input"} 3`,
		"armature_turns_total", // the server's own series stay
	} {
		if !strings.Contains(string(scrape), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, scrape)
		}
	}
	s.stop() // the shutdown drains the observer and flushes every signal

	col.mu.Lock()
	defer col.mu.Unlock()
	spans := map[string]bool{}
	for _, req := range col.traces {
		for _, rs := range req.GetResourceSpans() {
			if got := resourceAttr(rs.GetResource(), "service.name"); got != "armature" {
				t.Errorf("trace resource service.name %q", got)
			}
			if got := resourceAttr(rs.GetResource(), "deployment.environment"); got != "e2e" {
				t.Errorf("trace resource deployment.environment %q", got)
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					spans[sp.GetName()] = true
				}
			}
		}
	}
	for _, want := range []string{"openarmature.invocation", "openarmature.llm.complete"} {
		if !spans[want] {
			t.Errorf("no %s span exported; got %v", want, spans)
		}
	}
	metrics := map[string]bool{}
	for _, req := range col.metrics {
		for _, rm := range req.GetResourceMetrics() {
			if got := resourceAttr(rm.GetResource(), "service.name"); got != "armature" {
				t.Errorf("metric resource service.name %q", got)
			}
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					metrics[m.GetName()] = true
				}
			}
		}
	}
	for _, want := range []string{"openarmature.gen_ai.client.token.usage", "openarmature.gen_ai.client.operation.duration"} {
		if !metrics[want] {
			t.Errorf("no %s metric exported; got %v", want, metrics)
		}
	}
	records := 0
	for _, req := range col.logs {
		for _, rl := range req.GetResourceLogs() {
			if got := resourceAttr(rl.GetResource(), "service.name"); got != "armature" {
				t.Errorf("log resource service.name %q", got)
			}
			for _, sl := range rl.GetScopeLogs() {
				records += len(sl.GetLogRecords())
			}
		}
	}
	if records == 0 {
		t.Error("no log record exported")
	}
}

// Without an OTLP endpoint the observer records the §11 metrics on the
// turn's goroutine (synchronous, no spans): a demo turn's call is on
// /metrics as soon as the turn answered, named by the demo model.
func TestE2EDemoMetricsWithoutEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	s := startServer(t, t.TempDir())
	var out e2eOutcome
	s.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "hello"}, &out)
	if out.Outcome != "completed" {
		t.Fatalf("%+v", out)
	}
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := `openarmature_gen_ai_client_operation_duration_seconds_count{gen_ai_request_model="armature-demo",gen_ai_system="armature-demo",openarmature_gen_ai_operation="chat"} 1`
	if !strings.Contains(string(scrape), want) {
		t.Errorf("/metrics lacks %q:\n%s", want, scrape)
	}
}
