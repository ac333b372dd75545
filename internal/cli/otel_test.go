package cli

import "testing"

func TestOTLPEnv(t *testing.T) {
	tests := []struct {
		name                  string
		env                   map[string]string
		traces, metrics, logs bool
	}{
		{"none", nil, false, false, false},
		{"all", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, true, true},
		{"traces only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, false, false},
		{"metrics and logs", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "x", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "y"}, false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, m, l := otlpEnv(func(k string) string { return tt.env[k] })
			if tr != tt.traces || m != tt.metrics || l != tt.logs {
				t.Errorf("otlpEnv = %t, %t, %t; want %t, %t, %t", tr, m, l, tt.traces, tt.metrics, tt.logs)
			}
		})
	}
}
