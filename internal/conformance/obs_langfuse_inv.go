package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The Langfuse invariants (named by the observability fixtures' .md
// files): each reads what the case's invocations sent to Langfuse.

// lfInvariant checks one invariant over the case's Langfuse runs.
type lfInvariant func(m *matcher, le *lfExec, want *Value) error

var lfInvariants map[string]lfInvariant

func init() {
	lfInvariants = map[string]lfInvariant{
		// §8.5 / §8.4.1 trace identity and correlation.
		"correlation_id_consistency":                    lfCorrelationConsistency,
		"correlation_id_consistent_across_traces":       lfCorrelationAcrossTraces,
		"trace_id_equals_invocation_id_dashes_stripped": lfTraceIDDashesStripped,
		"langfuse_trace_id_is_uuid_hex_dashes_stripped": lfTraceIDDashesStripped,
		"langfuse_trace_id_is_sha256_first16_hex":       lfTraceIDSHA256,
		"raw_invocation_id_in_trace_metadata":           lfRawInvocationID,
		"caller_invocation_id_verbatim_on_attribute":    lfCallerInvocationID,
		"distinct_trace_ids":                            lfDistinctTraceIDs,
		// Fan-out shape (032; the OTel invariants of the same names read
		// the spans).
		"unique_fan_out_indices_under": lfUniqueFanOutIndices,
		"fan_out_index_range":          lfFanOutIndexRange,
		// Detached mode (033).
		"dispatch_detached_child_trace_id_count":                lfDetachedChildCount,
		"all_instance_trace_ids_distinct":                       lfInstanceTraceIDsDistinct,
		"no_instance_spans_in_parent_trace":                     lfNoInstanceInParent,
		"all_instance_traces_carry_detached_from_invocation_id": lfDetachedFrom,
		// Caller metadata (027, 029, 030, 034, 084).
		"caller_metadata_top_level_on_trace":                 lfCallerOnTrace,
		"caller_metadata_top_level_on_every_observation":     lfCallerOnEveryObservation,
		"baseline_caller_metadata_universal":                 lfBaselineUniversal,
		"fan_out_per_instance_metadata_isolation":            lfUnitIsolation(false),
		"parallel_branches_per_branch_metadata_isolation":    lfUnitIsolation(true),
		"per_branch_oa_emitted_branch_name_isolation":        lfBranchNameIsolation,
		"open_span_update_reaches_invocation_and_node_spans": lfAugmentReachesOpen,
		"trace_session_id_equals_supplied_session_id":        lfSessionIDSupplied,
		"trace_session_id_unset":                             lfTraceFieldUnset("sessionId"),
		"trace_user_id_equals_metadata_userid":               lfUserIDPromoted,
		"user_id_promotion_is_additive":                      lfUserIDPromoted,
		"trace_user_id_unset":                                lfTraceFieldUnset("userId"),
		"other_metadata_unaffected":                          lfCallerOnTrace,
		// Attribution rows (059).
		"implementation_name_present_on_trace":          lfImplementationRow("implementation_name"),
		"implementation_version_present_on_trace":       lfImplementationRow("implementation_version"),
		"rows_emit_with_default_privacy_config":         lfRowsWithStatePayload(false),
		"rows_emit_with_state_payload_enabled":          lfRowsWithStatePayload(true),
		"always_emit_invariant_inherited_from_spec_5_1": lfRowsMatchOTel,
		// Tool observations (098).
		"renders_as_dedicated_tool_observation_not_generation": lfDedicatedType(langfuse.TypeTool),
		"tool_name_and_call_id_in_metadata":                    lfToolIdentity,
		"input_output_populated_with_payload_on":               lfCallPayload(langfuse.TypeTool, true),
		"failed_tool_renders_error_level":                      lfErrorLevel(langfuse.TypeTool),
		"error_type_and_message_in_metadata":                   lfErrorFields,
		// Generations (117, 123, 134, 148).
		"exactly_one_generation_observation_under_stream":                      lfGenerationCount(1),
		"no_per_token_child_observations":                                      lfNoTokenObservations,
		"generation_output_is_full_assembled_content":                          lfAssembledOutput,
		"failed_generation_renders_error_level_and_category":                   lfFailedGeneration(false),
		"failed_generation_carries_output_usage_finish_reason":                 lfFailedGenerationResponse(true),
		"output_redacted_under_payload_disabled":                               lfOutputRedacted,
		"usage_finish_reason_and_error_level_unchanged_under_payload_disabled": lfFailedGenerationResponse(false),
		"generation_count": lfGenerationCountValue,
		"generation_usage_input_omitted_when_prompt_tokens_null": lfUsageKeys([]string{"output", "total"}, []string{"input"}),
		"generation_usage_output_and_total_present_when_sound":   lfUsageKeys([]string{"output", "total"}, nil),
		// Nested fan-out parent resolution (134).
		"no_inner_observations_dropped_under_concurrent_nesting":             lfNoneDropped,
		"generation_parents_under_own_lineage_calling_node_observation":      lfOwnLineageParent,
		"langfuse_parent_matches_otel_parent":                                lfParentMatchesOTel,
		"orphan_generation_parents_under_inner_fan_out_instance_observation": lfOrphanUnderInstance,
		"orphan_generation_not_under_coincidentally_indexed_sibling":         lfOrphanDistinctLineage,
		"orphan_generation_not_under_fan_out_node_or_trace":                  lfOrphanNotUnderNode,
		"orphan_generation_sibling_of_calling_node_observation":              lfOrphanSibling,
	}
}

// --- helpers ---------------------------------------------------------------

// lfObs is an observation with its trace and parent.
type lfObs struct {
	*langfusetest.Observation
	trace  *langfusetest.Trace
	parent *langfusetest.Observation
}

// all returns every observation of the run.
func (r *lfRun) all() []lfObs {
	var out []lfObs
	var walk func(t *langfusetest.Trace, p *langfusetest.Observation, os []*langfusetest.Observation)
	walk = func(t *langfusetest.Trace, p *langfusetest.Observation, os []*langfusetest.Observation) {
		for _, o := range os {
			out = append(out, lfObs{Observation: o, trace: t, parent: p})
			walk(t, o, o.Children)
		}
	}
	for _, t := range r.traces {
		walk(t, nil, t.Observations)
	}
	return out
}

func (r *lfRun) ofType(typ langfuse.ObservationType) []lfObs {
	var out []lfObs
	for _, o := range r.all() {
		if o.Type == string(typ) {
			out = append(out, o)
		}
	}
	return out
}

// ancestors returns o's ancestors, innermost first.
func (r *lfRun) ancestors(o *langfusetest.Observation) []*langfusetest.Observation {
	parents := map[*langfusetest.Observation]*langfusetest.Observation{}
	for _, x := range r.all() {
		parents[x.Observation] = x.parent
	}
	var out []*langfusetest.Observation
	for p := parents[o]; p != nil; p = parents[p] {
		out = append(out, p)
	}
	return out
}

// each runs f on every run, stopping at the first failure.
func (le *lfExec) each(f func(r *lfRun) (bool, string)) (bool, string) {
	if len(le.runs) == 0 {
		return false, "no invocation"
	}
	for _, r := range le.runs {
		if ok, why := f(r); !ok {
			return false, fmt.Sprintf("%s: %s", r.run.Name, why)
		}
	}
	return true, ""
}

func boolInv(f func(le *lfExec) (bool, string)) lfInvariant {
	return func(_ *matcher, le *lfExec, want *Value) error {
		ok, why := f(le)
		if ok {
			why = ""
		}
		return compareBool(want, ok, why)
	}
}

func perRun(f func(le *lfExec, r *lfRun) (bool, string)) lfInvariant {
	return boolInv(func(le *lfExec) (bool, string) {
		return le.each(func(r *lfRun) (bool, string) { return f(le, r) })
	})
}

func mainTrace(r *lfRun) (*langfusetest.Trace, bool) {
	if len(r.traces) == 0 {
		return nil, false
	}
	return r.traces[0], true
}

func metaOf(o *langfusetest.Observation) map[string]any {
	if m := o.Metadata(); m != nil {
		return m
	}
	return map[string]any{}
}

func traceMeta(t *langfusetest.Trace) map[string]any {
	if m := t.Metadata(); m != nil {
		return m
	}
	return map[string]any{}
}

// --- trace identity --------------------------------------------------------

var lfCorrelationConsistency = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	for _, t := range r.traces {
		id, _ := traceMeta(t)["correlation_id"].(string)
		if id == "" {
			return false, fmt.Sprintf("trace %s has no metadata.correlation_id", t.ID)
		}
		for _, o := range r.all() {
			if o.trace == t && metaOf(o.Observation)["correlation_id"] != id {
				return false, fmt.Sprintf("observation %s: correlation_id %v, trace's %s", o.Name(), metaOf(o.Observation)["correlation_id"], id)
			}
		}
	}
	return len(r.traces) > 0, "no trace"
})

