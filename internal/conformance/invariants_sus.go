package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// The suspension fixtures' invariants (each defined by its fixture's
// .md). They read the runs of the case (outcomes, Result.Suspension,
// the resume targets), the harness body and middleware logs per run, the
// recording observer's per-run events, the checkpoint store snapshots and
// the sessions harness.

// susCheck evaluates a boolean suspension predicate over the runs in
// scope: the outcome and, when false, why.
type susCheck func(env *invEnv) (bool, string)

func susBool(check susCheck) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		if env.run.x == nil {
			return fmt.Errorf("the case has no execution to evaluate against")
		}
		got, why := check(env)
		return compareBool(want, got, why)
	}
}

func registerSuspensionInvariants(r *invariantRegistry) {
	for name, check := range map[string]susCheck{
		"suspend_returns_suspended_outcome":                              suspendReturnsSuspended,
		"resume_merges_signal_payload":                                   resumeMergesPayload,
		"resume_continues_after_suspending_node":                         resumeContinuesAfter,
		"signal_payload_overwrites_field_directly":                       payloadOverwrites,
		"reducer_not_consulted_on_signal_merge":                          reducerNotConsulted,
		"invalid_payload_blocks_resume":                                  invalidPayloadBlocks,
		"error_category_is_resume_payload_invalid":                       payloadInvalidCategory,
		"resume_against_non_suspended_raises_record_invalid":             nonSuspendedRecordInvalid,
		"resume_covers_completed_and_never_existed_cases":                nonSuspendedKindsCovered,
		"subgraph_suspend_propagates_to_outer":                           subgraphSuspendPropagates,
		"resume_re_enters_at_inner_post":                                 resumeReentersInner,
		"after_subgraph_runs_post_resume":                                afterSubgraphRuns,
		"single_instance_suspend_suspends_whole_fan_out":                 singleUnitSuspends(true),
		"single_branch_suspend_suspends_whole_parallel_branches":         singleUnitSuspends(false),
		"siblings_cancelled_under_fail_fast":                             siblingsCancelled,
		"descriptor_carries_fan_out_index":                               descriptorCarriesUnit(true),
		"descriptor_carries_branch_name":                                 descriptorCarriesUnit(false),
		"collect_mode_suspend_rejected_at_runtime":                       collectRejected(true),
		"collect_mode_parallel_branches_suspend_rejected_at_runtime":     collectRejected(false),
		"session_saves_at_suspend_time":                                  sessionSavedAtSuspend,
		"resume_sees_session_state_consistent_with_paused_record":        resumeSessionConsistent,
		"paused_record_persists_via_checkpointer_backend":                pausedRecordInBackend,
		"record_type_distinguishes_suspended_from_checkpointed":          recordTypeDistinct,
		"middleware_pre_next_block_runs_on_suspending_node":              mwPreRuns,
		"middleware_post_next_block_skipped_on_suspending_node":          mwPostSkipped,
		"middleware_suspend_raises_unsupported_context":                  mwSuspendRejected,
		"wrapped_node_does_not_execute_after_middleware_suspend_attempt": wrappedNodeNotRun,
	} {
		r.exact[name] = susBool(check)
	}
	r.exact["suspended_event_carries_descriptor"] = suspendedEventCarriesDescriptor
	// Suspension 011's OTel invariants are registered by
	// registerOTelInvariants.
}

// --- helpers ---------------------------------------------------------------

// suspendedRuns are the runs in scope that ended suspended.
func suspendedRuns(env *invEnv) []*invocationRun {
	var out []*invocationRun
	for _, r := range env.scope() {
		if r.Status == "suspended" {
			out = append(out, r)
		}
	}
	return out
}

// resumesOfSuspended are the resume runs in scope whose target is an
// earlier suspended outcome.
func resumesOfSuspended(env *invEnv) []*invocationRun {
	var out []*invocationRun
	for _, r := range env.scope() {
		if r.Resume != nil && r.Resume.target != nil && r.Resume.target.Status == "suspended" {
			out = append(out, r)
		}
	}
	return out
}

