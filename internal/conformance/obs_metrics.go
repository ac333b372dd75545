package conformance

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/armature-go/armature/observe/otelobserver"
)

// The observability §11 metric capture (§11.5): an in-memory
// ManualReader under the OTel observer's MeterProvider, read after each
// invocation and flattened into observations.

// metricObs is one recorded observation: the instrument, its value (nil
// when a histogram point aggregates several) and its dimensions.
type metricObs struct {
	instrument string
	value      any
	dims       map[string]any
}

// newMetricCapture returns a MeterProvider recording into a ManualReader.
func newMetricCapture() (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	return r, sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
}

// collectMetrics flattens the reader's data points into observations: a
// histogram point of count n gives n observations (its sum as the value
// when n is 1), a counter point one observation (its sum: the increments
// with those dimensions).
func collectMetrics(r *sdkmetric.ManualReader) ([]metricObs, error) {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		return nil, err
	}
	var out []metricObs
	dims := func(s attribute.Set) map[string]any {
		m := map[string]any{}
		for _, kv := range s.ToSlice() {
			m[string(kv.Key)] = attrNative(kv.Value)
		}
		return m
	}
	add := func(name string, n uint64, sum any, s attribute.Set) {
		for range n {
			o := metricObs{instrument: name, dims: dims(s)}
			if n == 1 {
				o.value = normalize(sum)
			}
			out = append(out, o)
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Count, p.Sum, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Count, p.Sum, p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if p.Value != 0 {
						add(m.Name, 1, p.Value, p.Attributes)
					}
				}
			}
		}
	}
	return out, nil
}

// checkMetrics matches the expected observations with the recorded ones
// (conformance-adapter §5.8): each expected one must match a distinct
// recorded one (value compared only when the fixture gives it, §11.4);
// the list asserts recorded observations, not the whole set, except the
// empty list, which asserts that nothing was recorded. Absences are the
// fixtures' invariants.
func checkMetrics(m *matcher, want *Value, got []metricObs) error {
	if want.Kind != KindList {
		return schemaErrorf(want.Pos, "metrics must be a list")
	}
	if len(want.Items) == 0 && len(got) > 0 {
		return fmt.Errorf("metrics: want no observations, got %d %v", len(got), got)
	}
	used := make([]bool, len(got))
	for i, w := range want.Items {
		if err := hcStrictKeys(w, "metrics[]", "instrument", "value", "dimensions"); err != nil {
			return err
		}
		found := false
		for j, g := range got {
			if used[j] || metricMismatch(m, w, g) != nil {
				continue
			}
			used[j], found = true, true
			break
		}
		if !found {
			return fmt.Errorf("metrics[%d]: no recorded observation matches %s (recorded %v)", i, formatValue(w.Native()), got)
		}
	}
	return nil
}

func metricMismatch(m *matcher, w *Value, g metricObs) error {
	if inst, _ := w.Get("instrument"); inst == nil || inst.Str != g.instrument {
		return errors.New("instrument")
	}
	if v, ok := w.Get("value"); ok && !scalarEqual(v.Native(), g.value) {
		return errors.New("value")
	}
	if d, ok := w.Get("dimensions"); ok {
		return m.match("dimensions", d.Native(), g.dims, exact)
	}
	return nil
}

// metricInvariants are the §11 invariants over the observations.
var metricInvariants = map[string]func(obs []metricObs) (bool, string){
	"two_token_usage_observations_input_and_output": func(obs []metricObs) (bool, string) {
		in, out := countTokens(obs, "input"), countTokens(obs, "output")
		return in == 1 && out == 1, fmt.Sprintf("%d input, %d output observations", in, out)
	},
	"one_duration_observation_per_call": func(obs []metricObs) (bool, string) {
		n := countInstrument(obs, otelobserver.MetricOperationDuration)
		return n == 1, fmt.Sprintf("%d duration observations", n)
	},
	"duration_value_not_asserted":                   func([]metricObs) (bool, string) { return true, "" },
	"errored_call_records_duration_with_error_type": durationHasErrorType,
	"duration_records_error_type_on_failure":        durationHasErrorType,
	"no_token_usage_observation_on_failure": func(obs []metricObs) (bool, string) {
		n := countInstrument(obs, otelobserver.MetricTokenUsage)
		return n == 0, fmt.Sprintf("%d token observations", n)
	},
	"token_usage_recorded_on_structured_output_failure": func(obs []metricObs) (bool, string) {
		n := countInstrument(obs, otelobserver.MetricTokenUsage)
		return n > 0, "no token observation"
	},
	"no_measurements_recorded_when_metrics_off": func(obs []metricObs) (bool, string) {
		return len(obs) == 0, fmt.Sprintf("%d observations", len(obs))
	},
	"no_input_token_usage_observation_when_prompt_tokens_null": func(obs []metricObs) (bool, string) {
		n := countTokens(obs, "input")
		return n == 0, fmt.Sprintf("%d input observations", n)
	},
	"output_token_usage_observation_recorded_when_completion_sound": func(obs []metricObs) (bool, string) {
		n := countTokens(obs, "output")
		return n == 1, fmt.Sprintf("%d output observations", n)
	},
}

func countInstrument(obs []metricObs, name string) int {
	n := 0
	for _, o := range obs {
		if o.instrument == name {
			n++
		}
	}
	return n
}

func countTokens(obs []metricObs, typ string) int {
	n := 0
	for _, o := range obs {
		if o.instrument == otelobserver.MetricTokenUsage && o.dims[otelobserver.DimTokenType] == typ {
			n++
		}
	}
	return n
}

func durationHasErrorType(obs []metricObs) (bool, string) {
	for _, o := range obs {
		if o.instrument == otelobserver.MetricOperationDuration && o.dims[otelobserver.AttrErrorType] != nil {
			return true, ""
		}
	}
	return false, "no duration observation with error.type"
}

func init() {
	for name, f := range metricInvariants {
		obsLLMInvariants[name] = func(env *llmInvEnv, want *Value) error {
			obs, err := env.r.metricObservations()
			if err != nil {
				return err
			}
			ok, detail := f(obs)
			return compareBool(want, ok, detail)
		}
	}
}