var lfCorrelationAcrossTraces = boolInv(func(le *lfExec) (bool, string) {
	ids := map[any]bool{}
	n := 0
	for _, r := range le.runs {
		for _, t := range r.traces {
			ids[traceMeta(t)["correlation_id"]] = true
			n++
		}
	}
	return n > 1 && len(ids) == 1 && !ids[nil], fmt.Sprintf("%d traces, correlation ids %v", n, ids)
})

var lfTraceIDDashesStripped = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	want := strings.ReplaceAll(strings.ToLower(r.run.InvocationID), "-", "")
	return ok && t.ID == want && len(want) == 32, fmt.Sprintf("trace id %v for invocation %s", traceIDOf(r), r.run.InvocationID)
})

func traceIDOf(r *lfRun) any {
	if t, ok := mainTrace(r); ok {
		return t.ID
	}
	return nil
}

var lfTraceIDSHA256 = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	sum := sha256.Sum256([]byte(r.run.InvocationID))
	want := hex.EncodeToString(sum[:16])
	t, ok := mainTrace(r)
	return ok && t.ID == want, fmt.Sprintf("trace id %v, sha256(%q)[:16] = %s", traceIDOf(r), r.run.InvocationID, want)
})

var lfRawInvocationID = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	return ok && traceMeta(t)["invocation_id"] == r.run.InvocationID && r.run.InvocationID == le.lf.callerInvID,
		fmt.Sprintf("trace metadata.invocation_id %v, invocation %s", traceMeta(t)["invocation_id"], r.run.InvocationID)
})

