package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Event-stream predicates: checks over the events one observer received
// (or one accumulator snapshot), conformance-adapter §5.9 and §7.

// eventBool adapts a boolean predicate over the event set.
func eventBool(pred func(evs []*eventRec) (bool, string)) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		evs, err := env.eventSet()
		if err != nil {
			return err
		}
		got, detail := pred(evs)
		return compareBool(want, got, detail)
	}
}

// nodeEventBool adapts a boolean predicate over one node's events; the
// node must have produced at least one event.
func nodeEventBool(node string, pred func(evs []*eventRec) bool) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		evs, err := env.eventSet()
		if err != nil {
			return err
		}
		mine := eventsOf(evs, node)
		if len(mine) == 0 {
			return fmt.Errorf("no events for node %q in %s", node, env.source)
		}
		return compareBool(want, pred(mine), "")
	}
}

// nodeAll checks that pred holds for every event of node (want true) or
// fails for at least one (want false).
func nodeAll(node string, pred func(e *eventRec) bool) invariantFunc {
	return nodeEventBool(node, func(evs []*eventRec) bool {
		for _, e := range evs {
			if !pred(e) {
				return false
			}
		}
		return true
	})
}

func noEventsForNode(_ context.Context, env *invEnv, want *Value) error {
	evs, err := env.eventSet()
	if err != nil {
		return err
	}
	var nodes []string
	switch want.Kind {
	case KindString:
		nodes = []string{want.Str}
	case KindList:
		for _, it := range want.Items {
			if it.Kind != KindString {
				return fmt.Errorf("value must be a node name or a list of them")
			}
			nodes = append(nodes, it.Str)
		}
	default:
		return fmt.Errorf("value must be a node name or a list of them")
	}
	for _, n := range nodes {
		if got := eventsOf(evs, n); len(got) > 0 {
			return fmt.Errorf("node %q produced %d event(s) in %s", n, len(got), env.source)
		}
	}
	return nil
}

// edgeFailureInCompleted: an edge-resolution failure (routing_error or
// edge_exception) is reported on the preceding node's completed event,
// which has no post_state, that node has exactly one started/completed
// pair, and nothing is emitted after it (graph-engine 020).
func edgeFailureInCompleted(evs []*eventRec) (bool, string) {
	idx := -1
	for i, e := range evs {
		if e.Phase == "completed" && e.HasError && (e.ErrCategory == "routing_error" || e.ErrCategory == "edge_exception") {
			idx = i
		}
	}
	if idx < 0 {
		return false, "no completed event carries a routing_error or edge_exception"
	}
	failed := evs[idx]
	if failed.HasPostState {
		return false, "the failing completed event has post_state populated"
	}
	var started, completed int
	for _, e := range evs {
		if e.NodeName == failed.NodeName && slices.Equal(e.Namespace, failed.Namespace) {
			switch e.Phase {
			case "started":
				started++
			case "completed":
				completed++
			}
		}
	}
	if started != 1 || completed != 1 {
		return false, fmt.Sprintf("node %q has %d started and %d completed events, want one pair", failed.NodeName, started, completed)
	}
	if idx != len(evs)-1 {
		return false, fmt.Sprintf("%d event(s) follow the failing completed event", len(evs)-1-idx)
	}
	return true, ""
}

func innerEventCount(_ context.Context, env *invEnv, want *Value) error {
	evs, err := env.eventSet()
	if err != nil {
		return err
	}
	w, err := wantInt(want)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range evs {
		if e.isInner() {
			n++
		}
	}
	if n != w {
		return fmt.Errorf("want %d inner events, got %d", w, n)
	}
	return nil
}