// suspendingBody returns the body of run that suspended (unwound by a
// successful Suspend); there must be exactly one.
func suspendingBody(x *geExec, run *invocationRun) (*bodyRun, string) {
	var found []*bodyRun
	for _, b := range x.sus.bodiesOf(run.Run) {
		if b.Outcome == bodySuspended {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Sprintf("invocation %s: %d node bodies suspended, want 1", run.Name, len(found))
	}
	return found[0], ""
}

// firstBody returns the first body a run executed.
func firstBody(x *geExec, run *invocationRun) *bodyRun {
	bs := x.sus.bodiesOf(run.Run)
	if len(bs) == 0 {
		return nil
	}
	return bs[0]
}

// firstOuterBody returns the first outermost-graph body a run executed.
func firstOuterBody(x *geExec, run *invocationRun) *bodyRun {
	for _, b := range x.sus.bodiesOf(run.Run) {
		if len(b.Namespace) == 1 {
			return b
		}
	}
	return nil
}

// graphAt returns the declared graph that holds the node at namespace
// ns (the outer graph for a one-element namespace); ok is false when a
// level is not a plain subgraph node.
func graphAt(gc *geCase, ns []string) (*geGraph, bool) {
	g := gc.outer
	for _, name := range ns[:len(ns)-1] {
		n := g.node(name)
		if n == nil || n.sub == nil {
			return nil, false
		}
		g = gc.subgraphs[n.sub.name]
	}
	return g, g != nil
}

// successor returns the namespace of the node that runs after the node
// at ns by static edges: its edge target, or, for an edge to END inside a
// subgraph, the successor of the subgraph node. nil means the invocation
// ends; ok is false when a conditional edge (or a composite level) makes
// it not statically known.
func successor(gc *geCase, ns []string) ([]string, bool) {
	g, ok := graphAt(gc, ns)
	if !ok {
		return nil, false
	}
	last := ns[len(ns)-1]
	for _, e := range g.edges {
		if e.from != last {
			continue
		}
		if e.cond != nil {
			return nil, false
		}
		if e.to != "END" {
			return append(slices.Clone(ns[:len(ns)-1]), e.to), true
		}
		if len(ns) == 1 {
			return nil, true
		}
		return successor(gc, ns[:len(ns)-1])
	}
	return nil, false
}

func nsString(ns []string) string { return strings.Join(ns, "/") }

// overlay returns state with the payload's declared fields set.
func overlay(gc *geCase, state any, payload map[string]any) map[string]any {
	out := maps.Clone(asMap(state))
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range payload {
		if gc.outer.field(k) != nil {
			out[k] = normalize(v)
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// mergedView is the outermost state a resume's payload merge produced,
// as observed: the first outer body's input, else the final state.
func mergedView(x *geExec, run *invocationRun) (map[string]any, string) {
	if b := firstOuterBody(x, run); b != nil {
		return b.Pre, "the input of " + b.Node
	}
	return asMap(run.FinalState), "the final state"
}

// compositeEvents returns the recording observer's events of the outer
// composite node during run.
func compositeEvents(x *geExec, run *invocationRun, node string) []*eventRec {
	var out []*eventRec
	for _, e := range x.runNodeEvents(run) {
		if len(e.Namespace) == 1 && e.Namespace[0] == node {
			out = append(out, e)
		}
	}
	return out
}

func phases(evs []*eventRec) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Phase
	}
	return out
}

func hasCategory(err error, cat errcat.Category) bool {
	return err != nil && errcat.Of(err) == cat
}

// --- 001, 002: suspend, resume and the payload merge -----------------------

// suspendReturnsSuspended: every run in which a node body suspended
// returned a suspended outcome (no error, a Suspension with a descriptor,
// the paused state), and there is at least one.
func suspendReturnsSuspended(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range env.scope() {
		b, _ := suspendingBody(x, run)
		if b == nil {
			continue
		}
		n++
		switch {
		case run.Status != "suspended":
			return false, fmt.Sprintf("invocation %s: node %s suspended, the outcome is %s (%v)", run.Name, b.Node, run.Status, run.Err)
		case run.Err != nil || run.Suspension == nil || run.FinalState == nil:
			return false, fmt.Sprintf("invocation %s: suspended outcome without a Suspension and state (err %v)", run.Name, run.Err)
		case run.Suspension.Descriptor.SignalID != b.SuspendDesc.SignalID:
			return false, fmt.Sprintf("invocation %s: outcome descriptor %q, the node suspended with %q", run.Name, run.Suspension.Descriptor.SignalID, b.SuspendDesc.SignalID)
		}
	}
	if n == 0 {
		return false, "no node body suspended"
	}
	return true, ""
}

// resumeMergesPayload: each completed resume started from the paused
// state with the payload overlaid: for a suspension in the outermost
// graph the first resumed outer body sees exactly that overlay; in any
// case every payload field carries the payload's value.
func resumeMergesPayload(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		if run.Status != "completed" {
			continue
		}
		n++
		target := run.Resume.target
		want := overlay(env.run.gc, target.FinalState, run.Resume.payload)
		got, where := mergedView(x, run)
		if len(target.Suspension.Namespace) == 1 && firstOuterBody(x, run) != nil {
			if !deepEqual(want, got) {
				return false, fmt.Sprintf("invocation %s: %s is %s, want the paused state with the payload overlaid %s", run.Name, where, formatValue(got), formatValue(want))
			}
			continue
		}
		for k := range run.Resume.payload {
			if env.run.gc.outer.field(k) != nil && !deepEqual(want[k], got[k]) {
				return false, fmt.Sprintf("invocation %s: %s has %s = %s, want %s", run.Name, where, k, formatValue(got[k]), formatValue(want[k]))
			}
		}
	}
	if n == 0 {
		return false, "no resume of a suspended invocation completed"
	}
	return true, ""
}

// resumeContinuesAfter: a resume does not re-run the suspending node
// (mark_node_completed, the default) and its first body is the node the
// suspending node's edge leads to.
func resumeContinuesAfter(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		target := run.Resume.target
		sb, why := suspendingBody(x, target)
		if sb == nil {
			return false, why
		}
		n++
		for _, b := range x.sus.bodiesOf(run.Run) {
			if slices.Equal(b.Namespace, sb.Namespace) && !target.Suspension.RerunOnResume {
				return false, fmt.Sprintf("invocation %s re-ran the suspending node %s", run.Name, nsString(sb.Namespace))
			}
		}
		next, ok := successor(env.run.gc, sb.Namespace)
		if !ok {
			return false, fmt.Sprintf("the successor of %s is not statically known", nsString(sb.Namespace))
		}
		first := firstBody(x, run)
		switch {
		case next == nil && first != nil:
			return false, fmt.Sprintf("invocation %s ran %s, the suspending node's edge leads to END", run.Name, nsString(first.Namespace))
		case next != nil && first == nil:
			return false, fmt.Sprintf("invocation %s ran no node, want %s", run.Name, nsString(next))
		case next != nil && !slices.Equal(first.Namespace, next):
			return false, fmt.Sprintf("invocation %s resumed at %s, want %s (after %s)", run.Name, nsString(first.Namespace), nsString(next), nsString(sb.Namespace))
		}
	}
	if n == 0 {
		return false, "no resume of a suspended invocation"
	}
	return true, ""
}