var lfCallerInvocationID = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	if le.lf.callerInvID == "" || r.run.InvocationID != le.lf.callerInvID {
		return false, fmt.Sprintf("invocation id %s, caller supplied %q", r.run.InvocationID, le.lf.callerInvID)
	}
	for _, root := range r.run.roots {
		if root.span.Name == otelobserver.InvocationSpanName {
			got := spanAttrs(root.span)[otelobserver.AttrInvocationID]
			return got == le.lf.callerInvID, fmt.Sprintf("%s = %v", otelobserver.AttrInvocationID, got)
		}
	}
	return false, "no invocation span"
})

var lfDistinctTraceIDs = boolInv(func(le *lfExec) (bool, string) {
	seen := map[string]bool{}
	for _, r := range le.runs {
		for _, t := range r.traces {
			if seen[t.ID] {
				return false, "trace id " + t.ID + " repeats"
			}
			seen[t.ID] = true
		}
	}
	return len(seen) > 1, fmt.Sprintf("%d trace(s)", len(seen))
})

// --- fan-out shape ---------------------------------------------------------

// fanOutNodes returns the fan-out node observations named name (any name
// when empty) with their instance indices.
func fanOutGroups(r *lfRun, name string) map[*langfusetest.Observation][]int64 {
	out := map[*langfusetest.Observation][]int64{}
	for _, o := range r.all() {
		if _, ok := metaOf(o.Observation)["fan_out_item_count"]; !ok || (name != "" && o.Name() != name) {
			continue
		}
		var idx []int64
		for _, c := range o.Children {
			m := metaOf(c)
			if _, unit := m["fan_out_parent_node_name"]; !unit {
				continue
			}
			if i, ok := m["fan_out_index"].(int64); ok {
				idx = append(idx, i)
			}
		}
		out[o.Observation] = idx
	}
	return out
}

func lfUniqueFanOutIndices(_ *matcher, le *lfExec, want *Value) error {
	name, err := str(want, "unique_fan_out_indices_under")
	if err != nil {
		return err
	}
	for _, r := range le.runs {
		groups := fanOutGroups(r, name)
		if len(groups) == 0 {
			return fmt.Errorf("%s: no fan-out node observation %s", r.run.Name, name)
		}
		for _, idx := range groups {
			sorted := slices.Sorted(slices.Values(idx))
			if len(idx) == 0 || len(slices.Compact(sorted)) != len(idx) {
				return fmt.Errorf("%s: instance indices %v under %s are not unique", r.run.Name, idx, name)
			}
		}
	}
	return nil
}

func lfFanOutIndexRange(_ *matcher, le *lfExec, want *Value) error {
	if want.Kind != KindList || len(want.Items) != 2 || want.Items[0].Kind != KindInt || want.Items[1].Kind != KindInt {
		return schemaErrorf(want.Pos, "fan_out_index_range must be [low, high]")
	}
	lo, hi := want.Items[0].Int, want.Items[1].Int
	var wantIdx []int64
	for i := lo; i <= hi; i++ {
		wantIdx = append(wantIdx, i)
	}
	for _, r := range le.runs {
		groups := fanOutGroups(r, "")
		if len(groups) == 0 {
			return fmt.Errorf("%s: no fan-out node observation", r.run.Name)
		}
		for o, idx := range groups {
			if got := slices.Sorted(slices.Values(idx)); !slices.Equal(got, wantIdx) {
				return fmt.Errorf("%s: instance indices %v under %s, want %d..%d", r.run.Name, got, o.Name(), lo, hi)
			}
		}
	}
	return nil
}

