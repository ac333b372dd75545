package conformance

import (
	"fmt"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The span-tree invariants of the LLM span parent resolution fixtures
// (observability §5.5 lineage-resolved parent: 132, 133, 152, 153).

// llmParents returns each LLM span with its parent node (nil for a root).
func llmParents(env *llmInvEnv) (llms, parents []*spanNode) {
	var walk func(parent *spanNode, ns []*spanNode)
	walk = func(parent *spanNode, ns []*spanNode) {
		for _, n := range ns {
			if n.span.Name == otelobserver.LLMSpanName {
				llms, parents = append(llms, n), append(parents, parent)
			}
			walk(n, n.children)
		}
	}
	walk(nil, env.run.roots)
	return llms, parents
}

// spanKind classifies a span by its attributes.
func spanKindOf(n *spanNode) string {
	a := spanAttrs(n.span)
	switch {
	case n.span.Name == otelobserver.InvocationSpanName:
		return "invocation"
	case a[otelobserver.AttrFanOutParentNodeName] != nil:
		return "instance"
	case a[otelobserver.AttrBranchesParentNodeName] != nil:
		return "branch"
	case a[otelobserver.AttrNodeStep] != nil:
		return "node"
	}
	return "other"
}

// everyLLMParent holds when f holds for every LLM span and its parent.
func everyLLMParent(f func(llm, parent *spanNode, siblings map[*spanNode]int) (bool, string)) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		llms, parents := llmParents(env)
		perParent := map[*spanNode]int{}
		for _, p := range parents {
			perParent[p]++
		}
		for i, l := range llms {
			if parents[i] == nil {
				return false, "an LLM span is a root"
			}
			if ok, detail := f(l, parents[i], perParent); !ok {
				return false, detail
			}
		}
		return len(llms) > 0, "no LLM spans"
	})
}

func parentKindIs(kinds ...string) obsLLMInvariant {
	return everyLLMParent(func(_, p *spanNode, _ map[*spanNode]int) (bool, string) {
		k := spanKindOf(p)
		for _, want := range kinds {
			if k == want {
				return true, ""
			}
		}
		return false, fmt.Sprintf("an LLM span's parent %s is a %s span", p.span.Name, k)
	})
}

func parentKindNot(kinds ...string) obsLLMInvariant {
	return everyLLMParent(func(_, p *spanNode, _ map[*spanNode]int) (bool, string) {
		k := spanKindOf(p)
		for _, bad := range kinds {
			if k == bad {
				return false, fmt.Sprintf("an LLM span's parent %s is a %s span", p.span.Name, k)
			}
		}
		return true, ""
	})
}

// oneLLMPerParent: no two LLM spans share a parent (each instance's call
// under its own instance, not a coincidentally indexed sibling).
var oneLLMPerParent = everyLLMParent(func(_, p *spanNode, per map[*spanNode]int) (bool, string) {
	return per[p] == 1, fmt.Sprintf("%d LLM spans share parent %s", per[p], p.span.Name)
})

// siblingOfNode: the LLM span's parent also holds a node span (the
// calling node's, which opened after the wrapper's call).
var siblingOfNode = everyLLMParent(func(_, p *spanNode, _ map[*spanNode]int) (bool, string) {
	for _, c := range p.children {
		if spanKindOf(c) == "node" {
			return true, ""
		}
	}
	return false, "no node span beside the LLM span under " + p.span.Name
})

// routedByBranch: the LLM span's branch name is its dispatch span's.
var routedByBranch = everyLLMParent(func(l, p *spanNode, _ map[*spanNode]int) (bool, string) {
	b := spanAttrs(l.span)[otelobserver.AttrNodeBranchName]
	return b == p.span.Name, fmt.Sprintf("LLM span of branch %v under %s", b, p.span.Name)
})

// ownLineageNode: each LLM span is the only LLM child of a node span of
// its own fan-out lineage.
var ownLineageNode = everyLLMParent(func(l, p *spanNode, per map[*spanNode]int) (bool, string) {
	if spanKindOf(p) != "node" || per[p] != 1 {
		return false, "an LLM span is not the only LLM child of its node span"
	}
	la, pa := spanAttrs(l.span), spanAttrs(p.span)
	return la[otelobserver.AttrNodeFanOutIndex] == pa[otelobserver.AttrNodeFanOutIndex], "fan-out index differs from the calling node's"
})

// innerNodeSpanCount counts the spans named as the LLM spans' calling
// nodes.
func innerNodeSpanCount(env *llmInvEnv, want *Value) error {
	_, parents := llmParents(env)
	if len(parents) == 0 || parents[0] == nil || want.Kind != KindInt {
		return fmt.Errorf("no calling node span (or a non-integer count)")
	}
	n := len(spansNamed(env.run.roots, parents[0].span.Name))
	if int64(n) != want.Int {
		return fmt.Errorf("%d %s spans, want %d", n, parents[0].span.Name, want.Int)
	}
	return nil
}