// payloadOverwrites: every declared payload field holds exactly the
// payload's value after the merge.
func payloadOverwrites(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		if run.Status != "completed" {
			continue
		}
		got, where := mergedView(x, run)
		for k, v := range run.Resume.payload {
			if env.run.gc.outer.field(k) == nil {
				continue
			}
			n++
			if !deepEqual(normalize(v), got[k]) {
				return false, fmt.Sprintf("invocation %s: %s has %s = %s, the payload %s", run.Name, where, k, formatValue(got[k]), formatValue(normalize(v)))
			}
		}
	}
	if n == 0 {
		return false, "no completed resume carried a declared payload field"
	}
	return true, ""
}

// reducerNotConsulted: a payload field whose state field has a reducer
// other than last_write_wins holds the payload's value after the merge,
// not the reducer's combination of the paused value and the payload.
func reducerNotConsulted(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		if run.Status != "completed" {
			continue
		}
		got, where := mergedView(x, run)
		paused := asMap(run.Resume.target.FinalState)
		for k, v := range run.Resume.payload {
			f := env.run.gc.outer.field(k)
			if f == nil || len(f.reducers) == 0 || f.reducers[0].name == "last_write_wins" {
				continue
			}
			n++
			pv := normalize(v)
			if !deepEqual(pv, got[k]) {
				reduced := ""
				if pl, ok := paused[k].([]any); ok {
					if vl, ok := pv.([]any); ok && deepEqual(append(slices.Clone(pl), vl...), got[k]) {
						reduced = " (the " + f.reducers[0].name + " reducer's result)"
					}
				}
				return false, fmt.Sprintf("invocation %s: %s has %s = %s%s, want the payload %s", run.Name, where, k, formatValue(got[k]), reduced, formatValue(pv))
			}
		}
	}
	if n == 0 {
		return false, "no completed resume carried a payload field with a reducer"
	}
	return true, ""
}

// --- 003, 004: resume failures ---------------------------------------------

// failedResumeRanNothing checks that a failed resume ran no node and
// emitted no event.
func failedResumeRanNothing(x *geExec, run *invocationRun) string {
	if bs := x.sus.bodiesOf(run.Run); len(bs) > 0 {
		return fmt.Sprintf("invocation %s errored but ran node %s", run.Name, nsString(bs[0].Namespace))
	}
	if evs := x.runNodeEvents(run); len(evs) > 0 {
		return fmt.Sprintf("invocation %s errored but emitted %s", run.Name, summarizeEvents(evs))
	}
	if run.Suspension != nil {
		return fmt.Sprintf("invocation %s errored with a Suspension", run.Name)
	}
	return ""
}

// invalidPayloadBlocks: a resume whose payload does not fit the schema
// errors before anything runs.
func invalidPayloadBlocks(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		var se *graph.SuspensionError
		if !errors.As(run.Err, &se) || errcat.Of(run.Err) != errcat.SuspensionResumePayloadInvalid {
			continue
		}
		n++
		if run.Status != "errored" {
			return false, fmt.Sprintf("invocation %s ended %s", run.Name, run.Status)
		}
		if why := failedResumeRanNothing(x, run); why != "" {
			return false, why
		}
	}
	if n == 0 {
		return false, "no resume was rejected for its payload"
	}
	return true, ""
}

// payloadInvalidCategory: every resume of a suspended invocation in scope
// that did not complete failed with suspension_resume_payload_invalid,
// naming a payload field whose value does not fit its type.
func payloadInvalidCategory(env *invEnv) (bool, string) {
	n := 0
	for _, run := range resumesOfSuspended(env) {
		if run.Status == "completed" {
			continue
		}
		n++
		if got := errCategory(run.Err); got != string(errcat.SuspensionResumePayloadInvalid) {
			return false, fmt.Sprintf("invocation %s: category %q (%v)", run.Name, got, run.Err)
		}
		var se *graph.SuspensionError
		if !errors.As(run.Err, &se) {
			return false, fmt.Sprintf("invocation %s: %T is not a *graph.SuspensionError", run.Name, run.Err)
		}
		if _, ok := run.Resume.payload[se.Field]; !ok {
			return false, fmt.Sprintf("invocation %s: the error names field %q, not a payload field", run.Name, se.Field)
		}
	}
	if n == 0 {
		return false, "no resume of a suspended invocation failed"
	}
	return true, ""
}

// nonSuspendedKind classifies a resume whose target is not a suspended
// outcome of the case: "completed" (an invocation of the case that
// completed), "never_existed" (an id no invocation of the case had), or
// "" for a resume of a suspended outcome / other.
func nonSuspendedKind(env *invEnv, run *invocationRun) string {
	if run.Resume == nil {
		return ""
	}
	if t := run.Resume.target; t != nil {
		if t.Status == "completed" {
			return "completed"
		}
		return ""
	}
	for _, other := range env.run.invocations {
		if other != run && other.InvocationID == run.Resume.id && other.Resume == nil {
			if other.Status == "completed" {
				return "completed"
			}
			return ""
		}
	}
	return "never_existed"
}

