package main

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/bench/peers/internal/results"
	"github.com/google/go-cmp/cmp"
)

// runs returns one result per benchmark with the given ns/op.
func runs(ns map[string]float64) []results.Result {
	out := make([]results.Result, 0, len(ns))
	for name, v := range ns {
		out = append(out, results.Result{Name: name, N: 1, Metrics: map[string]float64{results.UnitNs: v}})
	}
	return out
}

// judged returns the judge columns of the rows named in want.
func judged[V any](f figures, want map[string]V) map[string][3]string {
	got := map[string][3]string{}
	for _, r := range rows() {
		if _, ok := want[r.workload]; ok {
			ratio, target, verdict := f.judge(r)
			got[r.workload] = [3]string{ratio, target, verdict}
		}
	}
	return got
}

func TestJudge(t *testing.T) {
	arm := runs(map[string]float64{
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
		"BenchmarkB0Postgres":                      400e3,
		"BenchmarkW1/store=postgres/history=10":    700e3,
		"BenchmarkW1/store=postgres/history=10000": 1.2e6,
		"BenchmarkW2/store=postgres":               900e3,
		"BenchmarkW2/peer=adk/store=memory":        1, // a peer name in the main module is ignored
		"BenchmarkW1/peer=adk/store=memory/hist=1": 1,
	})
	peers := runs(map[string]float64{
		"BenchmarkW2/peer=adk/store=memory":              60e3,
		"BenchmarkW2/peer=eino/store=memory":             40e3,
		"BenchmarkW2/peer=adk/store=sqlite":              4e6,
		"BenchmarkW3/peer=adk/store=memory":              150e3,
		"BenchmarkW3/peer=eino/store=memory":             120e3,
		"BenchmarkW4/peer=eino/store=memory":             2e6,
		"BenchmarkW1/peer=adk/store=sqlite/history=10":   2e6,
		"BenchmarkW1/peer=adk/store=postgres/history=10": 8e6,
		"BenchmarkW2/peer=adk/store=postgres":            3e6,
	})
	want := map[string][3]string{
		"W2 memory":                           {"0.250", "<= 1/4 of faster peer (10.0 µs)", "PASS"},
		"W2 sqlite":                           {"0.075", "<= 2 x B0 (200.0 µs) and <= 1/10 of ADK-Go (400.0 µs)", "FAIL"},
		"W3 memory":                           {"0.417", "<= 1/4 of faster peer (30.0 µs)", "FAIL"},
		"W3 sqlite":                           {"n/a", "<= 1/4 of faster peer", "n/a"},
		"W4 memory":                           {"0.050", "<= 1/10 of Eino (200.0 µs)", "PASS"},
		"W4 sqlite":                           {"n/a", "-", "-"},
		"W1 sqlite H=10":                      {"0.075", "<= 2 x B0 (200.0 µs) and <= 1/10 of ADK-Go (200.0 µs)", "PASS"},
		"W1 sqlite H=1000":                    {"n/a", "<= 2 x B0 (200.0 µs) and <= 1/10 of ADK-Go", "n/a"},
		"W1 memory H=1000":                    {"n/a", "<= 1/4 of faster peer", "n/a"},
		"W1 growth memory (H=10000 / H=10)":   {"-", "<= x1.50", "FAIL"},
		"W1 growth sqlite (H=10000 / H=10)":   {"-", "<= x1.50", "PASS"},
		"W1 postgres H=10":                    {"0.087", "<= 2 x B0-pg (800.0 µs) and <= 1/10 of ADK-Go (800.0 µs)", "PASS"},
		"W1 growth postgres (H=10000 / H=10)": {"-", "<= x1.50", "FAIL"},
		"W2 postgres":                         {"0.300", "<= 1/4 of faster peer (750.0 µs)", "FAIL"},
		"B0-pg storage floor":                 {"-", "baseline of the PostgreSQL targets", "-"},
	}
	got := judged(newFigures([]round{{arm: arm, peers: peers}}), want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("judge mismatch (-want +got):\n%s", diff)
	}
}

