package graph_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/armature-go/armature/graph"
)

// TestMain fails the run if any test leaks a goroutine (an observer
// delivery worker that was never drained, a stuck timer, ...).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mustType parses a type in the fixture notation or fails the test.
func mustType(t testing.TB, s string) graph.Type {
	t.Helper()
	typ, err := graph.ParseType(s)
	if err != nil {
		t.Fatalf("ParseType(%q): %v", s, err)
	}
	return typ
}

// mustSchema builds a schema or fails the test.
func mustSchema(t testing.TB, fields ...graph.FieldSpec) *graph.Schema {
	t.Helper()
	s, err := graph.NewSchema(fields...)
	if err != nil {
		t.Fatalf("NewSchema: %v", err)
	}
	return s
}

// mustCompile compiles b or fails the test.
func mustCompile(t testing.TB, b *graph.Builder, opts ...graph.CompileOption) *graph.Graph {
	t.Helper()
	g, err := b.Compile(opts...)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}

// mustMerge merges u into s or fails the test.
func mustMerge(t testing.TB, s graph.State, u graph.Update) graph.State {
	t.Helper()
	out, err := s.Merge(u)
	if err != nil {
		t.Fatalf("Merge(%v): %v", u, err)
	}
	return out
}

// stateJSON encodes s (the zero State encodes as "null").
func stateJSON(t testing.TB, s graph.State) string {
	t.Helper()
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	return string(b)
}

// jsonOf encodes v with encoding/json.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

// set returns a node that returns u unchanged.
func set(u graph.Update) graph.NodeFunc {
	return func(context.Context, graph.State) (graph.Update, error) { return u, nil }
}

// drain waits for every pending observer event of g with no timeout and
// checks the summary is empty.
func drain(t testing.TB, g *graph.Graph) {
	t.Helper()
	sum, err := g.Drain(context.Background())
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if sum != (graph.DrainSummary{}) {
		t.Fatalf("Drain without timeout = %v, want zero summary", sum)
	}
}

// evRec is the comparable projection of a NodeEvent used in assertions.
type evRec struct {
	Observer     string
	Phase        graph.Phase
	Node         string
	Namespace    []string
	Step         int
	Pre, Post    string
	ParentStates []string
	ErrCat       string
	HasErr       bool
	ChainLen     int
	InvID        string
	// Extras lists the optional fields set on the event (attempt index,
	// fan-out / branch identity, descriptor, configs); none outside retry,
	// fan-out, parallel branches and suspension.
	Extras []string
}

// recorder is an Observer that records every node event it receives.
type recorder struct {
	name string
	mu   sync.Mutex
	log  *[]evRec // shared log, so several recorders can interleave
	own  []evRec
}

func newRecorder(name string, shared *[]evRec) *recorder {
	return &recorder{name: name, log: shared}
}

func project(name string, ev *graph.NodeEvent) evRec {
	enc := func(s graph.State) string {
		if s.IsZero() {
			return ""
		}
		b, err := s.MarshalJSON()
		if err != nil {
			return "!" + err.Error()
		}
		return string(b)
	}
	r := evRec{
		Observer: name, Phase: ev.Phase, Node: ev.NodeName, Namespace: ev.Namespace, Step: ev.Step,
		Pre: enc(ev.PreState), Post: enc(ev.PostState), ErrCat: string(ev.ErrorCategory), HasErr: ev.Err != nil,
		ChainLen: len(ev.FanOutIndexChain), InvID: ev.InvocationID,
	}
	for _, x := range []struct {
		name string
		set  bool
	}{
		{"attempt_index", ev.AttemptIndex != 0},
		{"fan_out_index", ev.FanOutIndex != nil},
		{"branch_name", ev.BranchName != nil},
		{"descriptor", ev.Descriptor != nil},
		{"fan_out_config", ev.FanOutConfig != nil},
		{"parallel_branches_config", ev.ParallelBranchesConfig != nil},
	} {
		if x.set {
			r.Extras = append(r.Extras, x.name)
		}
	}
	for _, c := range ev.FanOutIndexChain {
		if c != nil {
			r.Extras = append(r.Extras, "fan_out_index_chain")
		}
	}
	for _, c := range ev.BranchNameChain {
		if c != nil {
			r.Extras = append(r.Extras, "branch_name_chain")
		}
	}
	if len(ev.BranchNameChain) != len(ev.FanOutIndexChain) {
		r.Extras = append(r.Extras, "chain_length_mismatch")
	}
	r.ParentStates = []string{}
	for _, p := range ev.ParentStates {
		r.ParentStates = append(r.ParentStates, enc(p))
	}
	return r
}

var sharedLogMu sync.Mutex

func (r *recorder) observe(_ context.Context, ev graph.Event) error {
	ne, ok := ev.(*graph.NodeEvent)
	if !ok {
		return nil
	}
	rec := project(r.name, ne)
	r.mu.Lock()
	r.own = append(r.own, rec)
	r.mu.Unlock()
	if r.log != nil {
		sharedLogMu.Lock()
		*r.log = append(*r.log, rec)
		sharedLogMu.Unlock()
	}
	return nil
}

func (r *recorder) events() []evRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]evRec(nil), r.own...)
}
