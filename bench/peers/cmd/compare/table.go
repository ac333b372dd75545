package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/armature-go/armature/bench/peers/internal/results"
)

// What a peer lacks, printed in place of its figure.
const (
	noHistory = "no history store"
	noSuspend = "no suspend outcome"
)

// targetKind is which target of BENCHMARKS.md a row is held to.
type targetKind int

const (
	noTarget      targetKind = iota
	quarterPeer              // at most 1/4 of the faster peer
	sqliteTurn               // at most 2 x B0 and at most 1/10 of ADK-Go's SQLite turn
	growth                   // H = 10 000 at most 1.5 x H = 10
	tenthOfEino              // at most 1/10 of Eino
	floorBaseline            // B0 itself: the baseline the SQLite targets use
)

// A peer column: a benchmark name, or what the peer lacks.
type cell struct {
	bench string // full benchmark name; for growth rows, the H = 10 000 one
	base  string // growth rows: the H = 10 one
	lacks string
}

// row is one workload of the table.
type row struct {
	workload                     string
	top                          string // top-level benchmark, e.g. "W1"
	armature, adk, eino, einoRaw cell
	target                       targetKind
}

func (r row) tops() []string {
	if r.target == sqliteTurn {
		return []string{r.top, "B0"}
	}
	return []string{r.top}
}

const b0 = "BenchmarkB0"

// rows returns the table's workloads in order.
func rows() []row {
	var rs []row
	peer := func(w, peer, rest string) cell { return cell{bench: "Benchmark" + w + "/peer=" + peer + "/" + rest} }
	arm := func(w, rest string) cell { return cell{bench: "Benchmark" + w + "/" + rest} }
	for _, store := range []string{"memory", "sqlite"} {
		for _, h := range []int{10, 1000, 10000} {
			rest := fmt.Sprintf("store=%s/history=%d", store, h)
			r := row{workload: fmt.Sprintf("W1 %s H=%d", store, h), top: "W1",
				armature: arm("W1", rest), adk: peer("W1", "adk", rest), target: quarterPeer,
				eino: cell{lacks: noHistory}, einoRaw: cell{lacks: noHistory}}
			if store == "memory" {
				r.eino, r.einoRaw = peer("W1", "eino", rest), peer("W1", "eino-graph", rest)
			} else {
				r.target = sqliteTurn
			}
			rs = append(rs, r)
		}
	}
	for _, store := range []string{"memory", "sqlite"} {
		g := func(c func(string) cell) cell {
			hi, lo := c("store="+store+"/history=10000"), c("store="+store+"/history=10")
			return cell{bench: hi.bench, base: lo.bench}
		}
		r := row{workload: "W1 growth " + store + " (H=10000 / H=10)", top: "W1", target: growth,
			armature: g(func(s string) cell { return arm("W1", s) }),
			adk:      g(func(s string) cell { return peer("W1", "adk", s) }),
			eino:     cell{lacks: noHistory}, einoRaw: cell{lacks: noHistory}}
		if store == "memory" {
			r.eino = g(func(s string) cell { return peer("W1", "eino", s) })
			r.einoRaw = g(func(s string) cell { return peer("W1", "eino-graph", s) })
		}
		rs = append(rs, r)
	}
	for _, w := range []string{"W2", "W3", "W4"} {
		for _, store := range []string{"memory", "sqlite"} {
			rest := "store=" + store
			r := row{workload: w + " " + store, top: w, armature: arm(w, rest), adk: peer(w, "adk", rest),
				eino: peer(w, "eino", rest), einoRaw: peer(w, "eino-graph", rest), target: quarterPeer}
			if store == "sqlite" {
				r.eino, r.einoRaw = cell{lacks: noHistory}, cell{lacks: noHistory}
				if w == "W2" {
					r.target = sqliteTurn
				}
			}
			if w == "W4" {
				r.adk, r.target = cell{lacks: noSuspend}, noTarget
				if store == "memory" {
					r.target = tenthOfEino
				}
			}
			rs = append(rs, r)
		}
	}
	rs = append(rs, row{workload: "B0 storage floor", top: "B0", armature: cell{bench: b0},
		adk: cell{lacks: "-"}, eino: cell{lacks: "-"}, einoRaw: cell{lacks: "-"}, target: floorBaseline})
	return rs
}

// figures holds the medians of both modules.
type figures struct {
	arm, peers map[string]results.Summary
}

func (f figures) ns(m map[string]results.Summary, name string) (float64, bool) {
	s, ok := m[name]
	return s.NsPerOp(), ok && s.NsPerOp() > 0
}

