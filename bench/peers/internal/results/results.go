// Package results parses the output of `go test -bench` and reduces
// repeated runs (-count N) of each benchmark to their median.
//
// It reads the standard benchmark line format:
//
//	BenchmarkW2/peer=adk/store=memory-2   200   64876 ns/op   21528 B/op   385 allocs/op
//
// and ignores every other line (goos, pkg, PASS, logs). Names are kept
// without the -GOMAXPROCS suffix, so runs on one machine group together.
//
// Usage:
//
//	rs, err := results.Parse(out)
//	med := results.Medians(rs)
//	w2 := med["BenchmarkW2/peer=adk/store=memory"]
//	fmt.Println(w2.NsPerOp())
//
// Functions here are safe for concurrent use; values are not shared.
package results

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The units of the standard metrics.
const (
	UnitNs     = "ns/op"
	UnitBytes  = "B/op"
	UnitAllocs = "allocs/op"
)

// ErrSyntax reports a benchmark line whose metrics do not parse.
var ErrSyntax = errors.New("results: malformed benchmark line")

// Result is one benchmark line: the benchmark's name (without the
// -GOMAXPROCS suffix), its iteration count and its metrics by unit.
type Result struct {
	Name    string
	N       int
	Metrics map[string]float64
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// Parse reads go test -bench output and returns its benchmark lines in
// order. A line that starts like a benchmark result but whose metrics do not
// parse is an error wrapping [ErrSyntax].
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		// A result is name, iterations, then value-unit pairs; a
		// benchmark's log lines and "--- FAIL: Benchmark..." do not fit.
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		res := Result{Name: procsSuffix.ReplaceAllString(f[0], ""), N: n, Metrics: make(map[string]float64, (len(f)-2)/2)}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %q: %v", ErrSyntax, line, f[i], err)
			}
			res.Metrics[f[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Summary is the median of a benchmark's runs, metric by metric.
type Summary struct {
	Name    string
	Runs    int
	Metrics map[string]float64
}

// NsPerOp returns the median time per op in nanoseconds, or 0.
func (s Summary) NsPerOp() float64 { return s.Metrics[UnitNs] }

// BytesPerOp returns the median bytes allocated per op, or 0.
func (s Summary) BytesPerOp() float64 { return s.Metrics[UnitBytes] }

// AllocsPerOp returns the median allocations per op, or 0.
func (s Summary) AllocsPerOp() float64 { return s.Metrics[UnitAllocs] }

// Medians groups rs by name and returns, for each, the median of each
// metric over the runs that report it.
func Medians(rs []Result) map[string]Summary {
	values := map[string]map[string][]float64{}
	runs := map[string]int{}
	for _, r := range rs {
		m := values[r.Name]
		if m == nil {
			m = map[string][]float64{}
			values[r.Name] = m
		}
		runs[r.Name]++
		for unit, v := range r.Metrics {
			m[unit] = append(m[unit], v)
		}
	}
	out := make(map[string]Summary, len(values))
	for name, m := range values {
		s := Summary{Name: name, Runs: runs[name], Metrics: make(map[string]float64, len(m))}
		for unit, vs := range m {
			s.Metrics[unit] = Median(vs)
		}
		out[name] = s
	}
	return out
}

// Median returns the median of vs (the mean of the middle two for an even
// count), or 0 for none. It does not modify vs.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