// nonSuspendedRecordInvalid: every resume against an id without a paused
// record (a completed invocation, a fabricated id) failed with
// suspension_record_invalid before anything ran.
func nonSuspendedRecordInvalid(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range env.scope() {
		if nonSuspendedKind(env, run) == "" {
			continue
		}
		n++
		if run.Status != "errored" || !hasCategory(run.Err, errcat.SuspensionRecordInvalid) {
			return false, fmt.Sprintf("invocation %s: ended %s with category %q (%v)", run.Name, run.Status, errCategory(run.Err), run.Err)
		}
		if why := failedResumeRanNothing(x, run); why != "" {
			return false, why
		}
	}
	if n == 0 {
		return false, "no resume against a non-suspended invocation"
	}
	return true, ""
}

// nonSuspendedKindsCovered (a file-level invariant of 004, merged into
// both cases): every resume against a non-suspended id in the case
// targets a completed invocation or an id that never existed, and fails
// with suspension_record_invalid. Each case covers one of the two kinds;
// the fixture's two cases together cover both.
func nonSuspendedKindsCovered(env *invEnv) (bool, string) {
	var kinds []string
	for _, run := range env.scope() {
		k := nonSuspendedKind(env, run)
		if run.Resume == nil || run.Resume.target != nil && run.Resume.target.Status == "suspended" {
			continue
		}
		if k == "" {
			return false, fmt.Sprintf("invocation %s resumes %q, which is neither completed nor unknown", run.Name, run.Resume.id)
		}
		if !hasCategory(run.Err, errcat.SuspensionRecordInvalid) {
			return false, fmt.Sprintf("invocation %s (%s target): category %q, want suspension_record_invalid", run.Name, k, errCategory(run.Err))
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		return false, "no resume against a completed or never-existed invocation"
	}
	return true, ""
}

// --- 005: suspension inside a subgraph -------------------------------------

// subgraphSuspendPropagates: a node inside a subgraph suspended and the
// whole outer invocation suspended, attributed to the outer subgraph
// node.
func subgraphSuspendPropagates(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range suspendedRuns(env) {
		sb, why := suspendingBody(x, run)
		if sb == nil {
			return false, why
		}
		if len(sb.Namespace) < 2 {
			continue
		}
		n++
		s := run.Suspension
		outer := env.run.gc.outer.node(s.SuspendingNode)
		switch {
		case outer == nil || outer.sub == nil:
			return false, fmt.Sprintf("invocation %s: suspending_node %q is not an outer subgraph node", run.Name, s.SuspendingNode)
		case sb.Namespace[0] != s.SuspendingNode:
			return false, fmt.Sprintf("invocation %s: the suspending body %s is not inside %s", run.Name, nsString(sb.Namespace), s.SuspendingNode)
		case !slices.Equal(s.Namespace, sb.Namespace) || s.NodeName != sb.Node:
			return false, fmt.Sprintf("invocation %s: Suspension names %s (%s), the body that suspended is %s", run.Name, nsString(s.Namespace), s.NodeName, nsString(sb.Namespace))
		}
	}
	if n == 0 {
		return false, "no invocation suspended from inside a subgraph"
	}
	return true, ""
}

// resumeReentersInner: a resume of a suspension inside a subgraph
// re-enters the subgraph at the suspending node's successor there, and
// no node that ran before the suspension runs again.
func resumeReentersInner(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		target := run.Resume.target
		sb, why := suspendingBody(x, target)
		if sb == nil {
			return false, why
		}
		if len(sb.Namespace) < 2 {
			continue
		}
		n++
		next, ok := successor(env.run.gc, sb.Namespace)
		if !ok || len(next) < 2 {
			return false, fmt.Sprintf("the suspending node %s has no static successor inside its subgraph", nsString(sb.Namespace))
		}
		first := firstBody(x, run)
		if first == nil || !slices.Equal(first.Namespace, next) {
			got := "nothing"
			if first != nil {
				got = nsString(first.Namespace)
			}
			return false, fmt.Sprintf("invocation %s resumed at %s, want %s", run.Name, got, nsString(next))
		}
		before := map[string]bool{}
		for _, b := range x.sus.bodiesOf(target.Run) {
			if b.Outcome != bodySuspended || !target.Suspension.RerunOnResume {
				before[nsString(b.Namespace)] = true
			}
		}
		for _, b := range x.sus.bodiesOf(run.Run) {
			if before[nsString(b.Namespace)] {
				return false, fmt.Sprintf("invocation %s re-ran %s, which ran before the suspension", run.Name, nsString(b.Namespace))
			}
		}
	}
	if n == 0 {
		return false, "no resume of a suspension inside a subgraph"
	}
	return true, ""
}

