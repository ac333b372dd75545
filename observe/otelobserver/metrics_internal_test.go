package otelobserver

import (
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/armature-go/armature/llm"
)

// Past maxChatSets distinct dimensions, records are still made, with
// their own attribute sets; the cache stays bounded.
func TestChatSetsBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := newLLMMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	const models = maxChatSets + 50
	t0 := time.Now()
	for i := range models {
		for range 2 {
			m.record(fmt.Sprintf("model-%d", i), "sys", nil, []llm.AttemptRecord{{Start: t0, End: t0.Add(time.Second)}})
		}
	}
	if n := m.nSets.Load(); n != maxChatSets {
		t.Errorf("%d cached sets, want %d", n, maxChatSets)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if metric.Name != MetricOperationDuration {
				continue
			}
			points := metric.Data.(metricdata.Histogram[float64]).DataPoints
			if len(points) != models {
				t.Fatalf("%d duration series, want %d", len(points), models)
			}
			for _, p := range points {
				if p.Count != 2 {
					t.Fatalf("series %v: %d records, want 2", p.Attributes, p.Count)
				}
			}
			return
		}
	}
	t.Fatal("no duration metric")
}
