// Command compare runs the standard workloads on Armature (the main
// module's bench package) and on its peers (this module), and prints one
// markdown table side by side: medians of ns/op, B/op and allocs/op (W5:
// turns/s), the ratio of Armature to the faster peer, and the targets of
// BENCHMARKS.md with PASS or FAIL.
//
// Usage, from the repository root:
//
//	cd bench/peers && go run ./cmd/compare [-count 5] [-benchtime 1s] [-w5-benchtime 10000x] [-otel] [-filter REGEXP]
//
// The comparison runs in -count rounds. In round i it runs the peers'
// benchmarks once (-count 1), then the main module's once, or the other
// way round on odd rounds, so that drift of a shared machine (other
// load, thermal state, the page cache) falls on both sides alike. Every
// ratio (Armature over a peer, over a storage floor, H=10 000 over
// H=10) is computed within each round; the table shows the median of
// the per-round ratios with their min–max, next to the medians of the
// times, and judges the targets on the median ratio. W5 runs with its
// own -w5-benchtime: one op is a turn, and 10000x is one whole block of
// 100 sessions x 100 turns.
//
// -otel adds the rows of W1 and W3 with the OTel observer installed (a
// no-op exporter), each held to 1.25 x the same turn without it; the
// plain rows they refer to run too.
//
// -filter selects table rows by workload name (e.g. "W2", "sqlite",
// "H=10$", "durability full"); only the top-level benchmarks those rows
// need run. A workload the main module does not have (yet) prints "n/a";
// a capability a peer lacks prints what it lacks instead of a figure.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/armature-go/armature/bench/peers/internal/results"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// options are compare's flags.
type options struct {
	count                  int
	benchtime, w5Benchtime string
	peersDir, mainDir      string
	verbose                bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.count, "count", 5, "rounds: each runs every benchmark once per module, alternating which module goes first; the table shows medians")
	fs.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime for every benchmark but W5")
	fs.StringVar(&o.w5Benchtime, "w5-benchtime", "10000x", "go test -benchtime for W5 (one op a turn; 10000x is one block of 100 sessions x 100 turns)")
	filter := fs.String("filter", "", "regexp selecting table rows by workload name")
	otel := fs.Bool("otel", false, "add the W1 / W3 rows with the OTel observer installed (no-op exporter), held to 1.25 x the rows without it")
	fs.StringVar(&o.peersDir, "peers", ".", "directory of the peers module")
	fs.StringVar(&o.mainDir, "main", "../..", "directory of the main module (relative to -peers unless absolute): another checkout measures an older build against the same peers")
	fs.BoolVar(&o.verbose, "v", false, "copy go test output to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.count < 1 {
		return errors.New("-count must be at least 1")
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return fmt.Errorf("-filter: %w", err)
	}
	all := rows()
	if *otel {
		all = append(all, observerRows()...)
	}
	var selected []row
	for _, r := range all {
		if re.MatchString(r.workload) {
			selected = append(selected, r)
		}
	}
	if len(selected) == 0 {
		return fmt.Errorf("-filter %q selects no workload", *filter)
	}
	rounds := make([]round, 0, o.count)
	for i := range o.count {
		var r round
		for _, side := range roundOrder(i) {
			var dir, pkg string
			var dst *[]results.Result
			if side == sidePeers {
				dir, pkg, dst = o.peersDir, ".", &r.peers
			} else {
				dir, pkg, dst = mainDir(o), "./bench", &r.arm
			}
			for _, p := range benchPatterns(selected, side) {
				bt := o.benchtime
				if p.w5 {
					bt = o.w5Benchtime
				}
				fmt.Fprintf(stderr, "compare: round %d/%d, %s: go test -bench '%s' -count 1 -benchtime %s %s (in %s)\n", i+1, o.count, side, p.pattern, bt, pkg, dir)
				rs, err := goTest(ctx, o, dir, pkg, p.pattern, bt, stderr)
				if err != nil {
					return fmt.Errorf("%s: %w", side, err)
				}
				*dst = append(*dst, rs...)
			}
		}
		rounds = append(rounds, r)
	}
	fmt.Fprint(stdout, renderTable(selected, newFigures(rounds), o.benchtime, o.w5Benchtime))
	return nil
}