// value returns a cell's number: ns/op, or for growth rows the ratio.
func (f figures) value(m map[string]results.Summary, c cell) (float64, bool) {
	if c.lacks != "" || c.bench == "" {
		return 0, false
	}
	hi, ok := f.ns(m, c.bench)
	if c.base == "" || !ok {
		return hi, ok
	}
	lo, ok := f.ns(m, c.base)
	return hi / lo, ok
}

func (f figures) render(m map[string]results.Summary, c cell) string {
	if c.lacks != "" {
		return c.lacks
	}
	v, ok := f.value(m, c)
	switch {
	case !ok:
		return "n/a"
	case c.base != "":
		return fmt.Sprintf("x%.2f", v)
	}
	s := m[c.bench]
	return fmt.Sprintf("%s, %s, %s allocs", duration(v), size(s.BytesPerOp()), count(s.AllocsPerOp()))
}

// renderTable returns the markdown table with its footnotes.
func renderTable(rs []row, arm, peers map[string]results.Summary, runs int, benchtime string) string {
	f := figures{arm: arm, peers: peers}
	var b strings.Builder
	fmt.Fprintf(&b, "Medians of %d runs (-benchtime %s): time, bytes and allocations per op.\n\n", runs, benchtime)
	b.WriteString("| workload | Armature | ADK-Go | Eino | Eino graph (info) | Armature / faster peer | target | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		ratio, target, verdict := f.judge(r)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.workload,
			f.render(arm, r.armature), f.render(peers, r.adk), f.render(peers, r.eino), f.render(peers, r.einoRaw),
			ratio, target, verdict)
	}
	b.WriteString(`
ADK-Go: runner + LLM agent, in-memory or database session service (GORM, pure-Go SQLite, WAL, synchronous=NORMAL, unix-excl VFS, as Armature's store).
Eino: ChatModelAgent (ReAct over a compose graph) run by adk.Runner, checkpoints in memory; it keeps no chat history, so W1 passes the history in the input and its reply is not stored.
Eino graph: the bare flow/agent/react compose graph invoked directly (W4: nested in a graph with an in-memory checkpoint store), without runner or events; shown for information, not counted as the faster peer.
W2, W3 and W4 run on a new session (or checkpoint id) each op.
`)
	return b.String()
}

// judge returns a row's ratio column, target column and verdict.
func (f figures) judge(r row) (ratio, target, verdict string) {
	a, aok := f.value(f.arm, r.armature)
	adk, adkOK := f.value(f.peers, r.adk)
	eino, einoOK := f.value(f.peers, r.eino)
	verdictOf := func(ok, pass bool) string {
		switch {
		case !ok:
			return "n/a"
		case pass:
			return "PASS"
		}
		return "FAIL"
	}
	faster, fasterOK := math.Inf(1), false
	for _, p := range []struct {
		v  float64
		ok bool
	}{{adk, adkOK}, {eino, einoOK}} {
		if p.ok && p.v < faster {
			faster, fasterOK = p.v, true
		}
	}
	ratioOf := func(ok bool, d float64) string {
		if !aok || !ok {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", a/d)
	}
	switch r.target {
	case quarterPeer:
		return ratioOf(fasterOK, faster), "<= 1/4 of faster peer" + limit(fasterOK, faster/4),
			verdictOf(aok && fasterOK, a <= faster/4)
	case sqliteTurn:
		floor, floorOK := f.ns(f.arm, b0)
		return ratioOf(adkOK, adk), "<= 2 x B0" + limit(floorOK, 2*floor) + " and <= 1/10 of ADK-Go" + limit(adkOK, adk/10),
			verdictOf(aok && floorOK && adkOK, a <= 2*floor && a <= adk/10)
	case growth:
		return "-", "<= x1.50", verdictOf(aok, a <= 1.5)
	case tenthOfEino:
		return ratioOf(einoOK, eino), "<= 1/10 of Eino" + limit(einoOK, eino/10), verdictOf(aok && einoOK, a <= eino/10)
	case floorBaseline:
		return "-", "baseline of the SQLite targets", "-"
	}
	return ratioOf(fasterOK, faster), "-", "-"
}

func limit(ok bool, ns float64) string {
	if !ok {
		return ""
	}
	return " (" + duration(ns) + ")"
}

func duration(ns float64) string {
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.2f s", ns/1e9)
}

func size(b float64) string {
	switch {
	case b < 1024:
		return fmt.Sprintf("%.0f B", b)
	case b < 1024*1024:
		return fmt.Sprintf("%.1f KB", b/1024)
	}
	return fmt.Sprintf("%.1f MB", b/(1024*1024))
}

func count(n float64) string { return fmt.Sprintf("%.0f", n) }
