package main

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/bench/peers/internal/results"
	"github.com/google/go-cmp/cmp"
)

func summaries(ns map[string]float64) map[string]results.Summary {
	out := make(map[string]results.Summary, len(ns))
	for name, v := range ns {
		out[name] = results.Summary{Name: name, Runs: 1, Metrics: map[string]float64{results.UnitNs: v}}
	}
	return out
}

func TestJudge(t *testing.T) {
	arm := summaries(map[string]float64{
		"BenchmarkW2/store=memory":                 10e3,
		"BenchmarkW2/store=sqlite":                 300e3,
		"BenchmarkB0":                              100e3,
		"BenchmarkW1/store=memory/history=10":      10e3,
		"BenchmarkW1/store=memory/history=10000":   20e3,
		"BenchmarkW4/store=memory":                 100e3,
		"BenchmarkW3/store=memory":                 50e3,
		"BenchmarkW1/store=sqlite/history=10":      150e3,
		"BenchmarkW1/store=sqlite/history=10000":   200e3,
		"BenchmarkW1/store=sqlite/history=1000":    150e3,
		"BenchmarkW1/store=memory/history=1000":    1e9,
		"BenchmarkW3/store=sqlite":                 1e3,
		"BenchmarkW4/store=sqlite":                 1e3,
		"BenchmarkW2/peer=adk/store=memory":        1, // a peer name in the main module is ignored
		"BenchmarkW1/peer=adk/store=memory/hist=1": 1,
	})
	peers := summaries(map[string]float64{
		"BenchmarkW2/peer=adk/store=memory":            60e3,
		"BenchmarkW2/peer=eino/store=memory":           40e3,
		"BenchmarkW2/peer=adk/store=sqlite":            4e6,
		"BenchmarkW3/peer=adk/store=memory":            150e3,
		"BenchmarkW3/peer=eino/store=memory":           120e3,
		"BenchmarkW4/peer=eino/store=memory":           2e6,
		"BenchmarkW1/peer=adk/store=sqlite/history=10": 2e6,
	})
	want := map[string][3]string{
		"W2 memory":                         {"0.250", "<= 1/4 of faster peer (10.0 µs)", "PASS"},
		"W2 sqlite":                         {"0.075", "<= 2 x B0 (200.0 µs) and <= 1/10 of ADK-Go (400.0 µs)", "FAIL"},
		"W3 memory":                         {"0.417", "<= 1/4 of faster peer (30.0 µs)", "FAIL"},
		"W3 sqlite":                         {"n/a", "<= 1/4 of faster peer", "n/a"},
		"W4 memory":                         {"0.050", "<= 1/10 of Eino (200.0 µs)", "PASS"},
		"W4 sqlite":                         {"n/a", "-", "-"},
		"W1 sqlite H=10":                    {"0.075", "<= 2 x B0 (200.0 µs) and <= 1/10 of ADK-Go (200.0 µs)", "PASS"},
		"W1 sqlite H=1000":                  {"n/a", "<= 2 x B0 (200.0 µs) and <= 1/10 of ADK-Go", "n/a"},
		"W1 memory H=1000":                  {"n/a", "<= 1/4 of faster peer", "n/a"},
		"W1 growth memory (H=10000 / H=10)": {"-", "<= x1.50", "FAIL"},
		"W1 growth sqlite (H=10000 / H=10)": {"-", "<= x1.50", "PASS"},
	}
	f := figures{arm: arm, peers: peers}
	got := map[string][3]string{}
	for _, r := range rows() {
		if _, ok := want[r.workload]; ok {
			ratio, target, verdict := f.judge(r)
			got[r.workload] = [3]string{ratio, target, verdict}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("judge mismatch (-want +got):\n%s", diff)
	}
}

func TestRenderTable(t *testing.T) {
	peers := map[string]results.Summary{"BenchmarkW2/peer=adk/store=memory": {
		Metrics: map[string]float64{results.UnitNs: 75300, results.UnitBytes: 24 * 1024, results.UnitAllocs: 407}}}
	var sel []row
	for _, r := range rows() {
		if r.workload == "W2 memory" || r.workload == "W4 memory" {
			sel = append(sel, r)
		}
	}
	out := renderTable(sel, nil, peers, 5, "1s")
	for _, want := range []string{
		"| W2 memory | n/a | 75.3 µs, 24.0 KB, 407 allocs | n/a | n/a | n/a | <= 1/4 of faster peer (18.8 µs) | n/a |",
		"| W4 memory | n/a | no suspend outcome | n/a | n/a | n/a | <= 1/10 of Eino | n/a |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchPattern(t *testing.T) {
	var sel []row
	for _, r := range rows() {
		if strings.HasPrefix(r.workload, "W1 sqlite") || r.workload == "W4 memory" {
			sel = append(sel, r)
		}
	}
	if got, want := benchPattern(sel), "^Benchmark(B0|W1|W4)$"; got != want {
		t.Errorf("benchPattern = %q, want %q", got, want)
	}
}