// afterSubgraphRuns: after a resume finishes the subgraph, the outer
// node after the subgraph node runs (after every resumed inner node) and
// the invocation completes.
func afterSubgraphRuns(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		s := run.Resume.target.Suspension
		if len(s.Namespace) < 2 {
			continue
		}
		n++
		if run.Status != "completed" {
			return false, fmt.Sprintf("invocation %s ended %s (%v)", run.Name, run.Status, run.Err)
		}
		next, ok := successor(env.run.gc, []string{s.SuspendingNode})
		if !ok || next == nil {
			return false, fmt.Sprintf("subgraph node %s has no static outer successor", s.SuspendingNode)
		}
		var after *bodyRun
		lastInner := int64(0)
		for _, b := range x.sus.bodiesOf(run.Run) {
			if slices.Equal(b.Namespace, next) && after == nil {
				after = b
			}
			if len(b.Namespace) > 1 && b.Namespace[0] == s.SuspendingNode {
				lastInner = max(lastInner, b.EndSeq)
			}
		}
		switch {
		case after == nil:
			return false, fmt.Sprintf("invocation %s did not run %s", run.Name, nsString(next))
		case lastInner == 0:
			return false, fmt.Sprintf("invocation %s ran no node inside %s", run.Name, s.SuspendingNode)
		case after.Seq < lastInner:
			return false, fmt.Sprintf("invocation %s ran %s before the subgraph finished", run.Name, nsString(next))
		}
	}
	if n == 0 {
		return false, "no resume of a suspension inside a subgraph"
	}
	return true, ""
}

// --- 006-009: fan-out and parallel branches --------------------------------

// unitOf returns a body's fan-out index or branch name (for fanOut true /
// false), or nil.
func unitOf(b *bodyRun, fanOut bool) any {
	if fanOut {
		if b.FanOutIndex != nil {
			return int64(*b.FanOutIndex)
		}
		return nil
	}
	if b.BranchName != nil {
		return *b.BranchName
	}
	return nil
}

// compositeSuspension returns, for a suspended run, the composite outer
// node it is attributed to and the unit body that suspended.
func compositeSuspension(env *invEnv, run *invocationRun, fanOut bool) (*geNode, *bodyRun, string) {
	sb, why := suspendingBody(env.run.x, run)
	if sb == nil {
		return nil, nil, why
	}
	n := env.run.gc.outer.node(run.Suspension.SuspendingNode)
	if n == nil || (fanOut && n.fan == nil) || (!fanOut && n.par == nil) {
		kind := "fan-out"
		if !fanOut {
			kind = "parallel-branches"
		}
		return nil, nil, fmt.Sprintf("invocation %s: suspending_node %q is not a %s node", run.Name, run.Suspension.SuspendingNode, kind)
	}
	if unitOf(sb, fanOut) == nil || sb.Namespace[0] != n.name {
		return nil, nil, fmt.Sprintf("invocation %s: the suspending body %s is not inside a unit of %s", run.Name, nsString(sb.Namespace), n.name)
	}
	return n, sb, ""
}

// singleUnitSuspends: one fan-out instance (parallel branch) suspended
// and the whole composite node suspended: the invocation is suspended
// and attributed to the composite node, which emitted started then
// suspended (never completed).
func singleUnitSuspends(fanOut bool) susCheck {
	return func(env *invEnv) (bool, string) {
		x, n := env.run.x, 0
		for _, run := range suspendedRuns(env) {
			node, _, why := compositeSuspension(env, run, fanOut)
			if node == nil {
				return false, why
			}
			n++
			if ph := phases(compositeEvents(x, run, node.name)); !slices.Equal(ph, []string{"started", "suspended"}) {
				return false, fmt.Sprintf("invocation %s: node %s emitted %v, want [started suspended]", run.Name, node.name, ph)
			}
		}
		if n == 0 {
			return false, "no invocation suspended"
		}
		return true, ""
	}
}

// siblingsCancelled: under fail_fast a unit's suspension cancels its
// siblings: the composite node merged nothing (the suspended state is
// the state the node was dispatched with, so no sibling's output
// applied), never completed, no sibling emitted an event after the node
// suspended, and no sibling body outlived the invocation. (Whether a
// sibling body finished just before the cancellation reached it is a
// race, so bodies that returned are not held against the engine.)
func siblingsCancelled(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range suspendedRuns(env) {
		fanOut := env.run.gc.outer.node(run.Suspension.SuspendingNode) != nil && env.run.gc.outer.node(run.Suspension.SuspendingNode).fan != nil
		node, sb, why := compositeSuspension(env, run, fanOut)
		if node == nil {
			return false, why
		}
		policy := ""
		if fanOut {
			policy = node.fan.errorPolicy
		} else {
			policy = node.par.errorPolicy
		}
		if policy != "" && policy != "fail_fast" {
			return false, fmt.Sprintf("node %s uses error_policy %s", node.name, policy)
		}
		n++
		evs := compositeEvents(x, run, node.name)
		if len(evs) == 0 || evs[0].Phase != "started" {
			return false, fmt.Sprintf("invocation %s: node %s emitted no started event", run.Name, node.name)
		}
		if !deepEqual(evs[0].PreState, run.FinalState) {
			return false, fmt.Sprintf("invocation %s: the suspended state %s differs from %s's input %s: sibling output was merged", run.Name, formatValue(run.FinalState), node.name, formatValue(evs[0].PreState))
		}
		suspendedAt := -1
		all := x.runNodeEvents(run)
		for i, e := range all {
			if len(e.Namespace) == 1 && e.Namespace[0] == node.name {
				if e.Phase == "completed" {
					return false, fmt.Sprintf("invocation %s: node %s completed", run.Name, node.name)
				}
				if e.Phase == "suspended" {
					suspendedAt = i
				}
			}
		}
		if suspendedAt < 0 {
			return false, fmt.Sprintf("invocation %s: node %s emitted no suspended event", run.Name, node.name)
		}
		mine := unitOf(sb, fanOut)
		for _, e := range all[suspendedAt+1:] {
			if len(e.Namespace) > 1 && e.Namespace[0] == node.name {
				return false, fmt.Sprintf("invocation %s: %s %s emitted after %s suspended", run.Name, e.Phase, nsString(e.Namespace), node.name)
			}
		}
		for _, b := range x.sus.bodiesOf(run.Run) {
			u := unitOf(b, fanOut)
			if u == nil || deepEqual(u, mine) || b.Namespace[0] != node.name {
				continue
			}
			if b.EndSeq == 0 {
				return false, fmt.Sprintf("invocation %s: sibling %s (%s) is still running after the invocation returned", run.Name, nsString(b.Namespace), formatValue(u))
			}
		}
	}
	if n == 0 {
		return false, "no invocation suspended in a fan-out or parallel-branches node"
	}
	return true, ""
}

