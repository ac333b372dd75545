package conformance

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestConformance runs every fixture of the spec checkout (see doc.go for
// how it is located) and prints the per-suite summary. It fails when any
// case of any suite failed; cases needing an unbuilt capability are
// reported as not implemented without failing.
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
}