// --- detached mode ---------------------------------------------------------

// detachedDispatch returns the observations referencing detached traces
// and the ids they reference.
func detachedDispatch(r *lfRun) (map[*langfusetest.Observation][]string, error) {
	out := map[*langfusetest.Observation][]string{}
	for _, o := range r.all() {
		v, ok := metaOf(o.Observation)["detached_child_trace_ids"]
		if !ok {
			continue
		}
		list, _ := v.([]any)
		for _, id := range list {
			s, ok := id.(string)
			if !ok {
				return nil, fmt.Errorf("detached_child_trace_ids %v holds a non-string", v)
			}
			out[o.Observation] = append(out[o.Observation], s)
		}
	}
	return out, nil
}

func lfDetachedChildCount(_ *matcher, le *lfExec, want *Value) error {
	if want.Kind != KindInt {
		return schemaErrorf(want.Pos, "dispatch_detached_child_trace_id_count must be an integer")
	}
	for _, r := range le.runs {
		d, err := detachedDispatch(r)
		if err != nil {
			return err
		}
		if len(d) != 1 {
			return fmt.Errorf("%s: %d dispatching observations reference detached traces, want 1", r.run.Name, len(d))
		}
		known := map[string]bool{}
		for _, t := range r.traces[1:] {
			known[t.ID] = true
		}
		for o, ids := range d {
			if int64(len(ids)) != want.Int {
				return fmt.Errorf("%s: %s references %d detached traces, want %d", r.run.Name, o.Name(), len(ids), want.Int)
			}
			for _, id := range ids {
				if !known[id] {
					return fmt.Errorf("%s: %s references %s, which is not a detached trace of the run", r.run.Name, o.Name(), id)
				}
			}
			if metaOf(o)["detached"] != true {
				return fmt.Errorf("%s: %s lacks metadata.detached", r.run.Name, o.Name())
			}
		}
	}
	return nil
}

var lfInstanceTraceIDsDistinct = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	seen := map[string]bool{}
	for _, t := range r.traces {
		if seen[t.ID] {
			return false, "trace id " + t.ID + " repeats"
		}
		seen[t.ID] = true
	}
	return len(r.traces) > 1, fmt.Sprintf("%d trace(s)", len(r.traces))
})

var lfNoInstanceInParent = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	if !ok {
		return false, "no trace"
	}
	var leak []string
	langfusetest.Walk(t.Observations, func(o *langfusetest.Observation) {
		if _, unit := metaOf(o)["fan_out_parent_node_name"]; unit {
			leak = append(leak, o.Name())
		}
		if _, d := metaOf(o)["detached_child_trace_ids"]; d && len(o.Children) > 0 {
			leak = append(leak, lfNames(o.Children))
		}
	})
	return len(leak) == 0 && len(r.traces) > 1, fmt.Sprintf("instance observations in the parent trace: %v", leak)
})

func lfDetachedFrom(m *matcher, le *lfExec, want *Value) error {
	for _, r := range le.runs {
		if len(r.traces) < 2 {
			return fmt.Errorf("%s: no detached trace", r.run.Name)
		}
		for i, t := range r.traces[1:] {
			if err := m.match(fmt.Sprintf("%s: detached trace %d metadata.detached_from_invocation_id", r.run.Name, i),
				want.Native(), traceMeta(t)["detached_from_invocation_id"], exact); err != nil {
				return err
			}
		}
	}
	return nil
}

// --- caller metadata -------------------------------------------------------

func hasEntries(m map[string]any, entries map[string]any) (bool, string) {
	for k, v := range entries {
		got, ok := m[k]
		if !ok || !deepEqual(normalize(got), normalize(v)) {
			return false, fmt.Sprintf("%s = %s, want %s", k, formatValue(got), formatValue(v))
		}
	}
	return true, ""
}

var lfCallerOnTrace = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	if !ok || len(le.lf.callerMeta) == 0 {
		return false, "no trace or no caller metadata"
	}
	if _, nested := traceMeta(t)["user"]; nested {
		return false, "trace metadata nests a user object"
	}
	return hasEntries(traceMeta(t), le.lf.callerMeta)
})

var lfCallerOnEveryObservation = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	all := r.all()
	if len(all) == 0 || len(le.lf.callerMeta) == 0 {
		return false, "no observations or no caller metadata"
	}
	for _, o := range all {
		if ok, why := hasEntries(metaOf(o.Observation), le.lf.callerMeta); !ok {
			return false, o.Name() + ": " + why
		}
	}
	return true, ""
})

var lfBaselineUniversal = boolInv(func(le *lfExec) (bool, string) {
	for _, inv := range []lfInvariant{lfCallerOnTrace, lfCallerOnEveryObservation} {
		if err := inv(nil, le, trueValue); err != nil {
			return false, err.Error()
		}
	}
	return true, ""
})

