package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/armature-go/armature/bench/peers/internal/results"
)

// What a peer lacks, printed in place of its figure.
const (
	noHistory = "no history store"
	noSuspend = "no suspend outcome"
)

// unitTurns is the metric W5 reports besides ns/op.
const unitTurns = "turns/s"

// w5Target is the W5 target of BENCHMARKS.md on SQLite: durable turns/s.
const w5Target = 5000

// targetKind is which target of BENCHMARKS.md a row is held to.
type targetKind int

const (
	noTarget         targetKind = iota
	quarterPeer                 // at most 1/4 of the faster peer
	storeTurn                   // at most 2 x the store's floor (B0, B0-pg) and at most 1/10 of ADK-Go's turn on the same store
	growth                      // H = 10 000 at most 1.5 x H = 10
	tenthOfEino                 // at most 1/10 of Eino
	floorBaseline               // B0 or B0-pg itself: the baseline the store targets use
	throughput                  // W5: turns/s, higher is better; on durable SQLite at least w5Target
	observerOverhead            // with the OTel observer at most observerMax x the plain Armature row
	observerFloor               // the OTel SDK's own work for the observer's spans (info): over the plain row
)

// observerMax bounds an OTel-observer row: the turn with the observer
// installed (no-op exporter) over the same turn without it.
const observerMax = 1.25

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
	floor                        string // storeTurn rows: the floor benchmark (b0, b0Full or b0pg)
	min                          float64
	// plain is an observerOverhead row's benchmark without the observer.
	plain string
}

// The storage floors: the bare turn transaction on SQLite (at
// synchronous NORMAL and FULL), on PostgreSQL.
const (
	b0     = "BenchmarkB0"
	b0Full = "BenchmarkB0Full"
	b0pg   = "BenchmarkB0Postgres"
)

// store is a store the workloads run on: its name in benchmark names
// (store=...) and in the table.
type store struct{ key, label string }

// floorOf is the floor of a store's storeTurn rows ("" for memory).
func floorOf(s store) string {
	switch s.key {
	case "sqlite":
		return b0
	case "sqlite/sync=full":
		return b0Full
	case "postgres":
		return b0pg
	}
	return ""
}

// observerRows are the rows of -otel: W1 and W3 with the OTel observer
// installed (BenchmarkW1Observed, BenchmarkW3Observed: a no-op exporter),
// each held to observerMax x the same row without it.
func observerRows() []row {
	var rs []row
	none := cell{lacks: "-"}
	add := func(workload, w, rest string) {
		rs = append(rs, row{workload: workload + " with OTel observer", top: w + "Observed",
			armature: cell{bench: "Benchmark" + w + "Observed/" + rest}, adk: none, eino: none, einoRaw: none,
			target: observerOverhead, plain: "Benchmark" + w + "/" + rest})
	}
	for _, s := range []string{"memory", "sqlite"} {
		for _, h := range []int{10, 1000, 10000} {
			add(fmt.Sprintf("W1 %s H=%d", s, h), "W1", fmt.Sprintf("store=%s/history=%d", s, h))
		}
	}
	for _, s := range []string{"memory", "sqlite"} {
		add("W3 "+s, "W3", "store="+s)
	}
	// The floor under the in-memory rows: the spans the observer renders
	// for one turn, created straight through the SDK (BenchmarkOTelFloor).
	for _, f := range []struct{ w, plain string }{{"W1", "W1/store=memory/history=10"}, {"W3", "W3/store=memory"}} {
		rs = append(rs, row{workload: f.w + " memory: OTel SDK floor (info)", top: "OTelFloor",
			armature: cell{bench: "BenchmarkOTelFloor/" + f.w}, adk: none, eino: none, einoRaw: none,
			target: observerFloor, plain: "Benchmark" + f.plain})
	}
	return rs
}

