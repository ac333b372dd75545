package server

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// writeOTelMetrics writes the collected OpenTelemetry metrics in the
// Prometheus text exposition format: histograms with cumulative
// _bucket{le}, _sum and _count series, sums as counters (monotonic) or
// gauges, gauges as gauges. Delta temporality and exponential histograms
// have no faithful cumulative rendering and are left out.
func writeOTelMetrics(b *strings.Builder, rm *metricdata.ResourceMetrics) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			name := promName(m.Name, m.Unit)
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				writeHistogram(b, name, m.Description, d)
			case metricdata.Histogram[float64]:
				writeHistogram(b, name, m.Description, d)
			case metricdata.Sum[int64]:
				writeSum(b, name, m.Description, d)
			case metricdata.Sum[float64]:
				writeSum(b, name, m.Description, d)
			case metricdata.Gauge[int64]:
				writePoints(b, name, m.Description, "gauge", d.DataPoints)
			case metricdata.Gauge[float64]:
				writePoints(b, name, m.Description, "gauge", d.DataPoints)
			}
		}
	}
}

func writeHistogram[N int64 | float64](b *strings.Builder, name, help string, h metricdata.Histogram[N]) {
	if h.Temporality != metricdata.CumulativeTemporality || len(h.DataPoints) == 0 {
		return
	}
	writeHeader(b, name, help, "histogram")
	for _, p := range h.DataPoints {
		labels := promLabels(p.Attributes)
		var cum uint64
		for i, ub := range p.Bounds {
			cum += p.BucketCounts[i]
			fmt.Fprintf(b, "%s_bucket%s %d\n", name, withLabel(labels, "le", promFloat(ub)), cum)
		}
		fmt.Fprintf(b, "%s_bucket%s %d\n", name, withLabel(labels, "le", "+Inf"), p.Count)
		fmt.Fprintf(b, "%s_sum%s %s\n", name, labels, promFloat(float64(p.Sum)))
		fmt.Fprintf(b, "%s_count%s %d\n", name, labels, p.Count)
	}
}

func writeSum[N int64 | float64](b *strings.Builder, name, help string, s metricdata.Sum[N]) {
	if s.Temporality != metricdata.CumulativeTemporality {
		return
	}
	if !s.IsMonotonic {
		writePoints(b, name, help, "gauge", s.DataPoints)
		return
	}
	if !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	writePoints(b, name, help, "counter", s.DataPoints)
}

func writePoints[N int64 | float64](b *strings.Builder, name, help, typ string, ps []metricdata.DataPoint[N]) {
	if len(ps) == 0 {
		return
	}
	writeHeader(b, name, help, typ)
	for _, p := range ps {
		fmt.Fprintf(b, "%s%s %s\n", name, promLabels(p.Attributes), promFloat(float64(p.Value)))
	}
}

func writeHeader(b *strings.Builder, name, help, typ string) {
	if help != "" {
		fmt.Fprintf(b, "# HELP %s %s\n", name, strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help))
	}
	fmt.Fprintf(b, "# TYPE %s %s\n", name, typ)
}

// promName maps an OTel instrument name to a Prometheus metric name:
// characters outside [a-zA-Z0-9_:] become underscores, and a seconds or
// bytes unit becomes the name's suffix.
func promName(name, unit string) string {
	n := sanitize(name)
	switch unit {
	case "s":
		n += "_seconds"
	case "By":
		n += "_bytes"
	}
	return n
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		ok := c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && i > 0
		if !ok {
			out[i] = '_'
		}
	}
	return string(out)
}

// promLabels renders an attribute set as {k="v",...} (empty for none),
// keys sanitized and sorted, values as their OTel string form.
func promLabels(set attribute.Set) string {
	if set.Len() == 0 {
		return ""
	}
	kvs := set.ToSlice()
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, sanitize(string(kv.Key))+"="+promQuote(kv.Value.String()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// withLabel adds one label to a rendered label set.
func withLabel(labels, k, v string) string {
	l := k + "=" + promQuote(v)
	if labels == "" {
		return "{" + l + "}"
	}
	return labels[:len(labels)-1] + "," + l + "}"
}

// promQuote quotes a label value with the exposition format's escapes.
func promQuote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

func promFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
