package conformance

import (
	"fmt"

	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// The lineage-aware augmentation invariants (observability 039, §3.4):
// an augmentation made in a fan-out instance's or branch's context
// reaches the observations on its call-stack path (its own dispatch
// observation, the enclosing instance and serial subgraph observations)
// and nothing shared (fan-out and parallel-branches nodes, the trace) or
// sibling. The augmented keys are the entries the generations carry
// beyond the caller's metadata and the observer's own keys.

func init() {
	for name, inv := range map[string]lfInvariant{
		"outer_dispatch_span_carries_inner_augmentation":     perRun(lfOuterCarries),
		"outer_fan_out_instance_carries_branch_augmentation": perRun(lfOuterCarries),
		"outer_dispatch_spans_isolated":                      perRun(lfOuterIsolated),
		"sibling_outer_instances_isolated":                   perRun(lfOuterIsolated),
		"shared_parent_spans_not_augmented":                  perRun(lfSharedNotAugmented(true)),
		"fan_out_node_shared_parent_not_augmented":           perRun(lfSharedNotAugmented(false)),
		"invocation_span_not_augmented":                      perRun(lfTraceNotAugmented),
		"sibling_branch_isolated_from_probe_augmentation":    perRun(lfSiblingBranchIsolated),
		"serial_subgraph_wrapper_carries_inner_augmentation": perRun(lfWrapperCarries),
		"sibling_fan_out_instances_isolated":                 perRun(lfInstancesIsolated),
	} {
		lfInvariants[name] = inv
	}
}

// augKeys returns the augmented keys of a run.
func augKeys(le *lfExec, r *lfRun) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range r.ofType(langfuse.TypeGeneration) {
		for k := range metaOf(g.Observation) {
			if _, caller := le.lf.callerMeta[k]; caller || oaKeys[k] || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func isUnit(o *langfusetest.Observation) bool {
	_, ok := metaOf(o)["fan_out_parent_node_name"]
	return ok
}

func isShared(o *langfusetest.Observation) bool {
	m := metaOf(o)
	_, fan := m["fan_out_item_count"]
	_, par := m["parallel_branches_branch_count"]
	return fan || par
}

// outerUnits returns the fan-out instance observations no other instance
// encloses.
func outerUnits(r *lfRun) []*langfusetest.Observation {
	var out []*langfusetest.Observation
	for _, o := range r.all() {
		if !isUnit(o.Observation) {
			continue
		}
		outer := true
		for _, a := range r.ancestors(o.Observation) {
			if isUnit(a) {
				outer = false
			}
		}
		if outer {
			out = append(out, o.Observation)
		}
	}
	return out
}

// leafValue returns the value the generations under o carry for key,
// failing when they disagree.
func leafValue(o *langfusetest.Observation, key string) (any, bool, string) {
	var val any
	found := false
	bad := ""
	langfusetest.Walk(o.Children, func(c *langfusetest.Observation) {
		if c.Type != string(langfuse.TypeGeneration) {
			return
		}
		v, ok := metaOf(c)[key]
		if !ok {
			return
		}
		if found && !deepEqual(v, val) && bad == "" {
			bad = fmt.Sprintf("generations under %s carry %s = %v and %v", o.Name(), key, val, v)
		}
		val, found = v, true
	})
	return val, found, bad
}

func lfOuterCarries(le *lfExec, r *lfRun) (bool, string) {
	keys := augKeys(le, r)
	units := outerUnits(r)
	if len(keys) == 0 || len(units) == 0 {
		return false, fmt.Sprintf("%d augmented keys, %d outer instances", len(keys), len(units))
	}
	for _, u := range units {
		for _, k := range keys {
			want, ok, bad := leafValue(u, k)
			if bad != "" {
				return false, bad
			}
			if got := metaOf(u)[k]; !ok || !deepEqual(got, want) {
				return false, fmt.Sprintf("outer instance %v carries %s = %v, its subtree's is %v", metaOf(u)["fan_out_index"], k, got, want)
			}
		}
	}
	return true, ""
}

func lfOuterIsolated(le *lfExec, r *lfRun) (bool, string) {
	keys := augKeys(le, r)
	units := outerUnits(r)
	if len(keys) == 0 || len(units) < 2 {
		return false, fmt.Sprintf("%d augmented keys, %d outer instances", len(keys), len(units))
	}
	for _, k := range keys {
		seen := map[string]bool{}
		for _, u := range units {
			v, ok := metaOf(u)[k]
			if !ok {
				return false, fmt.Sprintf("outer instance %v lacks %s", metaOf(u)["fan_out_index"], k)
			}
			if seen[formatValue(v)] {
				return false, fmt.Sprintf("two outer instances carry %s = %v", k, v)
			}
			seen[formatValue(v)] = true
			// Nothing under the instance carries a sibling's value.
			if _, _, bad := leafValue(u, k); bad != "" {
				return false, bad
			}
		}
	}
	return true, ""
}

func lfSharedNotAugmented(withTrace bool) func(le *lfExec, r *lfRun) (bool, string) {
	return func(le *lfExec, r *lfRun) (bool, string) {
		keys := augKeys(le, r)
		if len(keys) == 0 {
			return false, "no augmented key"
		}
		shared := 0
		for _, o := range r.all() {
			if !isShared(o.Observation) {
				continue
			}
			shared++
			for _, k := range keys {
				if v, ok := metaOf(o.Observation)[k]; ok {
					return false, fmt.Sprintf("shared parent %s carries %s = %v", o.Name(), k, v)
				}
			}
		}
		if withTrace {
			if ok, why := lfTraceNotAugmented(le, r); !ok {
				return false, why
			}
		}
		return shared > 0, "no shared parent observation"
	}
}

func lfTraceNotAugmented(le *lfExec, r *lfRun) (bool, string) {
	keys := augKeys(le, r)
	t, ok := mainTrace(r)
	if !ok || len(keys) == 0 {
		return false, "no trace or no augmented key"
	}
	for _, k := range keys {
		if v, ok := traceMeta(t)[k]; ok {
			return false, fmt.Sprintf("trace metadata carries %s = %v", k, v)
		}
	}
	return true, ""
}

func lfSiblingBranchIsolated(le *lfExec, r *lfRun) (bool, string) {
	keys := augKeys(le, r)
	with, without := 0, 0
	for _, o := range r.all() {
		if _, ok := metaOf(o.Observation)["parallel_branches_parent_node_name"]; !ok {
			continue
		}
		carries := false
		for _, k := range keys {
			if _, ok := metaOf(o.Observation)[k]; ok {
				carries = true
			}
		}
		if carries {
			with++
			continue
		}
		without++
		var bad string
		langfusetest.Walk(o.Children, func(c *langfusetest.Observation) {
			for _, k := range keys {
				if v, ok := metaOf(c)[k]; ok && bad == "" {
					bad = fmt.Sprintf("%s under branch %s carries %s = %v", c.Name(), o.Name(), k, v)
				}
			}
		})
		if bad != "" {
			return false, bad
		}
	}
	return with > 0 && without > 0, fmt.Sprintf("%d augmented and %d plain branches", with, without)
}

// lfWrapperCarries: the serial subgraph observation enclosing the fan-out
// carries the augmentation of its last instance (last writer wins).
func lfWrapperCarries(le *lfExec, r *lfRun) (bool, string) {
	keys := augKeys(le, r)
	n := 0
	for _, o := range r.all() {
		m := metaOf(o.Observation)
		if _, sub := m["subgraph_name"]; !sub || isUnit(o.Observation) {
			continue
		}
		var last *langfusetest.Observation
		var lastIdx int64 = -1
		langfusetest.Walk(o.Children, func(c *langfusetest.Observation) {
			if i, ok := metaOf(c)["fan_out_index"].(int64); ok && isUnit(c) && i > lastIdx {
				last, lastIdx = c, i
			}
		})
		if last == nil {
			continue
		}
		n++
		for _, k := range keys {
			if got, want := m[k], metaOf(last)[k]; want == nil || !deepEqual(got, want) {
				return false, fmt.Sprintf("wrapper %s carries %s = %v, the last instance's is %v", o.Name(), k, got, want)
			}
		}
	}
	return n > 0 && len(keys) > 0, "no serial subgraph wrapper over a fan-out"
}

func lfInstancesIsolated(le *lfExec, r *lfRun) (bool, string) {
	keys := augKeys(le, r)
	units := 0
	perParent := map[*langfusetest.Observation]map[string]bool{}
	for _, o := range r.all() {
		if !isUnit(o.Observation) {
			continue
		}
		units++
		for _, k := range keys {
			v, ok := metaOf(o.Observation)[k]
			want, found, bad := leafValue(o.Observation, k)
			if bad != "" {
				return false, bad
			}
			if !ok || !found || !deepEqual(v, want) {
				return false, fmt.Sprintf("instance %v carries %s = %v, its subtree's is %v", metaOf(o.Observation)["fan_out_index"], k, v, want)
			}
			if perParent[o.parent] == nil {
				perParent[o.parent] = map[string]bool{}
			}
			if perParent[o.parent][formatValue(v)] {
				return false, fmt.Sprintf("sibling instances carry %s = %v", k, v)
			}
			perParent[o.parent][formatValue(v)] = true
		}
	}
	return units > 1 && len(keys) > 0, fmt.Sprintf("%d instances", units)
}