// trueValue is the expectation "true", for invariants built on others.
var trueValue = &Value{Kind: KindBool, Bool: true}

// oaKeys are the metadata keys the observer emits (not caller entries).
var oaKeys = map[string]bool{
	"correlation_id": true, "namespace": true, "step": true, "attempt_index": true, "fan_out_index": true,
	"branch_name": true, "subgraph_name": true, "fan_out_item_count": true, "fan_out_concurrency": true,
	"fan_out_error_policy": true, "fan_out_parent_node_name": true, "parallel_branches_branch_count": true,
	"parallel_branches_error_policy": true, "parallel_branches_parent_node_name": true, "detached": true,
	"detached_child_trace_ids": true, "system": true, "finish_reason": true, "response_model": true,
	"response_id": true, "request_extras": true,
}

// lfUnitIsolation: each fan-out instance's (or branch's) own metadata
// additions reach every observation in its subtree, no sibling's and not
// the trace.
func lfUnitIsolation(branches bool) lfInvariant {
	return perRun(func(le *lfExec, r *lfRun) (bool, string) {
		marker := "fan_out_parent_node_name"
		if branches {
			marker = "parallel_branches_parent_node_name"
		}
		t, _ := mainTrace(r)
		units := 0
		seen := map[string]string{} // entry -> unit
		for _, u := range r.all() {
			um := metaOf(u.Observation)
			if _, ok := um[marker]; !ok {
				continue
			}
			units++
			own := map[string]any{}
			for k, v := range um {
				if _, caller := le.lf.callerMeta[k]; !caller && !oaKeys[k] {
					own[k] = v
				}
			}
			if len(own) == 0 {
				return false, fmt.Sprintf("unit %s carries no addition of its own", u.Name())
			}
			for k, v := range own {
				e := k + "=" + formatValue(v)
				if prev, dup := seen[e]; dup {
					return false, fmt.Sprintf("units %s and %s both carry %s", prev, u.Name(), e)
				}
				seen[e] = u.Name()
				if t != nil {
					if _, leaked := traceMeta(t)[k]; leaked {
						return false, "trace metadata carries the unit addition " + k
					}
				}
			}
			var bad string
			langfusetest.Walk(u.Children, func(o *langfusetest.Observation) {
				if ok, why := hasEntries(metaOf(o), own); !ok && bad == "" {
					bad = o.Name() + ": " + why
				}
			})
			if bad != "" {
				return false, bad
			}
		}
		return units > 1, fmt.Sprintf("%d unit observations", units)
	})
}

var lfBranchNameIsolation = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	branches := 0
	for _, u := range r.all() {
		um := metaOf(u.Observation)
		if _, ok := um["parallel_branches_parent_node_name"]; !ok {
			continue
		}
		branches++
		name := um["branch_name"]
		if name != u.Name() {
			return false, fmt.Sprintf("branch %s carries branch_name %v", u.Name(), name)
		}
		var bad string
		langfusetest.Walk(u.Children, func(o *langfusetest.Observation) {
			if metaOf(o)["branch_name"] != name && bad == "" {
				bad = fmt.Sprintf("%s under %s carries branch_name %v", o.Name(), u.Name(), metaOf(o)["branch_name"])
			}
		})
		if bad != "" {
			return false, bad
		}
		if u.parent != nil {
			if _, ok := metaOf(u.parent)["branch_name"]; ok {
				return false, "the parallel-branches node carries a branch_name"
			}
		}
	}
	return branches > 1, fmt.Sprintf("%d branch observations", branches)
})

var lfAugmentReachesOpen = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	reads := le.om.reads
	reads.mu.Lock()
	augmented := map[string]map[string]any{}
	for k, v := range reads.augmented {
		augmented[k] = v
	}
	reads.mu.Unlock()
	t, ok := mainTrace(r)
	if !ok || len(augmented) == 0 {
		return false, "no trace or no augmentation"
	}
	for key, entries := range augmented {
		node := key[:strings.LastIndex(key, "#")]
		if ok, why := hasEntries(traceMeta(t), entries); !ok {
			return false, "trace: " + why
		}
		found := false
		for _, o := range r.all() {
			if o.Type == string(langfuse.TypeSpan) && o.Name() == node {
				found = true
				if ok, why := hasEntries(metaOf(o.Observation), entries); !ok {
					return false, node + ": " + why
				}
			}
		}
		if !found {
			return false, "no observation of " + node
		}
	}
	return true, ""
})

var lfSessionIDSupplied = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	return ok && le.lf.sessionID != "" && t.Fields["sessionId"] == le.lf.sessionID,
		fmt.Sprintf("trace sessionId %v, supplied %q", t.Fields["sessionId"], le.lf.sessionID)
})

