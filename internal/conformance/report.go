package conformance

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Outcome is the result of one case.
type Outcome uint8

// The case outcomes.
const (
	Passed Outcome = iota
	Failed
	NotImplemented
)

// String returns "passed", "failed" or "not implemented".
func (o Outcome) String() string {
	switch o {
	case Passed:
		return "passed"
	case Failed:
		return "failed"
	case NotImplemented:
		return "not implemented"
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Suite string
	// ID is the case's [Case.ID], or the file name when the file itself
	// could not be loaded.
	ID      string
	Outcome Outcome
	// Reason explains a non-passing outcome.
	Reason   string
	Duration time.Duration
}

// SuiteResult holds the results of one suite.
type SuiteResult struct {
	Name  string
	Cases []CaseResult
}

// Counts returns how many cases passed, failed and are not implemented.
func (s *SuiteResult) Counts() (passed, failed, notImplemented int) {
	for _, c := range s.Cases {
		switch c.Outcome {
		case Passed:
			passed++
		case Failed:
			failed++
		case NotImplemented:
			notImplemented++
		}
	}
	return passed, failed, notImplemented
}

// Report holds the results of a run.
type Report struct {
	Suites []*SuiteResult
}

// Failed returns the number of failed cases across all suites.
func (r *Report) Failed() int {
	n := 0
	for _, s := range r.Suites {
		_, f, _ := s.Counts()
		n += f
	}
	return n
}

// Suite returns the named suite's results, or nil.
func (r *Report) Suite(name string) *SuiteResult {
	for _, s := range r.Suites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// WriteSummary writes one line per suite,
//
//	<suite>: N passed, M failed, K not implemented
//
// followed by each non-passing case, indented, with its reason
// (continuation lines of a multi-line reason are indented further).
func (r *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.Suites {
		p, f, n := s.Counts()
		fmt.Fprintf(&b, "%s: %d passed, %d failed, %d not implemented\n", s.Name, p, f, n)
		for _, c := range s.Cases {
			if c.Outcome == Passed {
				continue
			}
			reason := strings.ReplaceAll(strings.TrimRight(c.Reason, "\n"), "\n", "\n        ")
			fmt.Fprintf(&b, "    %s: %s\n", c.ID, reason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