// rows returns the table's workloads in order.
func rows() []row {
	var (
		rs         []row
		memory     = store{"memory", "memory"}
		sqliteNorm = store{"sqlite", "sqlite"}
		sqliteFull = store{"sqlite/sync=full", "sqlite (durability full)"}
		postgres   = store{"postgres", "postgres"}
	)
	peer := func(w, peer, rest string) cell { return cell{bench: "Benchmark" + w + "/peer=" + peer + "/" + rest} }
	arm := func(w, rest string) cell { return cell{bench: "Benchmark" + w + "/" + rest} }
	lacking := func(r *row) { r.eino, r.einoRaw = cell{lacks: noHistory}, cell{lacks: noHistory} }
	// W1, then W1 through the agent graph where the main module has it
	// (BenchmarkW1Agent; n/a otherwise), against the peers' W1.
	for _, w := range []struct{ top, name string }{{"W1", "W1"}, {"W1Agent", "W1 agent"}} {
		stores := []store{memory, sqliteNorm, sqliteFull, postgres}
		if w.top == "W1Agent" {
			stores = []store{memory, sqliteNorm}
		}
		for _, s := range stores {
			for _, h := range []int{10, 1000, 10000} {
				rest := fmt.Sprintf("store=%s/history=%d", s.key, h)
				r := row{workload: fmt.Sprintf("%s %s H=%d", w.name, s.label, h), top: w.top,
					armature: arm(w.top, rest), adk: peer("W1", "adk", rest), target: quarterPeer}
				lacking(&r)
				if s == memory {
					r.eino, r.einoRaw = peer("W1", "eino", rest), peer("W1", "eino-graph", rest)
				} else {
					r.target, r.floor = storeTurn, floorOf(s)
				}
				rs = append(rs, r)
			}
		}
	}
	for _, s := range []store{memory, sqliteNorm, sqliteFull, postgres} {
		g := func(c func(string) cell) cell {
			hi, lo := c("store="+s.key+"/history=10000"), c("store="+s.key+"/history=10")
			return cell{bench: hi.bench, base: lo.bench}
		}
		r := row{workload: "W1 growth " + s.label + " (H=10000 / H=10)", top: "W1", target: growth,
			armature: g(func(rest string) cell { return arm("W1", rest) }),
			adk:      g(func(rest string) cell { return peer("W1", "adk", rest) })}
		lacking(&r)
		if s == memory {
			r.eino = g(func(rest string) cell { return peer("W1", "eino", rest) })
			r.einoRaw = g(func(rest string) cell { return peer("W1", "eino-graph", rest) })
		}
		rs = append(rs, r)
	}
	for _, w := range []string{"W2", "W3", "W4"} {
		for _, s := range []store{memory, sqliteNorm, postgres} {
			rest := "store=" + s.key
			r := row{workload: w + " " + s.label, top: w, armature: arm(w, rest), adk: peer(w, "adk", rest),
				eino: peer(w, "eino", rest), einoRaw: peer(w, "eino-graph", rest), target: quarterPeer}
			if s != memory {
				lacking(&r)
				if w == "W2" && s == sqliteNorm {
					r.target, r.floor = storeTurn, b0
				}
			}
			if w == "W4" {
				r.adk, r.target = cell{lacks: noSuspend}, noTarget
				if s == memory {
					r.target = tenthOfEino
				}
			}
			rs = append(rs, r)
		}
	}
	// W2 through the agent graph (BenchmarkW2Agent), against the peers' W2.
	for _, s := range []store{memory, sqliteNorm} {
		rest := "store=" + s.key
		r := row{workload: "W2 agent " + s.label, top: "W2Agent", armature: arm("W2Agent", rest), adk: peer("W2", "adk", rest),
			eino: peer("W2", "eino", rest), einoRaw: peer("W2", "eino-graph", rest), target: quarterPeer}
		if s != memory {
			lacking(&r)
			r.target, r.floor = storeTurn, b0
		}
		rs = append(rs, r)
	}
	// W5: the SQLite store at both levels (sync=normal, sync=full); the
	// target is on the durable one.
	for _, s := range []store{memory, {"sqlite/sync=normal", "sqlite"}, sqliteFull, postgres} {
		rest := "store=" + s.key
		r := row{workload: "W5 " + s.label, top: "W5", armature: arm("W5", rest), adk: peer("W5", "adk", rest),
			target: throughput}
		lacking(&r)
		if s == sqliteFull {
			r.min = w5Target
		}
		rs = append(rs, r)
	}
	floor := func(name, bench string) row {
		return row{workload: name, top: strings.TrimPrefix(bench, "Benchmark"), armature: cell{bench: bench},
			adk: cell{lacks: "-"}, eino: cell{lacks: "-"}, einoRaw: cell{lacks: "-"}, target: floorBaseline}
	}
	return append(rs, floor("B0 storage floor", b0), floor("B0 storage floor (durability full)", b0Full),
		floor("B0-pg storage floor", b0pg))
}

// round is one round of the comparison: each module's benchmarks run
// once (-count 1).
type round struct {
	arm, peers []results.Result
}

// figures holds the medians of both modules over the rounds, and each
// round's figures.
type figures struct {
	arm, peers map[string]results.Summary
	rounds     []figures // one per round (their rounds are nil)
}

// newFigures reduces the rounds to medians.
func newFigures(rounds []round) figures {
	var f figures
	var arm, peers []results.Result
	for _, r := range rounds {
		arm, peers = append(arm, r.arm...), append(peers, r.peers...)
		f.rounds = append(f.rounds, figures{arm: results.Medians(r.arm), peers: results.Medians(r.peers)})
	}
	f.arm, f.peers = results.Medians(arm), results.Medians(peers)
	return f
}

