package results_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/armature-go/armature/bench/peers/internal/results"
	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	sample, err := os.ReadFile("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	std := func(name string, n int, ns, b, allocs float64) results.Result {
		return results.Result{Name: name, N: n, Metrics: map[string]float64{
			results.UnitNs: ns, results.UnitBytes: b, results.UnitAllocs: allocs}}
	}
	tests := []struct {
		name    string
		in      string
		want    []results.Result
		wantErr error
	}{
		{name: "empty", in: ""},
		{name: "no benchmarks", in: "PASS\nok  \tpkg\t0.1s\n"},
		{name: "sample", in: string(sample), want: []results.Result{
			std("BenchmarkW2/peer=adk/store=memory", 200, 64876, 21528, 385),
			std("BenchmarkW2/peer=adk/store=memory", 200, 70000, 21600, 386),
			std("BenchmarkW2/peer=adk/store=memory", 200, 60000, 21500, 385),
			{Name: "BenchmarkW5/store=sqlite", N: 1, Metrics: map[string]float64{
				results.UnitNs: 1234567890, "turns/s": 5123, results.UnitBytes: 1000, results.UnitAllocs: 10}},
			{Name: "BenchmarkB0", N: 10000, Metrics: map[string]float64{results.UnitNs: 101234.5}},
		}},
		{name: "no procs suffix", in: "BenchmarkW1/store=memory/history=10 \t 5 \t 7 ns/op\n",
			want: []results.Result{{Name: "BenchmarkW1/store=memory/history=10", N: 5, Metrics: map[string]float64{results.UnitNs: 7}}}},
		{name: "sub-benchmark name with digits keeps them", in: "BenchmarkW1/history=10000-8 1 9 ns/op\n",
			want: []results.Result{{Name: "BenchmarkW1/history=10000", N: 1, Metrics: map[string]float64{results.UnitNs: 9}}}},
		{name: "log line skipped", in: "BenchmarkW3 is slow today\n"},
		{name: "bad value", in: "BenchmarkW2-2 10 fast ns/op\n", wantErr: results.ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := results.Parse(strings.NewReader(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMedians(t *testing.T) {
	f, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := results.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	got := results.Medians(rs)
	want := map[string]results.Summary{
		"BenchmarkW2/peer=adk/store=memory": {Name: "BenchmarkW2/peer=adk/store=memory", Runs: 3,
			Metrics: map[string]float64{results.UnitNs: 64876, results.UnitBytes: 21528, results.UnitAllocs: 385}},
		"BenchmarkW5/store=sqlite": {Name: "BenchmarkW5/store=sqlite", Runs: 1,
			Metrics: map[string]float64{results.UnitNs: 1234567890, "turns/s": 5123, results.UnitBytes: 1000, results.UnitAllocs: 10}},
		"BenchmarkB0": {Name: "BenchmarkB0", Runs: 1, Metrics: map[string]float64{results.UnitNs: 101234.5}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Medians mismatch (-want +got):\n%s", diff)
	}
	if s := got["BenchmarkB0"]; s.NsPerOp() != 101234.5 || s.BytesPerOp() != 0 || s.AllocsPerOp() != 0 {
		t.Errorf("accessors = %v, %v, %v", s.NsPerOp(), s.BytesPerOp(), s.AllocsPerOp())
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := results.Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if diff := cmp.Diff(in, tt.in); diff != "" {
			t.Errorf("Median modified its input: %s", diff)
		}
	}
}