func lfTraceFieldUnset(field string) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		t, ok := mainTrace(r)
		if !ok {
			return false, "no trace"
		}
		v, set := t.Fields[field]
		return !set, fmt.Sprintf("trace %s = %v", field, v)
	})
}

var lfUserIDPromoted = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	if !ok {
		return false, "no trace"
	}
	uid, _ := t.Fields["userId"].(string)
	return uid != "" && traceMeta(t)["userId"] == uid, fmt.Sprintf("userId %v, metadata.userId %v", t.Fields["userId"], traceMeta(t)["userId"])
})

// --- attribution rows ------------------------------------------------------

func lfImplementationRow(key string) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		t, ok := mainTrace(r)
		if !ok {
			return false, "no trace"
		}
		v, _ := traceMeta(t)[key].(string)
		if key == "implementation_name" && v != langfuse.ImplementationName {
			return false, fmt.Sprintf("%s = %q", key, v)
		}
		return v != "", key + " missing"
	})
}

func lfRowsWithStatePayload(enabled bool) lfInvariant {
	return perRun(func(le *lfExec, r *lfRun) (bool, string) {
		if le.lf.stateDisabled == enabled {
			return false, fmt.Sprintf("the case's disable_state_payload is %t", le.lf.stateDisabled)
		}
		for _, k := range []string{"implementation_name", "implementation_version"} {
			if err := lfImplementationRow(k)(nil, le, trueValue); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
}

var lfRowsMatchOTel = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	t, ok := mainTrace(r)
	if !ok {
		return false, "no trace"
	}
	for _, root := range r.run.roots {
		if root.span.Name != otelobserver.InvocationSpanName {
			continue
		}
		a := spanAttrs(root.span)
		name, version := a[otelobserver.AttrImplementationName], a[otelobserver.AttrImplementationVersion]
		tm := traceMeta(t)
		return name != nil && version != nil && tm["implementation_name"] == name && tm["implementation_version"] == version,
			fmt.Sprintf("trace rows %v/%v, invocation span %v/%v", tm["implementation_name"], tm["implementation_version"], name, version)
	}
	return false, "no invocation span"
})

// --- call observations -----------------------------------------------------

func lfDedicatedType(typ langfuse.ObservationType) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		n, gens := len(r.ofType(typ)), len(r.ofType(langfuse.TypeGeneration))
		return n > 0 && gens == 0, fmt.Sprintf("%d %s and %d generation observations", n, typ, gens)
	})
}

var lfToolIdentity = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	tools := r.ofType(langfuse.TypeTool)
	for _, o := range tools {
		m := metaOf(o.Observation)
		n, _ := m["openarmature_tool_name"].(string)
		id, _ := m["openarmature_tool_call_id"].(string)
		if n == "" || id == "" {
			return false, fmt.Sprintf("tool metadata %s", formatValue(m))
		}
	}
	return len(tools) > 0, "no tool observation"
})

func lfCallPayload(typ langfuse.ObservationType, populated bool) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		obs := r.ofType(typ)
		for _, o := range obs {
			_, in := o.Fields["input"]
			_, out := o.Fields["output"]
			if in != populated || out != populated {
				return false, fmt.Sprintf("%s input %v output %v", typ, o.Fields["input"], o.Fields["output"])
			}
		}
		return len(obs) > 0, "no " + string(typ) + " observation"
	})
}

func lfErrorLevel(typ langfuse.ObservationType) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		obs := r.ofType(typ)
		for _, o := range obs {
			if o.Fields["level"] != langfuse.LevelError {
				return false, fmt.Sprintf("%s level %v", typ, o.Fields["level"])
			}
		}
		return len(obs) > 0, "no " + string(typ) + " observation"
	})
}

// lfErrorFields: every ERROR-level call observation carries error_type
// and error_message metadata.
var lfErrorFields = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	n := 0
	for _, o := range r.all() {
		if o.Type == string(langfuse.TypeSpan) || o.Fields["level"] != langfuse.LevelError {
			continue
		}
		n++
		m := metaOf(o.Observation)
		t, _ := m["error_type"].(string)
		msg, _ := m["error_message"].(string)
		if t == "" || msg == "" {
			return false, fmt.Sprintf("%s metadata %s", o.Name(), formatValue(m))
		}
	}
	return n > 0, "no failed call observation"
})

func lfGenerationCount(n int) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		got := len(r.ofType(langfuse.TypeGeneration))
		return got == n, fmt.Sprintf("%d generation observations", got)
	})
}