// noInstanceDropped: every fan-out node span has one instance span per
// item.
var noInstanceDropped = pred(func(env *llmInvEnv) (bool, string) {
	ok := true
	detail := ""
	walkSpans(env.run.roots, func(n *spanNode) {
		a := spanAttrs(n.span)
		count, isFan := a[otelobserver.AttrFanOutItemCount].(int64)
		if !isFan {
			return
		}
		got := 0
		for _, c := range n.children {
			if spanKindOf(c) == "instance" {
				got++
			}
		}
		if int64(got) != count {
			ok, detail = false, fmt.Sprintf("fan-out %s has %d instance spans for %d items", n.span.Name, got, count)
		}
	})
	return ok, detail
})

// uniqueIndicesPerNode: under every fan-out node span named want, the
// instance spans have distinct indices.
func uniqueIndicesPerNode(env *llmInvEnv, want *Value) error {
	found := false
	var err error
	walkSpans(env.run.roots, func(n *spanNode) {
		if n.span.Name != want.Str || spanKindOf(n) != "node" {
			return
		}
		found = true
		seen := map[any]bool{}
		for _, c := range n.children {
			if spanKindOf(c) != "instance" {
				continue
			}
			i := spanAttrs(c.span)[otelobserver.AttrNodeFanOutIndex]
			if seen[i] {
				err = fmt.Errorf("%s has two instances of index %v", want.Str, i)
			}
			seen[i] = true
		}
	})
	if !found {
		return fmt.Errorf("no fan-out node span %s", want.Str)
	}
	return err
}

// dispatchCloseOrder: under each parallel-branches node span, the branch
// dispatch spans end in the listed (declaration) order.
func dispatchCloseOrder(env *llmInvEnv, want *Value) error {
	if want.Kind != KindList {
		return schemaErrorf(want.Pos, "want the branch names in declaration order")
	}
	checked := false
	var err error
	walkSpans(env.run.roots, func(n *spanNode) {
		if _, ok := spanAttrs(n.span)[otelobserver.AttrBranchesBranchCount]; !ok {
			return
		}
		ends := map[string]int64{}
		for _, c := range n.children {
			if spanKindOf(c) == "branch" {
				ends[c.span.Name] = c.span.EndTime.UnixNano()
			}
		}
		checked = true
		for i := 1; i < len(want.Items); i++ {
			a, b := want.Items[i-1].Str, want.Items[i].Str
			if ends[a] == 0 || ends[b] == 0 || ends[a] > ends[b] {
				err = fmt.Errorf("branch %s did not close before %s", a, b)
			}
		}
	})
	if !checked {
		return fmt.Errorf("no parallel-branches node span")
	}
	return err
}

func init() {
	for name, f := range map[string]obsLLMInvariant{
		"orphan_llm_span_parents_under_inner_fan_out_instance":     parentKindIs("instance"),
		"orphan_llm_span_parents_under_innermost_fan_out_instance": parentKindIs("instance"),
		"orphan_llm_span_parents_under_branch_dispatch_span":       parentKindIs("branch"),
		"orphan_llm_span_not_under_work_branch_dispatch_span":      parentKindNot("branch"),
		"orphan_llm_span_not_under_fan_out_node_or_invocation":     parentKindNot("node", "invocation"),
		"orphan_llm_span_not_under_dispatcher_node_or_invocation":  parentKindNot("node", "invocation"),
		"orphan_llm_span_not_under_node_or_invocation":             parentKindNot("node", "invocation"),
		"orphan_llm_span_not_under_coincidentally_indexed_sibling": oneLLMPerParent,
		"orphan_llm_span_sibling_of_calling_node_span":             siblingOfNode,
		"orphan_llm_span_sibling_of_guard_node_span":               siblingOfNode,
		"orphan_llm_span_routed_to_correct_branch_by_name":         routedByBranch,
		"llm_span_parents_under_own_lineage_calling_node":          ownLineageNode,
		"no_inner_spans_dropped_under_concurrent_nesting":          noInstanceDropped,
		"inner_node_span_count":                                    innerNodeSpanCount,
		"unique_fan_out_indices_per_node_span_under":               uniqueIndicesPerNode,
		"dispatch_spans_close_in_declaration_order":                dispatchCloseOrder,
		"implementation_version_non_empty":                         invImplementationVersion,
		"implementation_name_matches_canonical_value":              invImplementationCanonical,
		"attributes_on_invocation_span_only":                       invImplementationOnlyOnInvocation,
		"attributes_absent_on_inner_spans":                         invImplementationOnlyOnInvocation,
	} {
		obsLLMInvariants[name] = f
	}
}

var invImplementationVersion = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.run.otel.allSpans() {
		if s.Name == otelobserver.InvocationSpanName {
			v, _ := spanAttrs(s)[otelobserver.AttrImplementationVersion].(string)
			return v != "", "implementation version empty"
		}
	}
	return false, "no invocation span"
})

var invImplementationCanonical = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.run.otel.allSpans() {
		if s.Name == otelobserver.InvocationSpanName {
			v := spanAttrs(s)[otelobserver.AttrImplementationName]
			return v == otelobserver.ImplementationName, fmt.Sprintf("implementation name %v", v)
		}
	}
	return false, "no invocation span"
})

