// Command compare runs the standard workloads on Armature (the main
// module's bench package) and on its peers (this module), and prints one
// markdown table side by side: medians over -count runs of ns/op, B/op and
// allocs/op, the ratio of Armature to the faster peer, and the targets of
// BENCHMARKS.md with PASS or FAIL.
//
// Usage, from the repository root:
//
//	cd bench/peers && go run ./cmd/compare [-count 5] [-benchtime 1s] [-filter REGEXP]
//
// -filter selects table rows by workload name (e.g. "W2", "sqlite",
// "H=10$"); only the top-level benchmarks those rows need run. A workload
// the main module does not have (yet) prints "n/a"; a capability a peer
// lacks prints what it lacks instead of a figure.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	count := fs.Int("count", 5, "runs of each benchmark; the table shows medians")
	benchtime := fs.String("benchtime", "1s", "go test -benchtime for every benchmark")
	filter := fs.String("filter", "", "regexp selecting table rows by workload name")
	peersDir := fs.String("peers", ".", "directory of the peers module")
	mainDir := fs.String("main", "../..", "directory of the main module, relative to -peers")
	verbose := fs.Bool("v", false, "copy go test output to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *count < 1 {
		return errors.New("-count must be at least 1")
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return fmt.Errorf("-filter: %w", err)
	}
	var selected []row
	for _, r := range rows() {
		if re.MatchString(r.workload) {
			selected = append(selected, r)
		}
	}
	if len(selected) == 0 {
		return fmt.Errorf("-filter %q selects no workload", *filter)
	}
	pattern := benchPattern(selected)
	goTest := func(dir, pkg string) (map[string]results.Summary, error) {
		fmt.Fprintf(stderr, "compare: go test -bench '%s' -count %d -benchtime %s %s (in %s)\n", pattern, *count, *benchtime, pkg, dir)
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", pattern, "-benchmem",
			"-count", fmt.Sprint(*count), "-benchtime", *benchtime, pkg)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if *verbose {
			cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, stderr), io.MultiWriter(&out, stderr)
		}
		runErr := cmd.Run()
		rs, err := results.Parse(bytes.NewReader(out.Bytes()))
		if err != nil {
			return nil, err
		}
		if runErr != nil {
			// Keep what did run: a failing or missing workload is "n/a".
			fmt.Fprintf(stderr, "compare: %s: %v\n%s", pkg, runErr, tail(out.String(), 20))
		}
		return results.Medians(rs), nil
	}
	peerMed, err := goTest(*peersDir, ".")
	if err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	armMed, err := goTest(filepath.Join(*peersDir, *mainDir), "./bench")
	if err != nil {
		return fmt.Errorf("main module: %w", err)
	}
	fmt.Fprint(stdout, renderTable(selected, armMed, peerMed, *count, *benchtime))
	return nil
}

// benchPattern returns the go test -bench pattern running the top-level
// benchmarks the rows need (B0 too when a target refers to it).
func benchPattern(rs []row) string {
	var tops []string
	for _, r := range rs {
		tops = append(tops, r.tops()...)
	}
	slices.Sort(tops)
	return "^Benchmark(" + strings.Join(slices.Compact(tops), "|") + ")$"
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