func TestRenderTable(t *testing.T) {
	peers := []results.Result{{Name: "BenchmarkW2/peer=adk/store=memory",
		Metrics: map[string]float64{results.UnitNs: 75300, results.UnitBytes: 24 * 1024, results.UnitAllocs: 407}}}
	var sel []row
	for _, r := range rows() {
		if r.workload == "W2 memory" || r.workload == "W4 memory" {
			sel = append(sel, r)
		}
	}
	out := renderTable(sel, newFigures([]round{{peers: peers}}), "1s", "10000x")
	for _, want := range []string{
		"| W2 memory | n/a | 75.3 µs, 24.0 KB, 407 allocs | n/a | n/a | n/a | <= 1/4 of faster peer (18.8 µs) | n/a |",
		"| W4 memory | n/a | no suspend outcome | n/a | n/a | n/a | <= 1/10 of Eino | n/a |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchPatterns(t *testing.T) {
	type pats = []benchPattern
	tests := []struct {
		name      string
		pick      func(workload string) bool
		arm, peer pats
	}{
		{"W1 postgres", func(w string) bool { return w == "W1 postgres H=10" },
			pats{{pattern: `^BenchmarkB0Postgres$`}, {pattern: `^BenchmarkW1$/^(store=postgres)$/^(history=10)$`}},
			pats{{pattern: `^BenchmarkW1$/^(peer=adk)$/^(store=postgres)$/^(history=10)$`}}},
		{"W1 durability full", func(w string) bool { return strings.HasPrefix(w, "W1 sqlite (durability full) H=") },
			pats{{pattern: `^BenchmarkB0Full$`}, {pattern: `^BenchmarkW1$/^(store=sqlite)$/^(sync=full)$/^(history=10|history=1000|history=10000)$`}},
			pats{{pattern: `^BenchmarkW1$/^(peer=adk)$/^(store=sqlite)$/^(sync=full)$/^(history=10|history=1000|history=10000)$`}}},
		{"W2 and W5", func(w string) bool { return w == "W2 memory" || w == "W5 memory" },
			pats{{pattern: `^BenchmarkW2$/^(store=memory)$`}, {pattern: `^BenchmarkW5$/^(store=memory)$`, w5: true}},
			pats{{pattern: `^BenchmarkW2$/^(peer=adk|peer=eino|peer=eino-graph)$/^(store=memory)$`}, {pattern: `^BenchmarkW5$/^(peer=adk)$/^(store=memory)$`, w5: true}}},
		{"W1 agent", func(w string) bool { return w == "W1 agent memory H=10" }, // the peers' W1 is the agent rows' peer
			pats{{pattern: `^BenchmarkW1Agent$/^(store=memory)$/^(history=10)$`}},
			pats{{pattern: `^BenchmarkW1$/^(peer=adk|peer=eino|peer=eino-graph)$/^(store=memory)$/^(history=10)$`}}},
		{"W2 agent sqlite", func(w string) bool { return w == "W2 agent sqlite" },
			pats{{pattern: `^BenchmarkB0$`}, {pattern: `^BenchmarkW2Agent$/^(store=sqlite)$`}},
			pats{{pattern: `^BenchmarkW2$/^(peer=adk)$/^(store=sqlite)$`}}},
		{"W1 memory growth", func(w string) bool { return w == "W1 growth memory (H=10000 / H=10)" },
			pats{{pattern: `^BenchmarkW1$/^(store=memory)$/^(history=10|history=10000)$`}},
			pats{{pattern: `^BenchmarkW1$/^(peer=adk|peer=eino|peer=eino-graph)$/^(store=memory)$/^(history=10|history=10000)$`}}},
		{"W3 memory with OTel", func(w string) bool { return w == "W3 memory with OTel observer" },
			pats{{pattern: `^BenchmarkW3$/^(store=memory)$`}, {pattern: `^BenchmarkW3Observed$/^(store=memory)$`}},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sel []row
			for _, r := range append(rows(), observerRows()...) {
				if tt.pick(r.workload) {
					sel = append(sel, r)
				}
			}
			if len(sel) == 0 {
				t.Fatal("no row picked")
			}
			if diff := cmp.Diff(tt.arm, benchPatterns(sel, sideArmature), cmp.AllowUnexported(benchPattern{})); diff != "" {
				t.Errorf("armature patterns mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.peer, benchPatterns(sel, sidePeers), cmp.AllowUnexported(benchPattern{})); diff != "" {
				t.Errorf("peers patterns mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoundOrder(t *testing.T) {
	var got [][]string
	for i := range 4 {
		got = append(got, roundOrder(i))
	}
	want := [][]string{{"peers", "armature"}, {"armature", "peers"}, {"peers", "armature"}, {"armature", "peers"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("roundOrder mismatch (-want +got):\n%s", diff)
	}
}

// TestJudgeRounds: ratios are taken within each round, the column shows
// their median and min–max, and the verdict follows the median ratio
// even where the ratio of the medians would say otherwise.
func TestJudgeRounds(t *testing.T) {
	const arm, adk, eino = "BenchmarkW2/store=memory", "BenchmarkW2/peer=adk/store=memory", "BenchmarkW2/peer=eino/store=memory"
	rounds := []round{
		// Armature's time and the peers' drift together: the per-round
		// ratios are 0.2, 0.24 and 0.3.
		{arm: runs(map[string]float64{arm: 10e3}), peers: runs(map[string]float64{adk: 50e3, eino: 60e3})},
		{arm: runs(map[string]float64{arm: 30e3}), peers: runs(map[string]float64{adk: 125e3, eino: 200e3})},
		{arm: runs(map[string]float64{arm: 24e3}), peers: runs(map[string]float64{adk: 200e3, eino: 80e3})},
	}
	want := map[string][3]string{
		// Medians: Armature 24 µs, ADK 125 µs, Eino 80 µs: the ratio of the
		// medians (0.300) would fail; the median ratio (0.240) passes.
		"W2 memory": {"0.240 (0.200–0.300)", "<= 1/4 of faster peer (20.0 µs)", "PASS"},
	}
	if diff := cmp.Diff(want, judged(newFigures(rounds), want)); diff != "" {
		t.Errorf("judge mismatch (-want +got):\n%s", diff)
	}
}

// TestJudgeThroughput: W5 is turns/s, higher is better: the durable
// SQLite row is held to at least 5 000 turns/s on the median over the
// rounds, the ratio column is the faster peer's turns/s over
// Armature's, and a missing benchmark is n/a.
func TestJudgeThroughput(t *testing.T) {
	tps := func(name string, v float64) results.Result {
		return results.Result{Name: name, N: 10000, Metrics: map[string]float64{results.UnitNs: 1e9 / v, unitTurns: v}}
	}
	const (
		full    = "BenchmarkW5/store=sqlite/sync=full"
		adkFull = "BenchmarkW5/peer=adk/store=sqlite/sync=full"
		normal  = "BenchmarkW5/store=sqlite/sync=normal"
		adkNorm = "BenchmarkW5/peer=adk/store=sqlite/sync=normal"
		memory  = "BenchmarkW5/store=memory"
	)
	tests := []struct {
		name   string
		rounds []round
		want   map[string][3]string
	}{
		{"over the target", []round{
			{arm: []results.Result{tps(full, 6000), tps(normal, 12000)}, peers: []results.Result{tps(adkFull, 100), tps(adkNorm, 200)}},
			{arm: []results.Result{tps(full, 4000), tps(normal, 10000)}, peers: []results.Result{tps(adkFull, 100), tps(adkNorm, 250)}},
			{arm: []results.Result{tps(full, 5500)}, peers: []results.Result{tps(adkFull, 110)}},
		}, map[string][3]string{
			"W5 sqlite (durability full)": {"0.020 (0.017–0.025)", ">= 5000 turns/s", "PASS"},
			"W5 sqlite":                   {"0.021 (0.017–0.025)", "-", "-"},
			"W5 memory":                   {"n/a", "-", "-"},
		}},
		{"under the target", []round{
			{arm: []results.Result{tps(full, 4900), tps(memory, 40000)}, peers: []results.Result{tps(adkFull, 100)}},
		}, map[string][3]string{
			"W5 sqlite (durability full)": {"0.020", ">= 5000 turns/s", "FAIL"},
			"W5 memory":                   {"n/a", "-", "-"},
		}},
		{"absent", nil, map[string][3]string{
			"W5 sqlite (durability full)": {"n/a", ">= 5000 turns/s", "n/a"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, judged(newFigures(tt.rounds), tt.want)); diff != "" {
				t.Errorf("judge mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenderRows: W5 cells show turns/s, the durability-full rows are
// held to the floor at the same level, and the W1 agent rows print n/a
// while the main module has no BenchmarkW1Agent.
func TestRenderRows(t *testing.T) {
	arm := []results.Result{
		{Name: "BenchmarkW5/store=sqlite/sync=full", Metrics: map[string]float64{results.UnitNs: 180e3, unitTurns: 5555}},
		{Name: "BenchmarkW1/store=sqlite/sync=full/history=10", Metrics: map[string]float64{results.UnitNs: 600e3, results.UnitBytes: 2048, results.UnitAllocs: 140}},
		{Name: "BenchmarkB0Full", Metrics: map[string]float64{results.UnitNs: 500e3}},
	}
	peers := []results.Result{
		{Name: "BenchmarkW1/peer=adk/store=sqlite/sync=full/history=10", Metrics: map[string]float64{results.UnitNs: 9e6}},
		{Name: "BenchmarkW1/peer=adk/store=memory/history=10", Metrics: map[string]float64{results.UnitNs: 200e3}},
	}
	var sel []row
	for _, r := range rows() {
		switch r.workload {
		case "W5 sqlite (durability full)", "W1 sqlite (durability full) H=10", "W1 agent memory H=10", "B0 storage floor (durability full)":
			sel = append(sel, r)
		}
	}
	out := renderTable(sel, newFigures([]round{{arm: arm, peers: peers}}), "1s", "10000x")
	for _, want := range []string{
		"| W5 sqlite (durability full) | 5555 turns/s (180.0 µs a turn) | n/a | no history store | no history store | n/a | >= 5000 turns/s | PASS |",
		"| W1 sqlite (durability full) H=10 | 600.0 µs, 2.0 KB, 140 allocs | 9.00 ms, 0 B, 0 allocs | no history store | no history store | 0.067 | <= 2 x B0 full (1.00 ms) and <= 1/10 of ADK-Go (900.0 µs) | PASS |",
		"| W1 agent memory H=10 | n/a | 200.0 µs, 0 B, 0 allocs | n/a | n/a | n/a | <= 1/4 of faster peer (50.0 µs) | n/a |",
		"| B0 storage floor (durability full) | 500.0 µs, 0 B, 0 allocs | - | - | - | - | baseline of the SQLite targets | - |",
		"1 rounds",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestJudgeObserverRows(t *testing.T) {
	arm := runs(map[string]float64{
		"BenchmarkW1/store=memory/history=10":         10e3,
		"BenchmarkW1Observed/store=memory/history=10": 12e3,
		"BenchmarkW3/store=memory":                    20e3,
		"BenchmarkW3Observed/store=memory":            30e3,
		"BenchmarkW3Observed/store=sqlite":            30e3,
		"BenchmarkOTelFloor/W1":                       6e3,
	})
	want := map[string][3]string{
		"W1 memory: OTel SDK floor (info)":  {"0.600", "info: the observer's budget is x0.25 of without (2.5 µs)", "-"},
		"W3 memory: OTel SDK floor (info)":  {"n/a", "info: the observer's budget is x0.25 of without (5.0 µs)", "-"},
		"W1 memory H=10 with OTel observer": {"1.200", "<= x1.25 of without (12.5 µs)", "PASS"},
		"W3 memory with OTel observer":      {"1.500", "<= x1.25 of without (25.0 µs)", "FAIL"},
		"W3 sqlite with OTel observer":      {"n/a", "<= x1.25 of without", "n/a"},
	}
	f := newFigures([]round{{arm: arm}})
	got := map[string][3]string{}
	for _, r := range observerRows() {
		if _, ok := want[r.workload]; ok {
			ratio, target, verdict := f.judge(r)
			got[r.workload] = [3]string{ratio, target, verdict}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("judge mismatch (-want +got):\n%s", diff)
	}
	// An observer row runs its plain benchmark too.
	if got := benchPatterns(observerRows()[:1], sideArmature); len(got) != 2 || got[0].pattern != "^BenchmarkW1$/^(store=memory)$/^(history=10)$" {
		t.Errorf("patterns %v", got)
	}
	// A floor row runs the floor and its plain benchmark.
	floors := observerRows()[len(observerRows())-2:]
	if got := benchPatterns(floors, sideArmature); len(got) != 3 || got[0].pattern != "^BenchmarkOTelFloor$/^(W1|W3)$" {
		t.Errorf("floor patterns %v", got)
	}
}

func TestMainDir(t *testing.T) {
	for _, tt := range []struct{ peers, main, want string }{
		{".", "../..", "../.."},
		{"bench/peers", "../..", "."},
		{".", "/work/old", "/work/old"},
	} {
		if got := mainDir(options{peersDir: tt.peers, mainDir: tt.main}); got != tt.want {
			t.Errorf("mainDir(%q, %q) = %q, want %q", tt.peers, tt.main, got, tt.want)
		}
	}
}
