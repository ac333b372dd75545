package conformance

import (
	"fmt"
	"maps"
	"strings"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The span-tree invariants of the callable-branch (110), caller-metadata
// (026) and detached attribution (058) fixtures.

// branchSpans calls f with each parallel-branches node span and its
// dispatch spans (the children carrying the parent node name).
func branchSpans(roots []*spanNode, f func(node *spanNode, branches []*spanNode)) {
	walkSpans(roots, func(n *spanNode) {
		if _, ok := spanAttrs(n.span)[otelobserver.AttrBranchesBranchCount]; !ok {
			return
		}
		var bs []*spanNode
		for _, c := range n.children {
			if spanKindOf(c) == "branch" {
				bs = append(bs, c)
			}
		}
		f(n, bs)
	})
}

// invBranchKeyedByName: each dispatch span is named after its branch,
// carries that name as openarmature.node.branch_name, and no branch has
// two dispatch spans under one node span.
var invBranchKeyedByName = pred(func(env *llmInvEnv) (bool, string) {
	ok, why, found := true, "", false
	branchSpans(env.run.roots, func(_ *spanNode, bs []*spanNode) {
		seen := map[string]bool{}
		for _, b := range bs {
			found = true
			name, _ := spanAttrs(b.span)[otelobserver.AttrNodeBranchName].(string)
			if name != b.span.Name || seen[name] {
				ok, why = false, fmt.Sprintf("dispatch span %s has branch name %q", b.span.Name, name)
			}
			seen[name] = true
		}
	})
	if !found {
		return false, "no dispatch span"
	}
	return ok, why
})

// invBranchNoInnerSpans: a callable branch has no inner nodes, so its
// dispatch span has no children.
var invBranchNoInnerSpans = pred(func(env *llmInvEnv) (bool, string) {
	ok, why := true, ""
	branchSpans(env.run.roots, func(_ *spanNode, bs []*spanNode) {
		for _, b := range bs {
			if len(b.children) > 0 {
				ok, why = false, "dispatch span "+b.span.Name+" has children"
			}
		}
	})
	return ok, why
})

// invBranchCountDispatched: the node span's branch_count equals the
// number of dispatch spans under it (a when-skipped branch has neither).
var invBranchCountDispatched = pred(func(env *llmInvEnv) (bool, string) {
	ok, why, found := true, "", false
	branchSpans(env.run.roots, func(n *spanNode, bs []*spanNode) {
		found = true
		if c, _ := spanAttrs(n.span)[otelobserver.AttrBranchesBranchCount].(int64); c != int64(len(bs)) {
			ok, why = false, fmt.Sprintf("node span %s: branch_count %d, %d dispatch spans", n.span.Name, c, len(bs))
		}
	})
	if !found {
		return false, "no parallel-branches node span"
	}
	return ok, why
})

// userAttrs returns the openarmature.user.* attributes of a span.
func userAttrs(n *spanNode) map[string]any {
	out := map[string]any{}
	for k, v := range spanAttrs(n.span) {
		if strings.HasPrefix(k, otelobserver.AttrUserPrefix) {
			out[k] = v
		}
	}
	return out
}

// invCallerMetadataCrossCutting: every span of the invocation carries
// the invocation span's non-empty openarmature.user.* attribute set.
var invCallerMetadataCrossCutting = pred(func(env *llmInvEnv) (bool, string) {
	roots := env.run.roots
	if len(roots) == 0 {
		return false, "no spans"
	}
	want := userAttrs(roots[0])
	if len(want) == 0 {
		return false, "the invocation span carries no caller metadata"
	}
	ok, why := true, ""
	walkSpans(roots, func(n *spanNode) {
		if got := userAttrs(n); !maps.Equal(got, want) {
			ok, why = false, fmt.Sprintf("span %s carries %v, want %v", n.span.Name, got, want)
		}
	})
	return ok, why
})

// attributed reports whether a span carries non-empty implementation
// name and version attributes.
func attributed(n *spanNode) bool {
	a := spanAttrs(n.span)
	name, _ := a[otelobserver.AttrImplementationName].(string)
	version, _ := a[otelobserver.AttrImplementationVersion].(string)
	return name != "" && version != ""
}

// attributionOnRoots holds when the parent trace's invocation span (and,
// with detached, every detached trace's too) carries the attribution.
func attributionOnRoots(detached bool) obsTraceInvariant {
	return func(roots []*spanNode) (bool, string) {
		if len(roots) == 0 || roots[0].span.Name != otelobserver.InvocationSpanName {
			return false, "no parent invocation span"
		}
		check := roots[:1]
		if detached {
			if check = detachedSpans(roots); len(check) == 0 {
				return false, "no detached trace"
			}
		}
		for _, r := range check {
			if r.span.Name != otelobserver.InvocationSpanName || !attributed(r) {
				return false, "root " + r.span.Name + " lacks the implementation attribution"
			}
		}
		return true, ""
	}
}

// attributionOnlyOnInvocations: across every trace, the attribution is
// on the invocation spans and on no inner span.
func attributionOnlyOnInvocations(roots []*spanNode) (bool, string) {
	ok, why := true, ""
	walkSpans(roots, func(n *spanNode) {
		a := spanAttrs(n.span)
		_, name := a[otelobserver.AttrImplementationName]
		_, version := a[otelobserver.AttrImplementationVersion]
		inv := n.span.Name == otelobserver.InvocationSpanName
		if inv && !attributed(n) || !inv && (name || version) {
			ok, why = false, "implementation attribution misplaced on "+n.span.Name
		}
	})
	return ok, why
}

func init() {
	for name, f := range map[string]obsLLMInvariant{
		"callable_branch_renders_one_span_keyed_by_branch_name": invBranchKeyedByName,
		"callable_branch_span_has_no_inner_node_spans":          invBranchNoInnerSpans,
		"when_skipped_branch_emits_no_span":                     invBranchCountDispatched,
		"branch_count_is_dispatched_count_not_declared":         invBranchCountDispatched,
		"caller_metadata_cross_cutting":                         invCallerMetadataCrossCutting,
	} {
		obsLLMInvariants[name] = f
	}
	for name, f := range map[string]obsTraceInvariant{
		"attribution_attrs_on_parent_invocation_span":            attributionOnRoots(false),
		"attribution_attrs_on_detached_child_invocation_span":    attributionOnRoots(true),
		"attribution_attrs_absent_on_inner_spans_both_traces":    attributionOnlyOnInvocations,
		"always_emit_invariant_applies_to_every_invocation_span": attributionOnlyOnInvocations,
	} {
		obsTraceInvariants[name] = f
	}
}

// invocationIDs checks expected.invocation_id: every invocation span of
// the run (the parent trace's and any detached one's) carries want as
// openarmature.invocation_id.
func invocationIDs(m *matcher, want *Value, run *obsRun) error {
	n := 0
	for _, s := range run.otel.allSpans() {
		if s.Name != otelobserver.InvocationSpanName {
			continue
		}
		n++
		if err := m.match("invocation_id", want.Str, spanAttrs(s)[otelobserver.AttrInvocationID], exact); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("invocation_id: no invocation span")
	}
	return nil
}

// invCallerInvocationIDVerbatim: the caller-supplied invocation id is on
// every invocation span unchanged (observability §5.1).
func invCallerInvocationIDVerbatim(om *obsMeta, runs []*obsRun) (bool, string) {
	if om.invocationID == "" {
		return false, "the case supplies no caller_invocation_id"
	}
	for _, r := range runs {
		n := 0
		for _, s := range r.otel.allSpans() {
			if s.Name != otelobserver.InvocationSpanName {
				continue
			}
			n++
			if got := spanAttrs(s)[otelobserver.AttrInvocationID]; got != om.invocationID {
				return false, fmt.Sprintf("invocation span carries %v, want %q", got, om.invocationID)
			}
		}
		if n == 0 {
			return false, "no invocation span"
		}
	}
	return true, ""
}

func init() {
	accumulatorInvariants["caller_invocation_id_verbatim_on_attribute"] = invCallerInvocationIDVerbatim
}

// The streamed-call invariants of 117: the OTel rendering of a streamed
// call is atomic (observability §5.5.2), one LLM span with the assembled
// output and no per-token spans.

// invNoPerTokenSpans: no LLM span has children.
var invNoPerTokenSpans = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.llmSpans {
		if len(s.children) > 0 {
			return false, fmt.Sprintf("LLM span has %d children", len(s.children))
		}
	}
	return len(env.llmSpans) > 0, "no LLM span"
})

