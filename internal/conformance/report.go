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

// ParseAllowList reads an allow-list of suites that may have cases not
// implemented: one suite name per line, # starts a comment, blank lines
// are ignored. A name given twice is an error.
func ParseAllowList(text string) (map[string]bool, error) {
	allowed := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		name := strings.TrimSpace(line)
		switch {
		case name == "":
			continue
		case strings.ContainsAny(name, " \t"):
			return nil, fmt.Errorf("allow-list line %d: %q is not one suite name", i+1, name)
		case allowed[name]:
			return nil, fmt.Errorf("allow-list line %d: suite %q listed twice", i+1, name)
		}
		allowed[name] = true
	}
	return allowed, nil
}

// CheckAllowList returns one error per breach of the allow-list of
// suites that may have cases not implemented: a suite with such cases
// that is not on it, and a suite on it with none (or not in the report),
// which must leave the list. Nil means the report keeps to it.
func (r *Report) CheckAllowList(allowed map[string]bool) []error {
	var errs []error
	seen := map[string]bool{}
	for _, s := range r.Suites {
		seen[s.Name] = true
		_, _, n := s.Counts()
		switch {
		case n > 0 && !allowed[s.Name]:
			errs = append(errs, fmt.Errorf("suite %s: %d case(s) not implemented, and the suite is not on the allow-list", s.Name, n))
		case n == 0 && allowed[s.Name]:
			errs = append(errs, fmt.Errorf("suite %s: every case is implemented; remove it from the allow-list", s.Name))
		}
	}
	for name := range allowed {
		if !seen[name] {
			errs = append(errs, fmt.Errorf("suite %s is on the allow-list but the spec has no such suite", name))
		}
	}
	return errs
}
