package conformance

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// drainSlack is the scheduler slack allowed on top of a drain timeout
// when checking that a drain returned on time.
const drainSlack = 250 * time.Millisecond

// invariantFunc checks one named invariant (conformance-adapter §5.9)
// against an executed case. want is the fixture's value for the name.
type invariantFunc func(ctx context.Context, env *invEnv, want *Value) error

// invEnv is what an invariant is evaluated against.
type invEnv struct {
	run *caseRun
	// inv is the invocation the invariant was declared for; nil means the
	// whole case (file- or case-level invariants of a multi-invocation
	// fixture).
	inv *invocationRun
	// events is the event stream event predicates read; source names it
	// for messages. hasEvents is false when the case has no observer whose
	// events could be read.
	events    []*eventRec
	hasEvents bool
	source    string
}

// scope returns the invocations the invariant covers.
func (e *invEnv) scope() []*invocationRun {
	if e.inv != nil {
		return []*invocationRun{e.inv}
	}
	return e.run.invocations
}

func (e *invEnv) eventSet() ([]*eventRec, error) {
	if !e.hasEvents {
		return nil, fmt.Errorf("no record or accumulate observer to evaluate against")
	}
	return e.events, nil
}

// invariantUse is one invariant entry of a fixture, resolved at parse
// time so an unknown name fails before anything runs.
type invariantUse struct {
	Name  string
	Pos   Pos
	Want  *Value
	check invariantFunc
	// needs is the capability a known but not yet built invariant needs
	// ("" when it is implemented); the parser reports it as missing.
	needs string
}

// invariantFamily is a name pattern whose submatches parameterize a check
// (e.g. <node>_node_events_count).
type invariantFamily struct {
	re    *regexp.Regexp
	build func(groups []string) invariantFunc
}

// invariantRegistry resolves invariant names: exact names first, then
// the regex families in registration order.
type invariantRegistry struct {
	exact    map[string]invariantFunc
	families []invariantFamily
	// notBuilt maps invariant names the adapter knows to the capability
	// they need that is not built yet.
	notBuilt map[string]string
}

func (r *invariantRegistry) lookup(name string) (invariantFunc, bool) {
	if f, ok := r.exact[name]; ok {
		return f, true
	}
	for _, fam := range r.families {
		if m := fam.re.FindStringSubmatch(name); m != nil {
			return fam.build(m[1:]), true
		}
	}
	return nil, false
}

