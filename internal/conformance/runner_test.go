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
