package conformance

import (
	"github.com/armature-go/armature/checkpoint"

	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// SpecDirEnv names the environment variable that points the runner at an
// OpenArmature spec checkout (the directory holding spec/).
const SpecDirEnv = "ARMATURE_SPEC_DIR"

// CaseRunner runs the cases of one suite (capability directory). RunCase
// returns nil when the case passes, an error wrapping [ErrNotImplemented]
// (usually a *NotImplementedError) when the case needs something that is
// not built yet, and any other error when the case fails; the error's
// text is the reason printed in the summary.
//
// RunCase is called for one case at a time per suite; implementations
// must keep no state across cases (conformance-adapter §4.2).
type CaseRunner interface {
	RunCase(ctx context.Context, c *Case) error
}

// CaseRunnerFunc adapts a function to [CaseRunner].
type CaseRunnerFunc func(ctx context.Context, c *Case) error

// RunCase calls f.
func (f CaseRunnerFunc) RunCase(ctx context.Context, c *Case) error { return f(ctx, c) }

// Registry maps suite names (capability directory names) to their
// runners. A discovered suite with no entry reports every case as
// "not implemented: <suite>".
type Registry map[string]CaseRunner

// DefaultRegistry returns the runners for the capabilities Armature
// implements. Later capabilities plug in here.
func DefaultRegistry() Registry {
	return Registry{
		"graph-engine":       newGraphEngineSuite(),
		"harness":            harnessSuite{},
		"harness-chat":       chatSuite{},
		"llm-provider":       llmProviderSuite{},
		"retrieval-provider": retrievalSuite{},
		"pipeline-utilities": newPipelineUtilitiesSuite(),
		"sessions":           newSessionsSuite(),
		"suspension":         newSuspensionSuite(),
		"observability":      newObservabilitySuite(),
		"prompt-management":  promptSuite{},
	}
}

// Runner discovers and runs every fixture under SpecDir/spec/*/conformance.
type Runner struct {
	// SpecDir is the spec checkout root (the directory holding spec/).
	SpecDir string
	// Suites maps suites to runners; nil means [DefaultRegistry].
	Suites Registry
	// CaseTimeout bounds one case; zero means two minutes.
	CaseTimeout time.Duration
	// Progress, when set, is called after each case.
	Progress func(CaseResult)
	// Backend, when set, supplies the durable stores fixtures run on in
	// place of the ones they name: the checkpoint store of the
	// pipeline-utilities §10 fixtures, and (a SessionsBackend) the
	// session store of the sessions fixtures.
	Backend Backend
}

// Backend supplies a store backend to run fixtures on.
type Backend interface {
	// Checkpoints returns a fresh, empty checkpoint store and the
	// function that releases it.
	Checkpoints(ctx context.Context) (checkpoint.Store, func(), error)
}

// SessionsBackend is a Backend that also supplies session stores: the
// sessions fixtures that declare a session store run on them.
type SessionsBackend interface {
	Backend
	// Sessions returns a fresh, empty session store and the function
	// that releases it.
	Sessions(ctx context.Context) (SessionStore, func(), error)
}

// backendKey carries a Runner's Backend to the cases.
type backendKey struct{}

// Run discovers all suites and runs every case of every fixture. It
// returns an error only when discovery itself fails; case failures are
// recorded in the report.
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	suites, err := DiscoverSuites(r.SpecDir)
	if err != nil {
		return nil, err
	}
	reg := r.Suites
	if reg == nil {
		reg = DefaultRegistry()
	}
	if r.Backend != nil {
		ctx = context.WithValue(ctx, backendKey{}, r.Backend)
	}
	report := &Report{}
	for _, suite := range suites {
		sr := &SuiteResult{Name: suite.Name}
		runner := reg[suite.Name]
		for _, file := range suite.Files {
			for _, res := range r.runFile(ctx, suite.Name, file, runner) {
				sr.Cases = append(sr.Cases, res)
				if r.Progress != nil {
					r.Progress(res)
				}
			}
		}
		report.Suites = append(report.Suites, sr)
	}
	return report, nil
}

func (r *Runner) runFile(ctx context.Context, suite, path string, runner CaseRunner) []CaseResult {
	fx, cases, err := LoadFixture(suite, path)
	if err != nil {
		name := filepath.Base(path)
		if fx != nil {
			name = fx.Name
		}
		return []CaseResult{{Suite: suite, ID: name, Outcome: Failed, Reason: err.Error()}}
	}
	out := make([]CaseResult, 0, len(cases))
	for _, c := range cases {
		res := CaseResult{Suite: suite, ID: c.ID()}
		start := time.Now()
		var err error
		if runner == nil {
			err = notImplemented(suite)
		} else {
			err = r.runCase(ctx, runner, c)
		}
		res.Duration = time.Since(start)
		switch {
		case err == nil:
			res.Outcome = Passed
		case errors.Is(err, ErrNotImplemented):
			res.Outcome = NotImplemented
			res.Reason = err.Error()
		default:
			res.Outcome = Failed
			res.Reason = err.Error()
		}
		out = append(out, res)
	}
	return out
}

// runCase runs one case with a deadline, turning a panic into a failure.
func (r *Runner) runCase(ctx context.Context, runner CaseRunner, c *Case) (err error) {
	timeout := r.CaseTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("conformance: panic running case: %v\n%s", p, debug.Stack())
		}
	}()
	return runner.RunCase(ctx, c)
}

// Suite is a discovered capability directory.
type Suite struct {
	Name string
	// Files are the fixture paths, sorted.
	Files []string
}

// DiscoverSuites walks specDir/spec/*/conformance/ for *.yaml fixtures
// (conformance-adapter §8.1). Suites without fixtures are omitted.
func DiscoverSuites(specDir string) ([]Suite, error) {
	root := filepath.Join(specDir, "spec")
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("conformance: read spec directory: %w", err)
	}
	var suites []Suite
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, e.Name(), "conformance", "*.yaml"))
		if err != nil {
			return nil, fmt.Errorf("conformance: list fixtures: %w", err)
		}
		if len(files) == 0 {
			continue
		}
		sort.Strings(files)
		suites = append(suites, Suite{Name: e.Name(), Files: files})
	}
	sort.Slice(suites, func(i, j int) bool { return suites[i].Name < suites[j].Name })
	return suites, nil
}

// ResolveSpecDir returns the spec checkout to run against: $ARMATURE_SPEC_DIR
// when set, else <module root>/../shared/openarmature-spec, where the
// module root is the nearest directory at or above the working directory
// holding a go.mod. The directory is not required to exist.
func ResolveSpecDir() (string, error) {
	if dir := strings.TrimSpace(os.Getenv(SpecDirEnv)); dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("conformance: working directory: %w", err)
	}
	root, err := moduleRoot(wd)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(root), "shared", "openarmature-spec"), nil
}

func moduleRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("conformance: no go.mod at or above %s", dir)
		}
		d = parent
	}
}