// resolve turns an invariants mapping into checked uses.
func (r *invariantRegistry) resolve(block *Value, where Pos) ([]*invariantUse, error) {
	if block.IsNull() {
		return nil, nil
	}
	if block.Kind != KindMap {
		return nil, schemaErrorf(where, "invariants must be a mapping of name: value")
	}
	out := make([]*invariantUse, 0, len(block.Fields))
	for _, f := range block.Fields {
		if capability, ok := r.notBuilt[f.Key]; ok {
			out = append(out, &invariantUse{Name: f.Key, Pos: f.Pos, Want: f.Value, needs: capability,
				check: func(context.Context, *invEnv, *Value) error { return notImplemented(capability) }})
			continue
		}
		fn, ok := r.lookup(f.Key)
		if !ok {
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
		out = append(out, &invariantUse{Name: f.Key, Pos: f.Pos, Want: f.Value, check: fn})
	}
	return out, nil
}

// evaluateInvariants runs the uses in order, returning the first failure.
func evaluateInvariants(ctx context.Context, env *invEnv, uses []*invariantUse) error {
	for _, u := range uses {
		if err := u.check(ctx, env, u.Want); err != nil {
			return fmt.Errorf("invariant %s (%s): %w", u.Name, u.Pos, err)
		}
	}
	return nil
}

func newInvariantRegistry() *invariantRegistry {
	r := &invariantRegistry{exact: map[string]invariantFunc{
		// Event-stream predicates.
		"no_events_for_node":                         noEventsForNode,
		"edge_resolution_failure_in_completed_event": eventBool(edgeFailureInCompleted),
		"inner_event_count":                          innerEventCount,
		"inner_fan_out_indices_seen":                 innerSeen(func(e *eventRec) (any, bool) { return ptrVal(e.FanOutIndex) }),
		"inner_branch_names_seen":                    innerSeen(func(e *eventRec) (any, bool) { return ptrVal(e.BranchName) }),
		"inner_attempt_indices_seen":                 innerSeen(func(e *eventRec) (any, bool) { return e.AttemptIndex, true }),
		"inner_event_identities_unique":              eventBool(innerIdentitiesUnique),
		"started_followed_by_suspended_in_order":     eventBool(startedBeforeSuspended),
		"no_completed_event_for_suspending_node":     eventBool(noCompletedForSuspending),
		"outermost_events_have_no_branch_name":       outermostNoBranchName,
		"inner_events_carry_correct_branch_name":     innerCorrectBranchName,

		// Drain and invocation predicates (graph-engine §6).
		"drain_returned_within_timeout":                                runBool(drainReturnedWithinTimeout),
		"graph_state_intact_after_timeout":                             runBool(graphIntactAfterTimeout),
		"second_invocation_drain_independent_of_first":                 runBool(secondDrainIndependent),
		"drain_waited_for_all_events":                                  runBool(drainWaitedForAll),
		"drain_events_for_synchronized_accumulator_read":               runBool(nodeDrainSynchronized),
		"drain_returned_without_blocking_on_post_call_events":          runBool(nodeDrainNotBlocked),
		"graph_state_intact_after_per_invocation_drain_timeout":        runBool(intactAfterNodeDrainTimeout),
		"workers_not_cancelled_on_per_invocation_drain_timeout":        runBool(workersNotCancelled),
		"each_invocation_has_unique_invocation_id":                     runBool(uniqueInvocationIDs),
		"drain_scopes_strictly_to_supplied_invocation_id":              runBool(nodeDrainScoped),
		"drain_covered_all_fan_out_instances_via_shared_invocation_id": runBool(nodeDrainCovers(func(e *eventRec) (any, bool) { return ptrVal(e.FanOutIndex) }, "fan_out_index")),
		"drain_covered_all_parallel_branches_via_shared_invocation_id": runBool(nodeDrainCovers(func(e *eventRec) (any, bool) { return ptrVal(e.BranchName) }, "branch_name")),
	}}
	// Name-pattern families (§5.9 <node_name>_node_events_count etc. and
	// the fixture-specific lineage predicates of graph-engine 039). Where a
	// pattern exists with and without "_node", the "_node" form is tried
	// first so "inner_fan_out_node_x" resolves to node "inner_fan_out".
	fam := func(pattern string, build func(node string) invariantFunc) {
		r.families = append(r.families, invariantFamily{
			re:    regexp.MustCompile(pattern),
			build: func(g []string) invariantFunc { return build(g[0]) },
		})
	}
	fam(`^(.+)_node_events_count$`, nodeEventsCount)
	fam(`^(.+)_node_fan_out_index_absent$`, func(n string) invariantFunc {
		return nodeAll(n, func(e *eventRec) bool { return e.FanOutIndex == nil })
	})
	fam(`^(.+)_node_fan_out_index_chain_empty$`, func(n string) invariantFunc {
		return nodeAll(n, func(e *eventRec) bool { return len(e.FanOutIndexChain) == 0 })
	})
	for _, suffix := range []string{"_node", ""} {
		fam(`^(.+)`+suffix+`_fan_out_index_chains_seen$`, func(n string) invariantFunc {
			return nodeSeen(n, func(e *eventRec) any { return e.fanOutChain() })
		})
		fam(`^(.+)`+suffix+`_branch_name_chains_seen$`, func(n string) invariantFunc {
			return nodeSeen(n, func(e *eventRec) any { return e.branchChain() })
		})
		fam(`^(.+)`+suffix+`_scalar_fan_out_index_equals_innermost_chain_element$`, func(n string) invariantFunc {
			return nodeAll(n, func(e *eventRec) bool { return intPtrEqual(e.FanOutIndex, innermostInt(e.FanOutIndexChain)) })
		})
		fam(`^(.+)`+suffix+`_scalar_branch_name_absent$`, func(n string) invariantFunc {
			return nodeAll(n, func(e *eventRec) bool { return e.BranchName == nil })
		})
	}
	fam(`^(.+)_event_identities_unique_by_chain$`, func(n string) invariantFunc {
		return nodeEventBool(n, func(evs []*eventRec) bool { return identitiesUnique(evs, true) })
	})
	fam(`^(.+)_scalar_fan_out_index_not_unique_across_outer_instances$`, func(n string) invariantFunc {
		return nodeEventBool(n, func(evs []*eventRec) bool { return !identitiesUnique(evs, false) })
	})
	fam(`^(.+)_started_present$`, func(n string) invariantFunc { return phasePresent(n, "started") })
	fam(`^(.+)_completed_present$`, func(n string) invariantFunc { return phasePresent(n, "completed") })
	registerPipelineInvariants(r)
	registerSessionInvariants(r)
	registerSuspensionInvariants(r)
	registerOTelInvariants(r)
	registerCallableBranchInvariants(r)
	return r
}

// --- value helpers ---------------------------------------------------------

func wantBool(want *Value) (bool, error) {
	if want == nil || want.Kind != KindBool {
		return false, fmt.Errorf("value must be a bool, got %s", want.String())
	}
	return want.Bool, nil
}

func wantInt(want *Value) (int, error) {
	if want == nil || want.Kind != KindInt {
		return 0, fmt.Errorf("value must be an int, got %s", want.String())
	}
	return int(want.Int), nil
}

func wantList(want *Value) ([]any, error) {
	if want == nil || want.Kind != KindList {
		return nil, fmt.Errorf("value must be a list, got %s", want.String())
	}
	return want.Native().([]any), nil
}

func ptrVal[T any](p *T) (any, bool) {
	if p == nil {
		return nil, false
	}
	return *p, true
}

func intPtrEqual(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// innermostInt returns the deepest non-nil chain element.
func innermostInt(chain []*int) *int {
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i] != nil {
			return chain[i]
		}
	}
	return nil
}

func eventsOf(evs []*eventRec, node string) []*eventRec {
	var out []*eventRec
	for _, e := range evs {
		if e.NodeName == node {
			out = append(out, e)
		}
	}
	return out
}

func compareBool(want *Value, got bool, detail string) error {
	w, err := wantBool(want)
	if err != nil {
		return err
	}
	if w != got {
		if detail == "" {
			return fmt.Errorf("want %t, got %t", w, got)
		}
		return fmt.Errorf("want %t, got %t: %s", w, got, detail)
	}
	return nil
}