func metric(m map[string]results.Summary, name, unit string) (float64, bool) {
	v := m[name].Metrics[unit]
	return v, v > 0
}

func (f figures) ns(m map[string]results.Summary, name string) (float64, bool) {
	return metric(m, name, results.UnitNs)
}

// value returns a cell's number: ns/op (turns/s for throughput rows),
// or for growth rows the ratio.
func (f figures) value(m map[string]results.Summary, c cell, kind targetKind) (float64, bool) {
	if c.lacks != "" || c.bench == "" {
		return 0, false
	}
	if kind == throughput {
		return metric(m, c.bench, unitTurns)
	}
	hi, ok := f.ns(m, c.bench)
	if c.base == "" || !ok {
		return hi, ok
	}
	lo, ok := f.ns(m, c.base)
	return hi / lo, ok
}

func (f figures) render(m map[string]results.Summary, c cell, kind targetKind) string {
	if c.lacks != "" {
		return c.lacks
	}
	v, ok := f.value(m, c, kind)
	switch {
	case !ok:
		return "n/a"
	case c.base != "":
		return fmt.Sprintf("x%.2f", v)
	}
	s := m[c.bench]
	if kind == throughput {
		return fmt.Sprintf("%s turns/s (%s a turn)", count(v), duration(s.NsPerOp()))
	}
	return fmt.Sprintf("%s, %s, %s allocs", duration(v), size(s.BytesPerOp()), count(s.AllocsPerOp()))
}

// renderTable returns the markdown table with its footnotes.
func renderTable(rs []row, f figures, benchtime, w5Benchtime string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds, each running the peers' and Armature's benchmarks once (-count 1), alternating which goes first; -benchtime %s (W5: %s).\n", len(f.rounds), benchtime, w5Benchtime)
	b.WriteString("Figures are medians over the rounds (time, bytes and allocations per op; W5 turns/s). Ratios are computed per round; the ratio column is the median with its min–max, and targets are judged on the median ratio.\n\n")
	b.WriteString("| workload | Armature | ADK-Go | Eino | Eino graph (info) | Armature / faster peer | target | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		ratio, target, verdict := f.judge(r)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.workload,
			f.render(f.arm, r.armature, r.target), f.render(f.peers, r.adk, r.target), f.render(f.peers, r.eino, r.target),
			f.render(f.peers, r.einoRaw, r.target), ratio, target, verdict)
	}
	b.WriteString(`
ADK-Go: runner + LLM agent, in-memory or database session service (GORM, pure-Go SQLite, WAL, synchronous=NORMAL or FULL as the row says, unix-excl VFS, as Armature's store, on one connection with BEGIN IMMEDIATE; or GORM on PostgreSQL through pgx, the same database as Armature's store/postgres, default durability).
Eino: ChatModelAgent (ReAct over a compose graph) run by adk.Runner, checkpoints in memory; it keeps no chat history, so W1 passes the history in the input and its reply is not stored.
Eino graph: the bare flow/agent/react compose graph invoked directly (W4: nested in a graph with an in-memory checkpoint store), without runner or events; shown for information, not counted as the faster peer.
W2, W3 and W4 run on a new session (or checkpoint id) each op.
Durability full: SQLite acknowledging a write only once the WAL holding its commit is fsynced (Armature: sqlite.DurabilityFull, a pipelined group commit, armature serve's default; ADK-Go: synchronous=FULL), its files on the disk; its rows are held to the floor at the same level (B0 durability full).
With OTel observer (-otel): the same turn with observe/otelobserver installed, its spans batched to a no-op exporter; its ratio column is over the row without the observer. OTel SDK floor: the spans the observer renders for one such turn, created and ended straight through the SDK (same batcher, no-op exporter, no engine, no observer); its ratio column is over the turn without the observer, to set beside the observer's budget (0.25).
W5: 100 sessions x 100 turns a block, 2 x GOMAXPROCS drivers, one op a turn; higher turns/s is better, and its ratio column is still a cost ratio (the faster peer's turns/s over Armature's), so below 1 means Armature is faster.
`)
	return b.String()
}

// spread is a ratio over the rounds: its median, min and max.
type spread struct {
	med, lo, hi float64
	ok          bool
}

// perRound returns the spread of fn over the rounds where it is defined.
func (f figures) perRound(fn func(figures) (float64, bool)) spread {
	var vs []float64
	for _, r := range f.rounds {
		if v, ok := fn(r); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return spread{}
	}
	return spread{med: results.Median(vs), lo: slices.Min(vs), hi: slices.Max(vs), ok: true}
}