// descriptorCarriesUnit: the outcome's descriptor keeps the metadata
// the unit suspended with and adds fan_out_index (branch_name) naming
// the unit that suspended.
func descriptorCarriesUnit(fanOut bool) susCheck {
	key := "fan_out_index"
	if !fanOut {
		key = "branch_name"
	}
	return func(env *invEnv) (bool, string) {
		n := 0
		for _, run := range suspendedRuns(env) {
			_, sb, why := compositeSuspension(env, run, fanOut)
			if sb == nil {
				return false, why
			}
			n++
			meta := asMap(normalize(run.Suspension.Descriptor.Metadata))
			if got, want := meta[key], unitOf(sb, fanOut); !deepEqual(got, want) {
				return false, fmt.Sprintf("invocation %s: descriptor metadata %s = %s, the suspending unit is %s", run.Name, key, formatValue(got), formatValue(want))
			}
			for k, v := range sb.SuspendDesc.Metadata {
				if !deepEqual(normalize(v), meta[k]) {
					return false, fmt.Sprintf("invocation %s: descriptor metadata lost %s = %s", run.Name, k, formatValue(normalize(v)))
				}
			}
			if run.Suspension.Descriptor.SignalID != sb.SuspendDesc.SignalID {
				return false, fmt.Sprintf("invocation %s: signal_id %q, the unit suspended with %q", run.Name, run.Suspension.Descriptor.SignalID, sb.SuspendDesc.SignalID)
			}
		}
		if n == 0 {
			return false, "no invocation suspended"
		}
		return true, ""
	}
}

// collectRejected: Suspend inside a unit of a collect-mode fan-out
// (parallel-branches) node failed at run time with
// suspension_in_unsupported_context, which the invocation errored with;
// nothing suspended.
func collectRejected(fanOut bool) susCheck {
	return func(env *invEnv) (bool, string) {
		x, n := env.run.x, 0
		for _, run := range env.scope() {
			var rejected *bodyRun
			for _, b := range x.sus.bodiesOf(run.Run) {
				if b.SuspendCalled && unitOf(b, fanOut) != nil {
					rejected = b
					break
				}
			}
			if rejected == nil {
				continue
			}
			n++
			node := env.run.gc.outer.node(rejected.Namespace[0])
			policy := ""
			switch {
			case node != nil && fanOut && node.fan != nil:
				policy = node.fan.errorPolicy
			case node != nil && !fanOut && node.par != nil:
				policy = node.par.errorPolicy
			}
			switch {
			case policy != "collect":
				return false, fmt.Sprintf("the unit of %s that called Suspend is not in a collect-mode node", nsString(rejected.Namespace))
			case !hasCategory(rejected.SuspendErr, errcat.SuspensionInUnsupportedContext):
				return false, fmt.Sprintf("invocation %s: Suspend in %s returned %v, want suspension_in_unsupported_context", run.Name, nsString(rejected.Namespace), rejected.SuspendErr)
			case run.Status != "errored" || !hasCategory(run.Err, errcat.SuspensionInUnsupportedContext):
				return false, fmt.Sprintf("invocation %s ended %s with category %q (%v)", run.Name, run.Status, errCategory(run.Err), run.Err)
			case run.Suspension != nil:
				return false, fmt.Sprintf("invocation %s carries a Suspension", run.Name)
			}
			for _, e := range x.runNodeEvents(run) {
				if e.Phase == "suspended" {
					return false, fmt.Sprintf("invocation %s emitted a suspended event for %s", run.Name, nsString(e.Namespace))
				}
			}
		}
		if n == 0 {
			return false, "no unit called Suspend"
		}
		return true, ""
	}
}

// --- 010: the suspended event ----------------------------------------------

// suspendedEventCarriesDescriptor: every suspended event in the stream
// carries a descriptor; the suspending node's is the one it suspended
// with, and the event of the node the outcome is attributed to carries
// the outcome's descriptor.
func suspendedEventCarriesDescriptor(_ context.Context, env *invEnv, want *Value) error {
	evs, err := env.eventSet()
	if err != nil {
		return err
	}
	x := env.run.x
	var bodies []*bodyRun
	for _, run := range env.scope() {
		bodies = append(bodies, x.sus.bodiesOf(run.Run)...)
	}
	got, why, n := true, "", 0
	for _, e := range evs {
		if e.Phase != "suspended" {
			continue
		}
		n++
		if e.Descriptor == nil {
			got, why = false, fmt.Sprintf("the suspended event of %s has no descriptor", nsString(e.Namespace))
			break
		}
		for _, b := range bodies {
			if b.Outcome == bodySuspended && b.InvocationID == e.InvocationID && slices.Equal(b.Namespace, e.Namespace) {
				if w := descriptorView(b.SuspendDesc); !deepEqual(w, e.Descriptor) {
					got, why = false, fmt.Sprintf("the suspended event of %s carries %s, the node suspended with %s", nsString(e.Namespace), formatValue(e.Descriptor), formatValue(w))
				}
			}
		}
		for _, run := range env.scope() {
			if s := run.Suspension; s != nil && run.InvocationID == e.InvocationID && slices.Equal(s.Namespace, e.Namespace) {
				if w := descriptorView(s.Descriptor); !deepEqual(w, e.Descriptor) {
					got, why = false, fmt.Sprintf("the suspended event of %s carries %s, the outcome %s", nsString(e.Namespace), formatValue(e.Descriptor), formatValue(w))
				}
			}
		}
	}
	if n == 0 {
		got, why = false, "no suspended event in "+env.source
	}
	return compareBool(want, got, why)
}