func lfGenerationCountValue(m *matcher, le *lfExec, want *Value) error {
	if want.Kind != KindInt {
		return schemaErrorf(want.Pos, "generation_count must be an integer")
	}
	return lfGenerationCount(int(want.Int))(m, le, trueValue)
}

// lfNoTokenObservations: a streamed call is one generation without
// children, and the trace holds nothing else than the node spans and it.
var lfNoTokenObservations = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	for _, o := range r.all() {
		if o.Type != string(langfuse.TypeSpan) && o.Type != string(langfuse.TypeGeneration) {
			return false, "a " + o.Type + " observation"
		}
	}
	for _, g := range gens {
		if len(g.Children) > 0 {
			return false, "the generation has children " + lfNames(g.Children)
		}
	}
	return len(gens) == 1, fmt.Sprintf("%d generations", len(gens))
})

var lfAssembledOutput = perRun(func(le *lfExec, r *lfRun) (bool, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	want := le.assembled()
	if len(gens) != 1 || want == "" {
		return false, fmt.Sprintf("%d generations, assembled response %q", len(gens), want)
	}
	return gens[0].Fields["output"] == want, fmt.Sprintf("output %v, assembled %q", gens[0].Fields["output"], want)
})

func lfFailedGeneration(_ bool) lfInvariant {
	return perRun(func(le *lfExec, r *lfRun) (bool, string) {
		gens := r.ofType(langfuse.TypeGeneration)
		if len(gens) != 1 || le.lf.expectedCat == "" {
			return false, fmt.Sprintf("%d generations, expected category %q", len(gens), le.lf.expectedCat)
		}
		g := gens[0]
		return g.Fields["level"] == langfuse.LevelError && g.Fields["statusMessage"] == le.lf.expectedCat,
			fmt.Sprintf("level %v statusMessage %v", g.Fields["level"], g.Fields["statusMessage"])
	})
}

// lfFailedGenerationResponse: the failed generation carries the usage and
// finish reason, and (payload on) the output.
func lfFailedGenerationResponse(withOutput bool) lfInvariant {
	return perRun(func(le *lfExec, r *lfRun) (bool, string) {
		if err := lfFailedGeneration(true)(nil, le, trueValue); err != nil {
			return false, err.Error()
		}
		g := r.ofType(langfuse.TypeGeneration)[0]
		u, _ := g.Fields["usage"].(map[string]any)
		fr, _ := metaOf(g.Observation)["finish_reason"].(string)
		out, _ := g.Fields["output"].(string)
		return len(u) > 0 && fr != "" && (!withOutput || out != ""),
			fmt.Sprintf("usage %v finish_reason %q output %q", g.Fields["usage"], fr, out)
	})
}

var lfOutputRedacted = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	if len(gens) == 0 {
		return false, "no generation"
	}
	for _, g := range gens {
		if v, ok := g.Fields["output"]; ok {
			return false, fmt.Sprintf("output %v", v)
		}
	}
	return true, ""
})

func lfUsageKeys(present, absent []string) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		gens := r.ofType(langfuse.TypeGeneration)
		if len(gens) == 0 {
			return false, "no generation"
		}
		for _, g := range gens {
			u, _ := g.Fields["usage"].(map[string]any)
			for _, k := range present {
				if _, ok := u[k]; !ok {
					return false, fmt.Sprintf("usage %v lacks %s", u, k)
				}
			}
			for _, k := range absent {
				if _, ok := u[k]; ok {
					return false, fmt.Sprintf("usage %v carries %s", u, k)
				}
			}
		}
		return true, ""
	})
}

// --- nested fan-out parent resolution --------------------------------------

// lineage is an observation's path from the trace root: name and fan-out
// index per level.
func (r *lfRun) lineage(o *langfusetest.Observation) string {
	path := []*langfusetest.Observation{o}
	path = append(path, r.ancestors(o)...)
	slices.Reverse(path)
	var parts []string
	for _, p := range path {
		s := p.Name()
		if i, ok := metaOf(p)["fan_out_index"]; ok {
			if _, unit := metaOf(p)["fan_out_parent_node_name"]; unit {
				s += fmt.Sprintf("[%v]", i)
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "/")
}

var lfNoneDropped = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	// Every fan-out node has one instance observation per item, and each
	// instance subtree holds one generation.
	for _, o := range r.all() {
		m := metaOf(o.Observation)
		n, ok := m["fan_out_item_count"].(int64)
		if !ok {
			continue
		}
		if int64(len(o.Children)) != n {
			return false, fmt.Sprintf("%s has %d instance observations for %d items", r.lineage(o.Observation), len(o.Children), n)
		}
	}
	gens := r.ofType(langfuse.TypeGeneration)
	seen := map[string]bool{}
	for _, g := range gens {
		seen[r.lineage(g.Observation)] = true
	}
	return len(gens) > 0 && len(seen) == len(gens), fmt.Sprintf("%d generations on %d distinct lineages", len(gens), len(seen))
})