// invSpanOutputAssembled: the LLM span's output content is the assembled
// response's content.
var invSpanOutputAssembled = pred(func(env *llmInvEnv) (bool, string) {
	r := env.r.lastResponse()
	if r == nil || len(env.llmSpans) != 1 {
		return false, fmt.Sprintf("%d LLM spans", len(env.llmSpans))
	}
	got := spanAttrs(env.llmSpans[0].span)["openarmature.llm.output.content"]
	want := r.Message.Text()
	return got == want, fmt.Sprintf("span output %v, assembled %q", got, want)
})

func init() {
	obsLLMInvariants["exactly_one_llm_complete_span_under_stream"] = spanCount(1)
	obsLLMInvariants["no_per_token_child_spans"] = invNoPerTokenSpans
	obsLLMInvariants["span_output_is_full_assembled_content"] = invSpanOutputAssembled
}

// The caller-metadata snapshot invariants of 052: every collector's
// LLM completion events read null (no opt-in) or the metadata in scope
// at the call (opt-in), and the snapshot is immutable.
func callerMetaSnapshots(env *llmInvEnv, optIn bool) (bool, string) {
	n := 0
	for _, c := range env.r.ol.collectors {
		if env.r.ol.withMeta[c] != optIn {
			continue
		}
		evs, err := env.r.typed(c, "LlmCompletionEvent")
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs {
			n++
			got := env.r.collectorView(c, ev)["caller_invocation_metadata"]
			if optIn != (got != nil) {
				return false, fmt.Sprintf("collector %s reads caller_invocation_metadata %v", c, got)
			}
		}
	}
	return n > 0, "no LLM completion event collected"
}