// innerSeen compares the set of values key extracts from inner events.
func innerSeen(key func(e *eventRec) (any, bool)) invariantFunc {
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
			if !e.isInner() {
				continue
			}
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

func dedupe(vs []any) []any {
	seen := map[string]bool{}
	var out []any
	for _, v := range vs {
		k := formatValue(v)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

func identitiesUnique(evs []*eventRec, chains bool) bool {
	seen := map[string]bool{}
	for _, e := range evs {
		k := e.identity(chains)
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

func innerIdentitiesUnique(evs []*eventRec) (bool, string) {
	var inner []*eventRec
	for _, e := range evs {
		if e.isInner() {
			inner = append(inner, e)
		}
	}
	if len(inner) == 0 {
		return false, "no inner events"
	}
	return identitiesUnique(inner, false), ""
}

func startedBeforeSuspended(evs []*eventRec) (bool, string) {
	started := map[string]bool{}
	found := false
	for _, e := range evs {
		switch e.Phase {
		case "started":
			started[e.sourceKey()] = true
		case "suspended":
			found = true
			if !started[e.sourceKey()] {
				return false, fmt.Sprintf("suspended event of %q has no preceding started event", e.NodeName)
			}
		}
	}
	if !found {
		return false, "no suspended event"
	}
	return true, ""
}

func noCompletedForSuspending(evs []*eventRec) (bool, string) {
	suspended := map[string]bool{}
	for _, e := range evs {
		if e.Phase == "suspended" {
			suspended[strings.Join(e.Namespace, "/")] = true
		}
	}
	if len(suspended) == 0 {
		return false, "no suspended event"
	}
	for _, e := range evs {
		if e.Phase == "completed" && suspended[strings.Join(e.Namespace, "/")] {
			return false, fmt.Sprintf("suspending node %q also has a completed event", e.NodeName)
		}
	}
	return true, ""
}

func nodeEventsCount(node string) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		evs, err := env.eventSet()
		if err != nil {
			return err
		}
		w, err := wantInt(want)
		if err != nil {
			return err
		}
		if got := len(eventsOf(evs, node)); got != w {
			return fmt.Errorf("want %d events for node %q, got %d", w, node, got)
		}
		return nil
	}
}

func nodeSeen(node string, key func(e *eventRec) any) invariantFunc {
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
		for _, e := range eventsOf(evs, node) {
			got = append(got, key(e))
		}
		if !sameSet(w, got) {
			return fmt.Errorf("node %q: want the set %s, got %s", node, formatValue(w), formatValue(dedupe(got)))
		}
		return nil
	}
}

func phasePresent(node, phase string) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		evs, err := env.eventSet()
		if err != nil {
			return err
		}
		got := false
		for _, e := range eventsOf(evs, node) {
			if e.Phase == phase {
				got = true
			}
		}
		return compareBool(want, got, fmt.Sprintf("%s event of %q in %s", phase, node, env.source))
	}
}

func outermostNoBranchName(_ context.Context, env *invEnv, want *Value) error {
	evs, err := env.eventSet()
	if err != nil {
		return err
	}
	nodesV, ok := want.Get("nodes")
	if !ok || nodesV.Kind != KindList || len(want.Fields) != 1 {
		return fmt.Errorf("value must be {nodes: [<node>, ...]}")
	}
	for _, it := range nodesV.Items {
		if it.Kind != KindString {
			return fmt.Errorf("nodes must be node names")
		}
		mine := eventsOf(evs, it.Str)
		if len(mine) == 0 {
			return fmt.Errorf("no events for node %q", it.Str)
		}
		for _, e := range mine {
			if len(e.Namespace) == 1 && e.BranchName != nil {
				return fmt.Errorf("node %q event carries branch_name %q", it.Str, *e.BranchName)
			}
		}
	}
	return nil
}

func innerCorrectBranchName(_ context.Context, env *invEnv, want *Value) error {
	evs, err := env.eventSet()
	if err != nil {
		return err
	}
	if want.Kind != KindMap {
		return fmt.Errorf("value must map node names to branch names")
	}
	for _, f := range want.Fields {
		if f.Value.Kind != KindString {
			return fmt.Errorf("branch name for %q must be a string", f.Key)
		}
		mine := eventsOf(evs, f.Key)
		if len(mine) == 0 {
			return fmt.Errorf("no events for node %q", f.Key)
		}
		for _, e := range mine {
			if e.BranchName == nil || *e.BranchName != f.Value.Str {
				got, _ := ptrVal(e.BranchName)
				return fmt.Errorf("node %q event has branch_name %s, want %q", f.Key, formatValue(got), f.Value.Str)
			}
		}
	}
	return nil
}