var lfOwnLineageParent = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	calling := map[*langfusetest.Observation]int{}
	for _, g := range gens {
		if g.parent == nil || g.parent.Type != string(langfuse.TypeSpan) {
			return false, "a generation without a span parent"
		}
		if _, unit := metaOf(g.parent)["fan_out_parent_node_name"]; unit {
			return false, "a generation under a fan-out instance, not its calling node"
		}
		calling[g.parent]++
		if gi, pi := metaOf(g.Observation)["fan_out_index"], metaOf(g.parent)["fan_out_index"]; gi != pi {
			return false, fmt.Sprintf("generation fan_out_index %v under a node of index %v", gi, pi)
		}
	}
	for p, n := range calling {
		if n != 1 {
			return false, fmt.Sprintf("%s parents %d generations", r.lineage(p), n)
		}
	}
	return len(gens) > 0, "no generation"
})

// lfParentMatchesOTel: the generations' parents have the lineages the
// OTel LLM spans' parents have.
var lfParentMatchesOTel = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	var lf []string
	for _, g := range r.ofType(langfuse.TypeGeneration) {
		if g.parent == nil {
			lf = append(lf, "")
			continue
		}
		lf = append(lf, r.lineage(g.parent))
	}
	var ot []string
	var walk func(path []string, ns []*spanNode)
	walk = func(path []string, ns []*spanNode) {
		for _, n := range ns {
			if n.span.Name == otelobserver.LLMSpanName {
				ot = append(ot, strings.Join(path, "/"))
				continue
			}
			seg := n.span.Name
			a := spanAttrs(n.span)
			if i, ok := a[otelobserver.AttrNodeFanOutIndex]; ok {
				if _, unit := a[otelobserver.AttrFanOutParentNodeName]; unit {
					seg += fmt.Sprintf("[%v]", i)
				}
			}
			p := path
			if n.span.Name != otelobserver.InvocationSpanName {
				p = append(slices.Clone(path), seg)
			}
			walk(p, n.children)
		}
	}
	walk(nil, r.run.roots)
	slices.Sort(lf)
	slices.Sort(ot)
	return len(lf) > 0 && slices.Equal(lf, ot), fmt.Sprintf("Langfuse parents %v, OTel parents %v", lf, ot)
})

// orphanParents returns each generation's parent (failing on a root
// generation).
func orphanParents(r *lfRun) ([]lfObs, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	for _, g := range gens {
		if g.parent == nil {
			return nil, "a generation at the trace root"
		}
	}
	if len(gens) == 0 {
		return nil, "no generation"
	}
	return gens, ""
}

var lfOrphanUnderInstance = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens, why := orphanParents(r)
	if gens == nil {
		return false, why
	}
	for _, g := range gens {
		pm := metaOf(g.parent)
		if _, unit := pm["fan_out_parent_node_name"]; !unit {
			return false, "generation under " + r.lineage(g.parent)
		}
		// The innermost instance: no instance below it.
		inner := true
		langfusetest.Walk(g.parent.Children, func(o *langfusetest.Observation) {
			if _, u := metaOf(o)["fan_out_parent_node_name"]; u {
				inner = false
			}
		})
		if !inner {
			return false, "generation under the outer instance " + r.lineage(g.parent)
		}
	}
	return true, ""
})

var lfOrphanDistinctLineage = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens, why := orphanParents(r)
	if gens == nil {
		return false, why
	}
	seen := map[string]bool{}
	for _, g := range gens {
		l := r.lineage(g.parent)
		if seen[l] {
			return false, "two generations under " + l
		}
		seen[l] = true
	}
	return len(gens) > 1, fmt.Sprintf("%d generations", len(gens))
})

var lfOrphanNotUnderNode = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens, why := orphanParents(r)
	if gens == nil {
		return false, why
	}
	for _, g := range gens {
		if _, node := metaOf(g.parent)["fan_out_item_count"]; node {
			return false, "generation under the fan-out node " + r.lineage(g.parent)
		}
	}
	return true, ""
})

var lfOrphanSibling = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens, why := orphanParents(r)
	if gens == nil {
		return false, why
	}
	for _, g := range gens {
		spans := 0
		for _, c := range g.parent.Children {
			if c.Type == string(langfuse.TypeSpan) {
				spans++
				if len(c.Children) > 0 {
					return false, "the calling node's observation has children " + lfNames(c.Children)
				}
			}
		}
		if spans != 1 {
			return false, fmt.Sprintf("%d sibling span observations under %s", spans, r.lineage(g.parent))
		}
	}
	return true, ""
})