func init() {
	obsLLMInvariants["opt_in_disabled_yields_null_caller_metadata"] = pred(func(env *llmInvEnv) (bool, string) {
		return callerMetaSnapshots(env, false)
	})
	obsLLMInvariants["opt_in_enabled_yields_snapshot_caller_metadata"] = pred(func(env *llmInvEnv) (bool, string) {
		return callerMetaSnapshots(env, true)
	})
	// graph.Metadata has no mutator and Map returns a copy: writing the
	// copy leaves the event's snapshot unchanged.
	obsLLMInvariants["snapshot_is_immutable_mapping"] = pred(func(env *llmInvEnv) (bool, string) {
		evs := env.r.allTyped("LlmCompletionEvent")
		for _, ev := range evs {
			src, _ := graph.CallSourceOf(ev)
			before := src.Metadata.Len()
			if m := src.Metadata.Map(); m != nil {
				m["__mutated__"] = true
			}
			if _, ok := src.Metadata.Get("__mutated__"); ok || src.Metadata.Len() != before {
				return false, "writing the snapshot's copy changed the event's metadata"
			}
		}
		return len(evs) > 0, "no LLM completion event"
	})
}

// The callable-branch retry invariants of 119: each node-level attempt
// of a parallel-branches node renders a sibling node span, and its
// dispatch spans carry that attempt's index.

// branchAttempts calls f with each parallel-branches node span's attempt
// index and its dispatch spans' ones.
func branchAttempts(roots []*spanNode, f func(node int64, branches []int64)) {
	branchSpans(roots, func(n *spanNode, bs []*spanNode) {
		node, _ := spanAttrs(n.span)[otelobserver.AttrNodeAttemptIndex].(int64)
		var idx []int64
		for _, b := range bs {
			i, ok := spanAttrs(b.span)[otelobserver.AttrNodeAttemptIndex].(int64)
			if !ok {
				i = -1
			}
			idx = append(idx, i)
		}
		f(node, idx)
	})
}

func init() {
	obsLLMInvariants["sibling_parallel_branches_node_spans_per_attempt"] = func(env *llmInvEnv, want *Value) error {
		if want.Kind != KindInt {
			return schemaErrorf(want.Pos, "sibling_parallel_branches_node_spans_per_attempt must be an integer")
		}
		n := 0
		for _, r := range env.run.roots {
			for _, c := range r.children {
				if _, ok := spanAttrs(c.span)[otelobserver.AttrBranchesBranchCount]; ok {
					n++
				}
			}
		}
		if int64(n) != want.Int {
			return fmt.Errorf("want %d sibling parallel-branches node spans, got %d", want.Int, n)
		}
		return nil
	}
	obsLLMInvariants["retry_callable_branch_dispatch_span_attempt_index_is_one"] = pred(func(env *llmInvEnv) (bool, string) {
		ok, found, why := true, false, ""
		branchAttempts(env.run.roots, func(node int64, bs []int64) {
			if node != 1 {
				return
			}
			for _, b := range bs {
				found = true
				if b != 1 {
					ok, why = false, fmt.Sprintf("a dispatch span of the retry carries attempt %d", b)
				}
			}
		})
		if !found {
			return false, "no dispatch span on the retry"
		}
		return ok, why
	})
	obsLLMInvariants["callable_branch_attempt_index_sourced_from_node_event_not_zero"] = pred(func(env *llmInvEnv) (bool, string) {
		ok, nonZero, why := true, false, ""
		branchAttempts(env.run.roots, func(node int64, bs []int64) {
			for _, b := range bs {
				if b != node {
					ok, why = false, fmt.Sprintf("dispatch span attempt %d under node attempt %d", b, node)
				}
				nonZero = nonZero || b > 0
			}
		})
		if !nonZero {
			return false, "every dispatch span carries attempt 0"
		}
		return ok, why
	})
}
