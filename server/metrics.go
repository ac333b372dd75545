package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// metrics are the server's Prometheus counters, written in the text
// exposition format by hand (no client library needed for a handful of
// series).
type metrics struct {
	mu       sync.Mutex
	turns    map[string]uint64 // by outcome
	requests map[[2]string]uint64
	buckets  []float64 // turn latency upper bounds, seconds
	counts   []uint64  // cumulative per bucket
	sum      float64
	total    uint64
}

func newMetrics() *metrics {
	b := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	return &metrics{turns: map[string]uint64{}, requests: map[[2]string]uint64{}, buckets: b, counts: make([]uint64, len(b))}
}

func (m *metrics) request(route string, status int) {
	m.mu.Lock()
	m.requests[[2]string{route, fmt.Sprint(status)}]++
	m.mu.Unlock()
}

// turn records a finished turn's outcome and latency.
func (m *metrics) turn(outcome string, d time.Duration) {
	sec := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.turns[outcome]++
	for i, ub := range m.buckets {
		if sec <= ub {
			m.counts[i]++
		}
	}
	m.sum += sec
	m.total++
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	m := s.metrics
	var b strings.Builder
	m.mu.Lock()
	b.WriteString("# HELP armature_turns_total Chat turns by outcome.\n# TYPE armature_turns_total counter\n")
	outcomes := make([]string, 0, len(m.turns))
	for k := range m.turns {
		outcomes = append(outcomes, k)
	}
	sort.Strings(outcomes)
	for _, k := range outcomes {
		fmt.Fprintf(&b, "armature_turns_total{outcome=%q} %d\n", k, m.turns[k])
	}
	b.WriteString("# HELP armature_turn_duration_seconds Chat turn latency.\n# TYPE armature_turn_duration_seconds histogram\n")
	for i, ub := range m.buckets {
		fmt.Fprintf(&b, "armature_turn_duration_seconds_bucket{le=%q} %d\n", fmt.Sprint(ub), m.counts[i])
	}
	fmt.Fprintf(&b, "armature_turn_duration_seconds_bucket{le=\"+Inf\"} %d\n", m.total)
	fmt.Fprintf(&b, "armature_turn_duration_seconds_sum %g\narmature_turn_duration_seconds_count %d\n", m.sum, m.total)
	b.WriteString("# HELP armature_http_requests_total HTTP requests by route and status.\n# TYPE armature_http_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(&b, "armature_http_requests_total{route=%q,status=%q} %d\n", k[0], k[1], m.requests[k])
	}
	m.mu.Unlock()
	b.WriteString("# HELP armature_sse_streams Active server-sent event streams.\n# TYPE armature_sse_streams gauge\n")
	streams, _ := s.streams.counts()
	fmt.Fprintf(&b, "armature_sse_streams %d\n", streams)
	running, queued := s.turns.counts()
	b.WriteString("# HELP armature_turns_in_flight Turns admitted and not yet answered.\n# TYPE armature_turns_in_flight gauge\n")
	fmt.Fprintf(&b, "armature_turns_in_flight %d\n", running)
	b.WriteString("# HELP armature_turns_queued Turns waiting for capacity.\n# TYPE armature_turns_queued gauge\n")
	fmt.Fprintf(&b, "armature_turns_queued %d\n", queued)
	b.WriteString("# HELP armature_requests_refused_total Requests refused by the limits, by kind (stream, turn) and reason (tenant_share, capacity).\n# TYPE armature_requests_refused_total counter\n")
	refused := s.refused.snapshot()
	rkeys := make([][2]string, 0, len(refused))
	for k := range refused {
		rkeys = append(rkeys, k)
	}
	sort.Slice(rkeys, func(i, j int) bool { return rkeys[i][0]+rkeys[i][1] < rkeys[j][0]+rkeys[j][1] })
	for _, k := range rkeys {
		fmt.Fprintf(&b, "armature_requests_refused_total{kind=%q,reason=%q} %d\n", k[0], k[1], refused[k])
	}
	writeRuntimeMetrics(&b)
	if rd := s.cfg.MetricReader; rd != nil {
		var rm metricdata.ResourceMetrics
		if err := rd.Collect(r.Context(), &rm); err != nil {
			s.log.Warn("server: collecting the OpenTelemetry metrics failed", "error", err)
		} else {
			writeOTelMetrics(&b, &rm)
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, err := w.Write([]byte(b.String()))
	return err
}