// mainDir returns the main module's directory: -main as given when it
// is absolute, else relative to -peers.
func mainDir(o options) string {
	if filepath.IsAbs(o.mainDir) {
		return o.mainDir
	}
	return filepath.Join(o.peersDir, o.mainDir)
}

// roundOrder returns which module runs first in round i: the peers on
// even rounds, Armature on odd ones.
func roundOrder(i int) []string {
	if i%2 == 0 {
		return []string{sidePeers, sideArmature}
	}
	return []string{sideArmature, sidePeers}
}

// goTest runs the benchmarks matching pattern once in package pkg of the
// module in dir and returns their results. A benchmark that fails or is
// missing is left out (its cells print "n/a"); what did run is kept.
func goTest(ctx context.Context, o options, dir, pkg, pattern, benchtime string, stderr io.Writer) ([]results.Result, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-timeout", "0", "-bench", pattern, "-benchmem",
		"-count", "1", "-benchtime", benchtime, pkg)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if o.verbose {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, stderr), io.MultiWriter(&out, stderr)
	}
	runErr := cmd.Run()
	rs, err := results.Parse(bytes.NewReader(out.Bytes()))
	if err != nil {
		return nil, err
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "compare: %s: %v\n%s", pkg, runErr, tail(out.String(), 20))
	}
	return rs, nil
}

// benchPattern is one go test -bench pattern of a round; w5 patterns
// run with -w5-benchtime.
type benchPattern struct {
	pattern string
	w5      bool
}

// Sides of a round: the module a benchmark name belongs to.
const (
	sideArmature = "armature"
	sidePeers    = "peers"
)

// benches returns the full benchmark names a row reads, per module: the
// Armature cell (its base for growth rows), the floor and the plain row
// it is held to; the peers' cells.
func (r row) benches() (arm, peers []string) {
	add := func(dst *[]string, names ...string) {
		for _, n := range names {
			if n != "" {
				*dst = append(*dst, n)
			}
		}
	}
	add(&arm, r.armature.bench, r.armature.base, r.plain)
	if r.target == storeTurn {
		add(&arm, r.floor)
	}
	for _, c := range []cell{r.adk, r.eino, r.einoRaw} {
		add(&peers, c.bench, c.base)
	}
	return arm, peers
}

// benchPatterns returns the go test -bench patterns that run exactly the
// benchmarks the rows read in one module (side), and no sibling
// sub-benchmark (a filter on "postgres" must not run the in-memory
// H = 10 000 peers): names are grouped by top-level benchmark and depth,
// each level an alternation of the names' elements there (a group may
// run a few extra combinations of those elements, never other ones). W5
// patterns come last, flagged for -w5-benchtime.
func benchPatterns(rs []row, side string) []benchPattern {
	var names []string
	for _, r := range rs {
		arm, peers := r.benches()
		if side == sideArmature {
			names = append(names, arm...)
		} else {
			names = append(names, peers...)
		}
	}
	type group struct {
		top    string
		levels []map[string]bool
	}
	var groups []*group
	for _, n := range names {
		elems := strings.Split(n, "/")
		var g *group
		for _, x := range groups {
			if x.top == elems[0] && len(x.levels) == len(elems)-1 {
				g = x
			}
		}
		if g == nil {
			g = &group{top: elems[0], levels: make([]map[string]bool, len(elems)-1)}
			for i := range g.levels {
				g.levels[i] = map[string]bool{}
			}
			groups = append(groups, g)
		}
		for i, e := range elems[1:] {
			g.levels[i][e] = true
		}
	}
	var out, w5 []benchPattern
	for _, g := range groups {
		p := "^" + regexp.QuoteMeta(g.top) + "$"
		for _, l := range g.levels {
			alts := slices.Sorted(maps.Keys(l))
			for i, a := range alts {
				alts[i] = regexp.QuoteMeta(a)
			}
			p += "/^(" + strings.Join(alts, "|") + ")$"
		}
		if g.top == "BenchmarkW5" {
			w5 = append(w5, benchPattern{pattern: p, w5: true})
		} else {
			out = append(out, benchPattern{pattern: p})
		}
	}
	slices.SortFunc(out, func(a, b benchPattern) int { return strings.Compare(a.pattern, b.pattern) })
	slices.SortFunc(w5, func(a, b benchPattern) int { return strings.Compare(a.pattern, b.pattern) })
	return append(out, w5...)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