// invImplementationOnlyOnInvocation: the implementation attribution
// attributes are on the invocation span and no other.
var invImplementationOnlyOnInvocation = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.run.otel.allSpans() {
		a := spanAttrs(s)
		_, name := a[otelobserver.AttrImplementationName]
		_, version := a[otelobserver.AttrImplementationVersion]
		if (s.Name == otelobserver.InvocationSpanName) != (name && version) {
			return false, "implementation attributes on " + s.Name
		}
	}
	return true, ""
})

// The token-stream invariants of 114 and 116.
func init() {
	obsLLMInvariants["partial_token_events_fire_before_failure"] = pred(func(env *llmInvEnv) (bool, string) {
		tokens, failed := 0, false
		for _, ev := range env.r.allTyped("") {
			switch eventType(ev) {
			case "LlmTokenEvent":
				if failed {
					return false, "a token event after the failure event"
				}
				tokens++
			case "LlmFailedEvent":
				failed = true
			}
		}
		return tokens > 0 && failed, fmt.Sprintf("%d token events, failure %t", tokens, failed)
	})
	obsLLMInvariants["no_llm_token_failed_event_variant_exists"] = pred(func(env *llmInvEnv) (bool, string) {
		for _, ev := range env.r.allTyped("") {
			if eventType(ev) == "LlmTokenFailedEvent" {
				return false, "a token failure event"
			}
		}
		return true, ""
	})
	attemptZero := pred(func(env *llmInvEnv) (bool, string) {
		evs := append(env.r.allTyped("LlmTokenEvent"), env.r.allTyped("LlmCompletionEvent")...)
		for _, ev := range evs {
			if s, _ := graph.CallSourceOf(ev); s.AttemptIndex != 0 {
				return false, fmt.Sprintf("%s at node attempt %d", eventType(ev), s.AttemptIndex)
			}
		}
		return len(evs) > 0, "no events"
	})
	obsLLMInvariants["all_token_events_node_level_attempt_index_zero"] = attemptZero
	obsLLMInvariants["wire_retry_does_not_advance_node_level_attempt_index"] = attemptZero
	obsLLMInvariants["no_per_attempt_typed_event_for_caught_transient"] = pred(func(env *llmInvEnv) (bool, string) {
		n := len(env.r.allTyped("LlmFailedEvent"))
		return n == 0, fmt.Sprintf("%d failure events", n)
	})
	obsLLMInvariants["assembled_response_reflects_successful_attempt_only"] = invDeltasConcatenate
}

// The parallel-branches dispatch span invariants of 038.
func init() {
	obsLLMInvariants["same_named_inner_spans_disambiguated_by_dispatch_parent"] = pred(func(env *llmInvEnv) (bool, string) {
		// Same-named node spans under different branch dispatch spans:
		// each dispatch span holds at most one span of a name.
		ok, found := true, false
		walkSpans(env.run.roots, func(n *spanNode) {
			if spanKindOf(n) != "branch" {
				return
			}
			found = true
			seen := map[string]bool{}
			for _, c := range n.children {
				if seen[c.span.Name] {
					ok = false
				}
				seen[c.span.Name] = true
			}
		})
		return ok && found, "same-named spans share a dispatch parent"
	})
	obsLLMInvariants["dispatch_spans_close_before_node_span"] = pred(func(env *llmInvEnv) (bool, string) {
		ok, found := true, false
		walkSpans(env.run.roots, func(n *spanNode) {
			for _, c := range n.children {
				if spanKindOf(c) == "branch" {
					found = true
					if c.span.EndTime.After(n.span.EndTime) {
						ok = false
					}
				}
			}
		})
		return ok && found, "a dispatch span closes after its node span"
	})
}

// The lineage population invariants of 054 and 055 over the completion
// events.
func init() {
	lineage := func(field string, distinct, null bool) obsLLMInvariant {
		return pred(func(env *llmInvEnv) (bool, string) {
			evs := env.r.allTyped("LlmCompletionEvent")
			seen := map[any]bool{}
			for _, ev := range evs {
				v := normalize(eventView(ev)).(map[string]any)[field]
				if null != (v == nil) {
					return false, fmt.Sprintf("%s is %v", field, v)
				}
				if distinct && seen[v] {
					return false, fmt.Sprintf("two events share %s %v", field, v)
				}
				seen[v] = true
			}
			return len(evs) > 0, "no completion events"
		})
	}
	for name, f := range map[string]obsLLMInvariant{
		"per_instance_fan_out_index_populated":          lineage("fan_out_index", false, false),
		"sibling_instances_have_distinct_fan_out_index": lineage("fan_out_index", true, false),
		"branch_name_null_outside_parallel_branches":    lineage("branch_name", false, true),
		"per_branch_branch_name_populated":              lineage("branch_name", false, false),
		"sibling_branches_have_distinct_branch_name":    lineage("branch_name", true, false),
		"fan_out_index_null_outside_fan_out":            lineage("fan_out_index", false, true),
	} {
		obsLLMInvariants[name] = f
	}
}
