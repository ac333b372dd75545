package conformance

import (
	"context"
	"fmt"
	"regexp"
	"slices"
)

// The callable-branch event predicates of observability 119: an
// inline-callable parallel branch's synthetic started / completed pair
// (graph-engine §6: node_name and the innermost namespace entry are the
// branch's name, as is branch_name) carries the attempt index of the
// parallel-branches node attempt that dispatched it.

// isCallableBranch reports whether e is a synthetic callable-branch event.
func (e *eventRec) isCallableBranch() bool {
	n := len(e.Namespace)
	return n >= 2 && e.BranchName != nil && *e.BranchName == e.NodeName && e.Namespace[n-1] == e.NodeName
}

// seenSet checks the set of key over the events that have one.
func seenSet(key func(e *eventRec) (any, bool)) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		evs, err := env.eventSet()
		if err != nil {
			return err
		}
		w, err := wantList(want)
		if err != nil {
			return err
		}
		var got []any
		for _, e := range evs {
			if v, ok := key(e); ok {
				got = append(got, v)
			}
		}
		if !sameSet(w, got) {
			return fmt.Errorf("want the set %s, got %s", formatValue(w), formatValue(dedupe(got)))
		}
		return nil
	}
}

// callableAttempts pairs each callable-branch event with the attempt
// index of its dispatch node's latest started event before it.
func callableAttempts(evs []*eventRec) (branch []*eventRec, node []int, err error) {
	current := map[string]int{} // dispatch node namespace -> attempt
	for _, e := range evs {
		if e.isCallableBranch() {
			key := fmt.Sprint(e.Namespace[:len(e.Namespace)-1])
			a, ok := current[key]
			if !ok {
				return nil, nil, fmt.Errorf("callable branch %s event before its node's started event", e.NodeName)
			}
			branch, node = append(branch, e), append(node, a)
			continue
		}
		if e.Phase == "started" {
			current[fmt.Sprint(e.Namespace)] = e.AttemptIndex
		}
	}
	return branch, node, nil
}

func registerCallableBranchInvariants(r *invariantRegistry) {
	fam := func(pattern string, build func(name string) invariantFunc) {
		r.families = append(r.families, invariantFamily{
			re:    regexp.MustCompile(pattern),
			build: func(g []string) invariantFunc { return build(g[0]) },
		})
	}
	fam(`^(.+)_node_attempt_indices_seen$`, func(n string) invariantFunc {
		return seenSet(func(e *eventRec) (any, bool) {
			return e.AttemptIndex, e.NodeName == n && !e.isCallableBranch()
		})
	})
	fam(`^(.+)_callable_branch_attempt_indices_seen$`, func(b string) invariantFunc {
		return seenSet(func(e *eventRec) (any, bool) { return e.AttemptIndex, e.isCallableBranch() && e.NodeName == b })
	})
	r.exact["callable_branch_events_report_current_attempt_index"] = eventBool(func(evs []*eventRec) (bool, string) {
		branch, node, err := callableAttempts(evs)
		if err != nil {
			return false, err.Error()
		}
		for i, e := range branch {
			if e.AttemptIndex != node[i] {
				return false, fmt.Sprintf("%s %s carries attempt %d in node attempt %d", e.NodeName, e.Phase, e.AttemptIndex, node[i])
			}
		}
		return len(branch) > 0, "no callable-branch event"
	})
	r.exact["callable_branch_started_and_completed_carry_attempt_index_one_on_retry"] = eventBool(func(evs []*eventRec) (bool, string) {
		branch, node, err := callableAttempts(evs)
		if err != nil {
			return false, err.Error()
		}
		phases := map[string][]string{}
		for i, e := range branch {
			if node[i] == 1 && e.AttemptIndex == 1 {
				phases[e.NodeName] = append(phases[e.NodeName], e.Phase)
			}
		}
		for b, ps := range phases {
			if !slices.Contains(ps, "started") || !slices.Contains(ps, "completed") {
				return false, fmt.Sprintf("branch %s on the retry: phases %v", b, ps)
			}
		}
		return len(phases) > 0, "no callable-branch event on the retry"
	})
}
