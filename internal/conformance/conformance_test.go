package conformance

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/store/postgres"
)

// TestConformance runs every fixture of the spec checkout (see doc.go for
// how it is located) and prints the per-suite summary. It fails when any
// case of any suite failed, and when a case is not implemented in a
// suite that not-implemented.txt (the allow-list, which only shrinks)
// does not name.
func TestConformance(t *testing.T) {
	specDir, err := ResolveSpecDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(specDir); err != nil {
		msg := fmt.Sprintf("conformance fixtures not found at %s (set %s): %v", specDir, SpecDirEnv, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	r := &Runner{SpecDir: specDir}
	report, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Suites) == 0 {
		t.Fatalf("no fixtures found under %s/spec/*/conformance/", specDir)
	}
	var b strings.Builder
	if err := report.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	fmt.Print(b.String())
	if n := report.Failed(); n > 0 {
		t.Errorf("%d conformance case(s) failed; see the summary above", n)
	}
	text, err := os.ReadFile("not-implemented.txt")
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := ParseAllowList(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range report.CheckAllowList(allowed) {
		t.Errorf("not-implemented.txt: %v", err)
	}
}

// pgBackend runs fixtures on the PostgreSQL store, a schema per case.
type pgBackend struct{ t *testing.T }

func (b pgBackend) open(ctx context.Context) (*postgres.Store, error) {
	schema, _ := pgtest.Schema(b.t)
	return postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
}

func (b pgBackend) Checkpoints(ctx context.Context) (checkpoint.Store, func(), error) {
	st, err := b.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st.Checkpoints(), st.Close, nil
}

func (b pgBackend) Sessions(ctx context.Context) (SessionStore, func(), error) {
	st, err := b.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, st.Close, nil
}

// TestConformancePostgres runs the pipeline-utilities, sessions and
// suspension fixtures with the PostgreSQL store swapped in (for every
// §10 checkpoint case, every sessions case with a session store, every
// suspension case with a checkpointer), and prints the suites' summary
// lines.
func TestConformancePostgres(t *testing.T) {
	specDir, err := ResolveSpecDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(specDir); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	pgtest.Schema(t) // skips (or fails in CI) without a database
	suites := Registry{"pipeline-utilities": newPipelineUtilitiesSuite(), "sessions": newSessionsSuite(), "suspension": newSuspensionSuite()}
	r := &Runner{SpecDir: specDir, Suites: suites, Backend: pgBackend{t}}
	report, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range report.Suites {
		if suites[s.Name] == nil {
			continue
		}
		var b strings.Builder
		if err := (&Report{Suites: []*SuiteResult{s}}).WriteSummary(&b); err != nil {
			t.Fatal(err)
		}
		fmt.Print(strings.Replace(b.String(), s.Name+":", s.Name+" (postgres):", 1))
		if n := (&Report{Suites: []*SuiteResult{s}}).Failed(); n > 0 {
			t.Errorf("%d case(s) failed on PostgreSQL", n)
		}
	}
}