func (s spread) String() string {
	switch {
	case !s.ok:
		return "n/a"
	case s.lo == s.hi:
		return fmt.Sprintf("%.3f", s.med)
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", s.med, s.lo, s.hi)
}

// faster returns the faster peer's figure (ns/op, or turns/s for
// throughput) of a row in f: ADK-Go or Eino.
func (f figures) faster(r row) (float64, bool) {
	best, ok := 0.0, false
	for _, c := range []cell{r.adk, r.eino} {
		v, vok := f.value(f.peers, c, r.target)
		if !vok {
			continue
		}
		if !ok || (r.target == throughput && v > best) || (r.target != throughput && v < best) {
			best, ok = v, true
		}
	}
	return best, ok
}

// judge returns a row's ratio column, target column and verdict.
func (f figures) judge(r row) (ratio, target, verdict string) {
	verdictOf := func(s spread, pass func(float64) bool) string {
		switch {
		case !s.ok:
			return "n/a"
		case pass(s.med):
			return "PASS"
		}
		return "FAIL"
	}
	// Armature's figure over a peer's (or floor's), per round.
	over := func(other func(figures) (float64, bool)) spread {
		return f.perRound(func(g figures) (float64, bool) {
			a, aok := g.value(g.arm, r.armature, r.target)
			o, ook := other(g)
			if !aok || !ook {
				return 0, false
			}
			if r.target == throughput {
				return o / a, true
			}
			return a / o, true
		})
	}
	fasterPeer := over(func(g figures) (float64, bool) { return g.faster(r) })
	fast, fastOK := f.faster(r)
	switch r.target {
	case quarterPeer:
		return fasterPeer.String(), "<= 1/4 of faster peer" + limit(fastOK, fast/4),
			verdictOf(fasterPeer, func(v float64) bool { return v <= 0.25 })
	case storeTurn:
		adk := over(func(g figures) (float64, bool) { return g.value(g.peers, r.adk, r.target) })
		floor := over(func(g figures) (float64, bool) { return g.ns(g.arm, r.floor) })
		adkNs, adkOK := f.value(f.peers, r.adk, r.target)
		floorNs, floorOK := f.ns(f.arm, r.floor)
		name := map[string]string{b0: "B0", b0Full: "B0 full", b0pg: "B0-pg"}[r.floor]
		v := "n/a"
		if adk.ok && floor.ok {
			v = "FAIL"
			if floor.med <= 2 && adk.med <= 0.1 {
				v = "PASS"
			}
		}
		return adk.String(), "<= 2 x " + name + limit(floorOK, 2*floorNs) + " and <= 1/10 of ADK-Go" + limit(adkOK, adkNs/10), v
	case growth:
		g := f.perRound(func(g figures) (float64, bool) { return g.value(g.arm, r.armature, r.target) })
		return "-", "<= x1.50", verdictOf(g, func(v float64) bool { return v <= 1.5 })
	case tenthOfEino:
		eino := over(func(g figures) (float64, bool) { return g.value(g.peers, r.eino, r.target) })
		einoNs, einoOK := f.value(f.peers, r.eino, r.target)
		return eino.String(), "<= 1/10 of Eino" + limit(einoOK, einoNs/10), verdictOf(eino, func(v float64) bool { return v <= 0.1 })
	case observerOverhead:
		o := over(func(g figures) (float64, bool) { return g.ns(g.arm, r.plain) })
		plainNs, plainOK := f.ns(f.arm, r.plain)
		return o.String(), fmt.Sprintf("<= x%.2f of without", observerMax) + limit(plainOK, observerMax*plainNs),
			verdictOf(o, func(v float64) bool { return v <= observerMax })
	case observerFloor:
		o := over(func(g figures) (float64, bool) { return g.ns(g.arm, r.plain) })
		plainNs, plainOK := f.ns(f.arm, r.plain)
		return o.String(), fmt.Sprintf("info: the observer's budget is x%.2f of without", observerMax-1) + limit(plainOK, (observerMax-1)*plainNs), "-"
	case floorBaseline:
		if r.armature.bench == b0pg {
			return "-", "baseline of the PostgreSQL targets", "-"
		}
		return "-", "baseline of the SQLite targets", "-"
	case throughput:
		if r.min == 0 {
			return fasterPeer.String(), "-", "-"
		}
		tps := f.perRound(func(g figures) (float64, bool) { return g.value(g.arm, r.armature, r.target) })
		return fasterPeer.String(), fmt.Sprintf(">= %s turns/s", count(r.min)), verdictOf(tps, func(v float64) bool { return v >= r.min })
	}
	return fasterPeer.String(), "-", "-"
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
