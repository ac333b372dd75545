package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestInvariantLookup(t *testing.T) {
	reg := newInvariantRegistry()
	tests := []struct {
		name  string
		known bool
	}{
		{"inner_event_count", true},
		{"inner_fan_out_indices_seen", true},
		{"drain_returned_within_timeout", true},
		{"workers_not_cancelled_on_per_invocation_drain_timeout", true},
		{"pre_node_events_count", true},
		{"pre_node_fan_out_index_absent", true},
		{"persist_started_present", true},
		{"persist_completed_present", true},
		{"leaf_fan_out_index_chains_seen", true},
		{"inner_fan_out_node_fan_out_index_chains_seen", true},
		{"leaf_scalar_fan_out_index_not_unique_across_outer_instances", true},
		{"moon_phase_ok", false},
		{"node_events_count", false},
		{"_started_present_x", false},
	}
	for _, tt := range tests {
		if _, ok := reg.lookup(tt.name); ok != tt.known {
			t.Errorf("lookup(%s) known = %t, want %t", tt.name, ok, tt.known)
		}
	}
}

func TestResolveUnknownInvariant(t *testing.T) {
	v, err := ParseYAML("inv.yaml", []byte("invariants:\n  inner_event_count: 2\n  moon_phase_ok: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := v.Get("invariants")
	_, err = newInvariantRegistry().resolve(block, block.Pos)
	var de *DirectiveUnknownError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *DirectiveUnknownError", err)
	}
	if got, want := err.Error(), "fixture_directive_unknown: moon_phase_ok at inv.yaml:3"; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
}

func intp(i int) *int { return &i }

func ev(node, phase string, step int, ns []string, fanOut *int, chain ...*int) *eventRec {
	return &eventRec{NodeName: node, Phase: phase, Step: step, Namespace: ns, FanOutIndex: fanOut, FanOutIndexChain: chain,
		BranchNameChain: make([]*string, len(chain)), InvocationID: "inv-1"}
}

// fanOutEvents is a synthetic stream: pre, a fan-out node "process" with
// two instances of "compute", and an "inner_fan_out" node one boundary deep.
func fanOutEvents() []*eventRec {
	return []*eventRec{
		ev("pre", "started", 0, []string{"pre"}, nil),
		ev("pre", "completed", 0, []string{"pre"}, nil),
		ev("process", "started", 1, []string{"process"}, nil),
		ev("compute", "started", 2, []string{"process", "compute"}, intp(0), intp(0)),
		ev("compute", "started", 3, []string{"process", "compute"}, intp(1), intp(1)),
		ev("compute", "completed", 2, []string{"process", "compute"}, intp(0), intp(0)),
		ev("compute", "completed", 3, []string{"process", "compute"}, intp(1), intp(1)),
		ev("inner_fan_out", "started", 4, []string{"process", "inner_fan_out"}, intp(0), intp(0)),
		ev("process", "completed", 1, []string{"process"}, nil),
	}
}

func TestEventPredicates(t *testing.T) {
	reg := newInvariantRegistry()
	env := &invEnv{events: fanOutEvents(), hasEvents: true, source: "test"}
	tests := []struct {
		name, want string // want is YAML
		ok         bool
	}{
		{"pre_node_events_count", "2", true},
		{"pre_node_events_count", "3", false},
		{"pre_node_fan_out_index_absent", "true", true},
		{"compute_node_fan_out_index_absent", "false", true},
		{"compute_node_fan_out_index_absent", "true", false},
		{"inner_event_count", "5", true},
		{"inner_fan_out_indices_seen", "[1, 0]", true},
		{"inner_fan_out_indices_seen", "[0]", false},
		{"inner_attempt_indices_seen", "[0]", true},
		{"inner_event_identities_unique", "true", true},
		{"compute_fan_out_index_chains_seen", "[[0], [1]]", true},
		{"inner_fan_out_node_fan_out_index_chains_seen", "[[0]]", true},
		{"compute_scalar_fan_out_index_equals_innermost_chain_element", "true", true},
		{"compute_scalar_fan_out_index_not_unique_across_outer_instances", "false", true},
		{"compute_event_identities_unique_by_chain", "true", true},
		{"process_started_present", "true", true},
		{"process_completed_present", "false", false},
		{"no_events_for_node", "ghost", true},
		{"no_events_for_node", "[ghost, pre]", false},
		{"inner_branch_names_seen", "[]", true},
		{"outermost_events_have_no_branch_name", "{nodes: [pre, process]}", true},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.want, func(t *testing.T) {
			fn, ok := reg.lookup(tt.name)
			if !ok {
				t.Fatalf("unknown invariant %s", tt.name)
			}
			want, err := ParseYAML("t.yaml", []byte(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			err = fn(context.Background(), env, want)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%t", err, tt.ok)
			}
		})
	}
}

func TestEdgeFailureInCompleted(t *testing.T) {
	started := ev("a", "started", 0, []string{"a"}, nil)
	failed := ev("a", "completed", 0, []string{"a"}, nil)
	failed.HasError, failed.ErrCategory = true, "routing_error"
	if ok, detail := edgeFailureInCompleted([]*eventRec{started, failed}); !ok {
		t.Errorf("want true: %s", detail)
	}
	withPost := *failed
	withPost.HasPostState = true
	if ok, _ := edgeFailureInCompleted([]*eventRec{started, &withPost}); ok {
		t.Error("a failed completed event with post_state must not satisfy the invariant")
	}
	if ok, _ := edgeFailureInCompleted([]*eventRec{started, failed, ev("b", "started", 1, []string{"b"}, nil)}); ok {
		t.Error("events after the failure must not satisfy the invariant")
	}
}

func TestRunPredicates(t *testing.T) {
	rec := newRecorder()
	inv := &invocationRun{Name: "only", InvocationID: "inv-1", Status: "completed",
		Drain: &drainRec{HasTimeout: true, Timeout: 100 * time.Millisecond, Elapsed: 120 * time.Millisecond, TimeoutReached: true, Undelivered: 4}}
	cr := &caseRun{rec: rec, invocations: []*invocationRun{inv}}
	env := &invEnv{run: cr, inv: inv}
	yes := &Value{Kind: KindBool, Bool: true}

	if err := runBool(drainReturnedWithinTimeout)(context.Background(), env, yes); err != nil {
		t.Errorf("drain within timeout + slack: %v", err)
	}
	inv.Drain.Elapsed = time.Second
	if err := runBool(drainReturnedWithinTimeout)(context.Background(), env, yes); err == nil {
		t.Error("a drain returning after timeout + slack must fail")
	}
	inv.Drain = nil
	if err := runBool(drainReturnedWithinTimeout)(context.Background(), env, yes); err == nil || !strings.Contains(err.Error(), "no drain") {
		t.Errorf("without any timed drain: err = %v", err)
	}

	// A per-invocation drain that timed out, whose events all arrived later.
	snap := []*eventRec{ev("a", "started", 0, []string{"a"}, nil)}
	rec.addNodeDrain(&nodeDrainRec{drainRec: drainRec{HasTimeout: true, Timeout: 50 * time.Millisecond, TimeoutReached: true, Undelivered: 2},
		Node: "b", Observer: "acc", InvocationID: "inv-1", Snapshot: snap})
	for _, e := range []*eventRec{
		ev("a", "started", 0, []string{"a"}, nil), ev("a", "completed", 0, []string{"a"}, nil),
		ev("b", "started", 1, []string{"b"}, nil),
	} {
		rec.deliver("acc", e)
	}
	if err := runBool(workersNotCancelled)(context.Background(), env, yes); err == nil {
		t.Error("b's completed event is missing, so workers look cancelled")
	}
	rec.deliver("acc", ev("b", "completed", 1, []string{"b"}, nil))
	if err := runBool(workersNotCancelled)(context.Background(), env, yes); err != nil {
		t.Errorf("all events delivered after the timeout: %v", err)
	}
}