// --- 012: sessions ---------------------------------------------------------

// sessionView restricts a state to the session projection.
func sessionView(gc *geCase, state map[string]any) map[string]any {
	out := map[string]any{}
	for _, f := range projection(gc) {
		if v, ok := state[f]; ok {
			out[f] = v
		}
	}
	return out
}

// sessionSavedAtSuspend: a session-bound invocation that suspended
// saved its session, and the stored record holds the suspended state.
func sessionSavedAtSuspend(env *invEnv) (bool, string) {
	gc, n := env.run.gc, 0
	if gc.sess == nil || !gc.sess.hasStore {
		return false, "the case has no session_store"
	}
	for _, run := range suspendedRuns(env) {
		r := run.Sess
		if r == nil || r.SessionID == "" {
			continue
		}
		n++
		wrote := false
		for _, w := range r.writes() {
			wrote = wrote || (w.SessionID == r.SessionID && w.Err == nil)
		}
		if !wrote || r.Post == nil {
			return false, fmt.Sprintf("invocation %s suspended without saving session %q (%s)", run.Name, r.SessionID, describeCalls(r.Calls))
		}
		stored, err := decodeRecord(r.Post)
		if err != nil {
			return false, err.Error()
		}
		if want := sessionView(gc, asMap(run.FinalState)); !deepEqual(want, sessionView(gc, stored)) {
			return false, fmt.Sprintf("invocation %s: the stored session %s is not the suspended state %s", run.Name, formatValue(stored), formatValue(want))
		}
	}
	if n == 0 {
		return false, "no session-bound invocation suspended"
	}
	return true, ""
}

// resumeSessionConsistent: a session-bound resume found the session
// record the suspension saved (equal to the paused state), continued from
// the paused state with the payload, stayed bound to the session and
// saved its final state to it.
func resumeSessionConsistent(env *invEnv) (bool, string) {
	gc, x, n := env.run.gc, env.run.x, 0
	for _, run := range resumesOfSuspended(env) {
		r, target := run.Sess, run.Resume.target
		if r == nil || target.Sess == nil || target.Sess.SessionID == "" {
			continue
		}
		n++
		if r.SessionID != target.Sess.SessionID {
			return false, fmt.Sprintf("invocation %s declares session %q, the suspended one was bound to %q", run.Name, r.SessionID, target.Sess.SessionID)
		}
		paused := asMap(target.FinalState)
		if r.Pre == nil {
			return false, fmt.Sprintf("invocation %s: no session record at resume", run.Name)
		}
		stored, err := decodeRecord(r.Pre)
		if err != nil {
			return false, err.Error()
		}
		if !deepEqual(sessionView(gc, paused), sessionView(gc, stored)) {
			return false, fmt.Sprintf("invocation %s: the session record at resume %s differs from the paused state %s", run.Name, formatValue(stored), formatValue(paused))
		}
		if b := firstOuterBody(x, run); b != nil && len(target.Suspension.Namespace) == 1 {
			if want := overlay(gc, paused, run.Resume.payload); !deepEqual(want, b.Pre) {
				return false, fmt.Sprintf("invocation %s: %s started from %s, want the paused state %s", run.Name, b.Node, formatValue(b.Pre), formatValue(want))
			}
		}
		if run.Status != "completed" || r.Post == nil {
			return false, fmt.Sprintf("invocation %s ended %s without a session record", run.Name, run.Status)
		}
		final, err := decodeRecord(r.Post)
		if err != nil {
			return false, err.Error()
		}
		if want := sessionView(gc, asMap(run.FinalState)); !deepEqual(want, sessionView(gc, final)) {
			return false, fmt.Sprintf("invocation %s: the session after resume %s is not the final state %s", run.Name, formatValue(final), formatValue(want))
		}
	}
	if n == 0 {
		return false, "no session-bound resume"
	}
	return true, ""
}

// --- 013: the checkpointer backend -----------------------------------------

// pausedRecordInBackend: each suspension wrote its paused record to the
// configured checkpoint store (under the invocation id, with the awaited
// signal id), and each completed resume of it consumed that record.
func pausedRecordInBackend(env *invEnv) (bool, string) {
	n := 0
	for _, run := range suspendedRuns(env) {
		n++
		snap := run.CP
		if snap == nil || snap.Suspended == nil {
			return false, fmt.Sprintf("invocation %s: no paused record in the configured store", run.Name)
		}
		if rec := snap.Suspended; rec.InvocationID != run.InvocationID || rec.SignalID != run.Suspension.Descriptor.SignalID {
			return false, fmt.Sprintf("invocation %s: the paused record is for %q awaiting %q", run.Name, rec.InvocationID, rec.SignalID)
		}
		for _, res := range env.run.invocations {
			if res.Resume == nil || res.Resume.target != run || res.Status != "completed" {
				continue
			}
			if res.CP == nil || res.CP.Suspended != nil {
				return false, fmt.Sprintf("invocation %s completed the resume but the paused record is still in the store", res.Name)
			}
		}
	}
	if n == 0 {
		return false, "no invocation suspended"
	}
	return true, ""
}

