package conformance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const selfTestSpec = "testdata/spec"

func TestRunnerSelfTestSpec(t *testing.T) {
	r := &Runner{SpecDir: selfTestSpec}
	report, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := report.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	want := `graph-engine: 2 passed, 3 failed, 1 not implemented
    002-selftest-fail.yaml: final_state.v: want 2, got 1
    003-selftest-not-implemented.yaml: not implemented: observability (OTel spans and logs)
    004-selftest-broken.yaml: fixture_schema_invalid: invalid YAML: did not find expected ',' or ']' at 004-selftest-broken.yaml:1
    005-selftest-unknown.yaml: fixture_directive_unknown: teleport at 005-selftest-unknown.yaml:9
widgets: 0 passed, 0 failed, 3 not implemented
    001-two-cases.yaml > first: not implemented: widgets
    001-two-cases.yaml > second: not implemented: widgets
    002-invocations.yaml: not implemented: widgets
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	if got := report.Failed(); got != 3 {
		t.Errorf("Failed() = %d, want 3", got)
	}
	if report.Suite("empty-capability") != nil {
		t.Error("a capability without fixtures must not be reported as a suite")
	}
}

func TestRunnerRegistryAndPanics(t *testing.T) {
	var seen []string
	reg := Registry{
		"graph-engine": CaseRunnerFunc(func(_ context.Context, c *Case) error {
			seen = append(seen, c.ID())
			if strings.HasPrefix(c.Fixture.Name, "002") {
				panic("boom")
			}
			return nil
		}),
		"widgets": CaseRunnerFunc(func(context.Context, *Case) error {
			return &NotImplementedError{Capability: "widgets v2"}
		}),
	}
	var progress int
	r := &Runner{SpecDir: selfTestSpec, Suites: reg, Progress: func(CaseResult) { progress++ }}
	report, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ge := report.Suite("graph-engine")
	p, f, n := ge.Counts()
	// 001 (2 cases), 003, 005 pass; 002 panics; 004 fails to load.
	if p != 4 || f != 2 || n != 0 {
		t.Errorf("graph-engine counts = %d/%d/%d, want 4/2/0", p, f, n)
	}
	for _, c := range ge.Cases {
		if strings.HasPrefix(c.ID, "002") && !strings.Contains(c.Reason, "panic running case: boom") {
			t.Errorf("panic not reported: %q", c.Reason)
		}
	}
	if len(seen) != 5 {
		t.Errorf("runner saw %d cases, want 5: %v", len(seen), seen)
	}
	if _, _, n := report.Suite("widgets").Counts(); n != 3 {
		t.Errorf("widgets not implemented = %d, want 3", n)
	}
	if progress != 9 {
		t.Errorf("progress called %d times, want 9", progress)
	}
}

func TestDiscoverSuitesMissingDir(t *testing.T) {
	_, err := DiscoverSuites(filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.HasPrefix(err.Error(), "conformance: ") {
		t.Fatalf("err = %v, want a conformance: error", err)
	}
}

func TestResolveSpecDir(t *testing.T) {
	t.Setenv(SpecDirEnv, "testdata/spec")
	got, err := ResolveSpecDir()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("testdata/spec"); got != want {
		t.Errorf("with %s set: %s, want %s", SpecDirEnv, got, want)
	}

	t.Setenv(SpecDirEnv, "")
	got, err = ResolveSpecDir()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	root, err := moduleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(root), "shared", "openarmature-spec"); got != want {
		t.Errorf("default: %s, want %s", got, want)
	}
}

func TestErrorCategories(t *testing.T) {
	tests := []struct {
		err      error
		sentinel error
		prefix   string
	}{
		{&DirectiveUnknownError{Name: "x", Pos: Pos{File: "f.yaml", Line: 3}}, ErrDirectiveUnknown, "fixture_directive_unknown: x at f.yaml:3"},
		{&SchemaInvalidError{Msg: "bad", Pos: Pos{File: "f.yaml", Line: 1}}, ErrSchemaInvalid, "fixture_schema_invalid: bad at f.yaml:1"},
		{&NotImplementedError{Capability: "sessions"}, ErrNotImplemented, "not implemented: sessions"},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.sentinel) {
			t.Errorf("%T does not match %v", tt.err, tt.sentinel)
		}
		if tt.err.Error() != tt.prefix {
			t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.prefix)
		}
	}
}

func TestWriteSummary(t *testing.T) {
	report := &Report{Suites: []*SuiteResult{
		{Name: "alpha", Cases: []CaseResult{
			{ID: "001.yaml", Outcome: Passed},
			{ID: "002.yaml > b", Outcome: Failed, Reason: "first line\nsecond line"},
			{ID: "003.yaml", Outcome: NotImplemented, Reason: "not implemented: beta"},
		}},
		{Name: "gamma"},
	}}
	var b strings.Builder
	if err := report.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	want := "alpha: 1 passed, 1 failed, 1 not implemented\n" +
		"    002.yaml > b: first line\n" +
		"        second line\n" +
		"    003.yaml: not implemented: beta\n" +
		"gamma: 0 passed, 0 failed, 0 not implemented\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	for o, s := range map[Outcome]string{Passed: "passed", Failed: "failed", NotImplemented: "not implemented"} {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, o.String(), s)
		}
	}
}

func TestAllowList(t *testing.T) {
	report := &Report{Suites: []*SuiteResult{
		{Name: "done", Cases: []CaseResult{{Outcome: Passed}, {Outcome: Failed}}},
		{Name: "partial", Cases: []CaseResult{{Outcome: Passed}, {Outcome: NotImplemented}}},
		{Name: "none", Cases: []CaseResult{{Outcome: NotImplemented}}},
	}}
	for _, tc := range []struct {
		name, list string
		want       []string // substrings of the errors, in order
		parseErr   string
	}{
		{name: "exact", list: "partial\nnone # later\n\n# comment\n"},
		{name: "missing", list: "partial", want: []string{"suite none: 1 case(s) not implemented"}},
		{name: "stale", list: "partial\nnone\ndone", want: []string{"suite done: every case is implemented"}},
		{name: "unknown", list: "partial\nnone\nghost", want: []string{"suite ghost is on the allow-list but the spec has no such suite"}},
		{name: "empty", list: "", want: []string{"suite partial", "suite none"}},
		{name: "twice", list: "none\nnone", parseErr: "listed twice"},
		{name: "two names", list: "none partial", parseErr: "is not one suite name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed, err := ParseAllowList(tc.list)
			if tc.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.parseErr) {
					t.Fatalf("ParseAllowList err = %v, want %q", err, tc.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			errs := report.CheckAllowList(allowed)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %v, want %q", i, errs[i], w)
				}
			}
		})
	}
}

// The repository's allow-list parses, and names only suites the spec
// has (TestConformance checks it against the report).
func TestAllowListFile(t *testing.T) {
	text, err := os.ReadFile("not-implemented.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseAllowList(string(text)); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseAllowList(f *testing.F) {
	f.Add("observability # issue 18\nprompt-management\n")
	f.Add("a\na\n")
	f.Add("# only\n\n  \t\n")
	f.Fuzz(func(t *testing.T, text string) {
		allowed, err := ParseAllowList(text)
		if err != nil {
			return
		}
		for name := range allowed {
			if name == "" || strings.ContainsAny(name, " \t\n#") {
				t.Fatalf("parsed name %q", name)
			}
		}
	})
}

// TestFinalStateBounds checks final_state_bounds with integer and float
// bounds: a value read inside the bounds passes whatever its numeric
// type, one outside fails, and a bound that is not a number is an error.
func TestFinalStateBounds(t *testing.T) {
	cases := []struct {
		name   string
		bounds string
		final  map[string]any
		ok     bool
	}{
		{"int inside", "n: {min: 0, max: 5}", map[string]any{"n": 1}, true},
		{"int at max", "n: {min: 0, max: 5}", map[string]any{"n": int64(5)}, true},
		{"int above max", "n: {min: 0, max: 5}", map[string]any{"n": 6}, false},
		{"int below min", "n: {min: 2}", map[string]any{"n": 1}, false},
		{"float bounds", "n: {min: 0.5, max: 1.5}", map[string]any{"n": 1.0}, true},
		{"bound not a number", "n: {max: five}", map[string]any{"n": 1}, false},
		{"value not a number", "n: {max: 5}", map[string]any{"n": "x"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseYAML("bounds.yaml", []byte(tc.bounds))
			if err != nil {
				t.Fatal(err)
			}
			err = finalStateBounds(v, tc.final)
			if (err == nil) != tc.ok {
				t.Fatalf("finalStateBounds(%s, %v) = %v, want ok=%v", tc.bounds, tc.final, err, tc.ok)
			}
		})
	}
}
