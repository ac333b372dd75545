package server

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestWriteOTelMetrics(t *testing.T) {
	attrs := attribute.NewSet(attribute.String("gen_ai.system", `open"ai`), attribute.String("a.b", "x\ny"))
	tests := []struct {
		name string
		m    metricdata.Metrics
		want []string
		not  []string
	}{{
		name: "histogram",
		m: metricdata.Metrics{Name: "op.duration", Unit: "s", Description: "Duration.", Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{{Attributes: attrs, Bounds: []float64{0.1, 1},
				BucketCounts: []uint64{1, 2, 0}, Count: 3, Sum: 1.5}},
		}},
		want: []string{
			"# HELP op_duration_seconds Duration.\n# TYPE op_duration_seconds histogram\n",
			`op_duration_seconds_bucket{a_b="x\ny",gen_ai_system="open\"ai",le="0.1"} 1` + "\n",
			`op_duration_seconds_bucket{a_b="x\ny",gen_ai_system="open\"ai",le="1"} 3` + "\n",
			`op_duration_seconds_bucket{a_b="x\ny",gen_ai_system="open\"ai",le="+Inf"} 3` + "\n",
			`op_duration_seconds_sum{a_b="x\ny",gen_ai_system="open\"ai"} 1.5` + "\n",
			`op_duration_seconds_count{a_b="x\ny",gen_ai_system="open\"ai"} 3` + "\n",
		},
	}, {
		name: "monotonic sum is a counter",
		m: metricdata.Metrics{Name: "calls", Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{Value: 7}}}},
		want: []string{"# TYPE calls_total counter\ncalls_total 7\n"},
	}, {
		name: "non-monotonic sum is a gauge",
		m: metricdata.Metrics{Name: "open", Data: metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.DataPoint[float64]{{Value: 2.5}}}},
		want: []string{"# TYPE open gauge\nopen 2.5\n"},
	}, {
		name: "delta temporality is left out",
		m: metricdata.Metrics{Name: "delta", Data: metricdata.Sum[int64]{Temporality: metricdata.DeltaTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{Value: 1}}}},
		not: []string{"delta"},
	}, {
		name: "gauge",
		m:    metricdata.Metrics{Name: "9lives", Unit: "By", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 9}}}},
		want: []string{"# TYPE _lives_bytes gauge\n_lives_bytes 9\n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			writeOTelMetrics(&b, &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{tt.m}}}})
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("missing %q in\n%s", w, b.String())
				}
			}
			for _, n := range tt.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("unexpected %q in\n%s", n, b.String())
				}
			}
		})
	}
}