// recordTypeDistinct: the paused record is stored with kind "suspended",
// and no checkpoint record exists under the invocation id.
func recordTypeDistinct(env *invEnv) (bool, string) {
	n := 0
	for _, run := range suspendedRuns(env) {
		n++
		snap := run.CP
		switch {
		case snap == nil || snap.Suspended == nil:
			return false, fmt.Sprintf("invocation %s: no paused record in the configured store", run.Name)
		case snap.Suspended.Kind != "suspended":
			return false, fmt.Sprintf("invocation %s: the paused record has kind %q", run.Name, snap.Suspended.Kind)
		case snap.Checkpoint != nil:
			return false, fmt.Sprintf("invocation %s: a checkpoint record also exists under the id", run.Name)
		}
	}
	if n == 0 {
		return false, "no invocation suspended"
	}
	return true, ""
}

// --- 014, 015: middleware --------------------------------------------------

// wrapsOf returns the wrap_with_middleware entries of the node declared
// at ns.
func wrapsOf(gc *geCase, ns []string) []*mwSpec {
	g, ok := graphAt(gc, ns)
	if !ok {
		return nil
	}
	if n := g.node(ns[len(ns)-1]); n != nil {
		return n.wrap
	}
	return nil
}

// mwPreRuns: the pre-next() block of every middleware wrapping the
// suspending node ran on the suspending attempt, before the body.
func mwPreRuns(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range suspendedRuns(env) {
		sb, why := suspendingBody(x, run)
		if sb == nil {
			return false, why
		}
		for _, m := range wrapsOf(env.run.gc, sb.Namespace) {
			if !m.hasPre {
				continue
			}
			n++
			found := false
			for _, r := range x.sus.mwOf(run.Run) {
				if r.Kind == "pre" && r.Middleware == m.name && r.Node == sb.Node && r.Marker == m.preLog && r.Seq < sb.Seq {
					found = true
				}
			}
			if !found {
				return false, fmt.Sprintf("invocation %s: %s's pre-next marker %q was not logged before %s ran", run.Name, m.name, m.preLog, sb.Node)
			}
		}
	}
	if n == 0 {
		return false, "no suspending node is wrapped by a middleware with a pre-next block"
	}
	return true, ""
}

// mwPostSkipped: no post-next() block of a middleware wrapping the
// suspending node ran on the suspending attempt.
func mwPostSkipped(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range suspendedRuns(env) {
		sb, why := suspendingBody(x, run)
		if sb == nil {
			return false, why
		}
		for _, m := range wrapsOf(env.run.gc, sb.Namespace) {
			if !m.hasPost {
				continue
			}
			n++
			for _, r := range x.sus.mwOf(run.Run) {
				if r.Kind == "post" && r.Middleware == m.name && r.Node == sb.Node {
					return false, fmt.Sprintf("invocation %s: %s's post-next block ran (%q)", run.Name, m.name, r.Marker)
				}
			}
		}
	}
	if n == 0 {
		return false, "no suspending node is wrapped by a middleware with a post-next block"
	}
	return true, ""
}

// mwSuspendRejected: Suspend called from middleware failed with
// suspension_in_unsupported_context, and the invocation errored with it
// (nothing suspended).
func mwSuspendRejected(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range env.scope() {
		for _, r := range x.sus.mwOf(run.Run) {
			if r.Kind != "suspend" {
				continue
			}
			n++
			switch {
			case !hasCategory(r.Err, errcat.SuspensionInUnsupportedContext):
				return false, fmt.Sprintf("invocation %s: Suspend from %s returned %v", run.Name, r.Middleware, r.Err)
			case run.Status != "errored" || !hasCategory(run.Err, errcat.SuspensionInUnsupportedContext):
				return false, fmt.Sprintf("invocation %s ended %s with category %q (%v)", run.Name, run.Status, errCategory(run.Err), run.Err)
			case run.Suspension != nil:
				return false, fmt.Sprintf("invocation %s carries a Suspension", run.Name)
			}
		}
	}
	if n == 0 {
		return false, "no middleware called Suspend"
	}
	return true, ""
}

// wrappedNodeNotRun: after a middleware's Suspend attempt the wrapped
// node's body did not run, and the state at the error is the state the
// middleware received (none of the node's update applied).
func wrappedNodeNotRun(env *invEnv) (bool, string) {
	x, n := env.run.x, 0
	for _, run := range env.scope() {
		for _, r := range x.sus.mwOf(run.Run) {
			if r.Kind != "suspend" {
				continue
			}
			n++
			for _, b := range x.sus.bodiesOf(run.Run) {
				if b.Node == r.Node {
					return false, fmt.Sprintf("invocation %s ran the body of %s", run.Name, r.Node)
				}
			}
			if !deepEqual(r.StateIn, run.FinalState) {
				return false, fmt.Sprintf("invocation %s: the state at the error %s differs from %s's input %s", run.Name, formatValue(run.FinalState), r.Node, formatValue(r.StateIn))
			}
		}
	}
	if n == 0 {
		return false, "no middleware called Suspend"
	}
	return true, ""
}
