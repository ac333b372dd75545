package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/codes"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// observabilitySuite runs the observability fixtures (spec/observability):
// the graph part of a case is built by the graph-engine runner, an
// otelobserver.Observer on a private TracerProvider with an in-memory
// exporter is attached to the outermost graph (otel.go), and the case's
// invocations run with the caller's correlation id, if any. The span
// forest of each invocation is compared with span_tree and read by the
// observability invariants.
type observabilitySuite struct {
	invariants *invariantRegistry
}

func newObservabilitySuite() *observabilitySuite {
	return &observabilitySuite{invariants: newInvariantRegistry()}
}

// obsRun is one invocation of an observability case.
type obsRun struct {
	*invocationRun
	roots []*spanNode
}

// RunCase parses, runs and asserts one observability case.
func (s *observabilitySuite) RunCase(ctx context.Context, c *Case) error {
	if direct, err := runDirectCall(c); direct {
		return err
	}
	oc, err := parseObsCase(c, s.invariants)
	if err != nil {
		return err
	}
	gc := oc.gc
	if gc.compileOnly || len(gc.invocations) != 1 || gc.compileError != nil || gc.compileWarn != nil {
		return notImplemented(capObs + " case shape (compile-only or invocations list)")
	}
	gc.implicitOTel = true
	for _, g := range append([]*geGraph{gc.outer}, sortedGraphs(gc.subgraphs)...) {
		absorbUntargetedNodes(g)
	}
	x := newGeExec(ctx, gc)
	defer x.close()
	lr, err := oc.llm.setup(x)
	defer lr.close()
	if err != nil {
		return err
	}
	if err := x.obsOTel(oc.meta); err != nil {
		return err
	}
	oc.lf.prepare(x)
	if err := x.build(); err != nil {
		return fmt.Errorf("compilation failed: %w", err)
	}
	if err := x.attachObservers(); err != nil {
		return err
	}
	if err := lr.attach(x); err != nil {
		return err
	}
	le, err := oc.lf.setup(x, oc.meta, lr)
	defer le.close()
	if err != nil {
		return err
	}
	if err := x.prepareSessions(); err != nil {
		return err
	}
	inv := gc.invocations[0]
	initial := map[string]any{}
	if inv.initial != nil && !inv.initial.IsNull() {
		n, ok := inv.initial.Native().(map[string]any)
		if !ok {
			return schemaErrorf(inv.initial.Pos, "initial_state must be a mapping")
		}
		initial = n
	}
	if oc.meta.rejects != nil {
		return oc.meta.rejection(ctx, x, initial)
	}
	if oc.lf.resumes() {
		return le.runResume(ctx, x, initial, oc.correlationID)
	}
	m := newMatcher()
	var runs []*obsRun
	for i := range oc.runs {
		init := initial
		if i < len(oc.meta.runInitial) {
			init = map[string]any{}
			if v := oc.meta.runInitial[i]; v != nil && !v.IsNull() {
				init = v.Native().(map[string]any)
			}
		}
		run, err := x.obsInvoke(ctx, fmt.Sprintf("invocation %d", i), init, oc.correlationID,
			append(oc.meta.invokeOptions(i), oc.lf.invokeOptions(i)...)...)
		if err != nil {
			return err
		}
		runs = append(runs, run)
		lrun, err := le.collect(run)
		if err != nil {
			return err
		}
		if err := errors.Join(oc.assertRun(m, x, inv, run), lr.assert(m, run), oc.assertEvents(ctx, x, run), le.assertRun(m, lrun)); err != nil {
			if oc.runs > 1 {
				return fmt.Errorf("invocation %d: %w", i, err)
			}
			return err
		}
	}
	return errors.Join(oc.assertCase(m, x, runs), le.assertCase(m))
}

// assertEvents evaluates the observer_event_invariants over the events
// the case's observers received in run.
func (oc *obsCase) assertEvents(ctx context.Context, x *geExec, run *obsRun) error {
	if len(oc.eventInvariants) == 0 {
		return nil
	}
	cr := &caseRun{rec: x.rec, observers: observerInfos(x.gc.observers), pu: x.pu, gc: x.gc, ss: x.ss, compiled: true, x: x,
		invocations: []*invocationRun{run.invocationRun}}
	env := &invEnv{run: cr, inv: run.invocationRun}
	x.setDefaultEvents(env)
	return evaluateInvariants(ctx, env, oc.eventInvariants)
}

// obsInvoke runs one invocation and drains its events.
func (x *geExec) obsInvoke(ctx context.Context, name string, initial map[string]any, correlationID string, opts ...graph.InvokeOption) (*obsRun, error) {
	if correlationID != "" {
		opts = append(opts, graph.WithCorrelationID(correlationID))
	}
	runIdx := x.sus.nextRun()
	ctx = withRunIndex(ctx, runIdx)
	from := x.otel.mark()
	res, err := x.outer.Invoke(ctx, graph.Update(initial), opts...)
	if res == nil {
		return nil, fmt.Errorf("invoke returned no result: %w", err)
	}
	if _, err := x.outer.Drain(ctx); err != nil {
		return nil, fmt.Errorf("draining %s: %w", name, err)
	}
	run := &invocationRun{
		Name: name, InvocationID: res.InvocationID, Status: res.Status.String(), Err: res.Err,
		FinalState: normalize(res.State), Path: x.executed(runTagOf(res.InvocationID, runIdx), res.Path),
		Initial: initial, Run: runIdx, Suspension: res.Suspension,
	}
	run.otel = x.otel.since(from)
	return &obsRun{invocationRun: run, roots: run.otel.forest(implicitOTel)}, nil
}

// assertRun checks one invocation: its outcome against expected_error
// (or success when there is none) and its span forest against span_tree.
func (oc *obsCase) assertRun(m *matcher, x *geExec, inv *geInvocation, run *obsRun) error {
	var errs []error
	// Without expected_error the outcome is asserted by the span tree
	// (the invocation span's status): 003 and 004 fail on purpose.
	if ee := inv.expect.expectedError; ee != nil {
		errs = append(errs, checkExpectedError(m, ee, run.invocationRun))
	}
	if oc.spanTree != nil {
		errs = append(errs, matchSpanList(m, "span_tree", oc.spanTree, run.roots))
	}
	if oc.noEdgeSpans != nil {
		errs = append(errs, checkNoEdgeSpans(x.gc, oc.noEdgeSpans, run))
	}
	errs = append(errs, oc.meta.assertRun(m, x, run))
	return errors.Join(errs...)
}

// assertCase checks what spans all invocations: invocation_count and the
// invariants.
func (oc *obsCase) assertCase(m *matcher, _ *geExec, runs []*obsRun) error {
	errs := []error{oc.meta.assertCase(runs)}
	if oc.invCount != nil && int(oc.invCount.Int) != len(runs) {
		errs = append(errs, fmt.Errorf("invocation_count: want %d, got %d", oc.invCount.Int, len(runs)))
	}
	for _, f := range oc.invariants {
		if ok, err := oc.meta.checkInvariant(f.Key, f.Value, runs); ok {
			if err != nil {
				errs = append(errs, fmt.Errorf("invariant %s: %w", f.Key, err))
			}
			continue
		}
		if err := obsInvariants[f.Key](m, runs, f.Value); err != nil {
			errs = append(errs, fmt.Errorf("invariant %s: %w", f.Key, err))
		}
	}
	return errors.Join(errs...)
}

// checkNoEdgeSpans: every span is the invocation span or a declared
// node's (an edge function has no span of its own, §4.2).
func checkNoEdgeSpans(gc *geCase, want *Value, run *obsRun) error {
	names := map[string]bool{otelobserver.InvocationSpanName: true}
	for _, g := range append([]*geGraph{gc.outer}, sortedGraphs(gc.subgraphs)...) {
		for _, n := range g.nodes {
			names[n.name] = true
		}
	}
	var stray []string
	for _, s := range run.otel.allSpans() {
		if !names[s.Name] {
			stray = append(stray, s.Name)
		}
	}
	return compareBool(want, len(stray) == 0, fmt.Sprintf("spans of no node: %v", stray))
}

// absorbUntargetedNodes drops the nodes of g that are not its entry and
// that no edge leads to, with their outgoing edges. Fixture mismatch
// absorption: observability 004 declares unreachable_b, which nothing
// routes to, and graph-engine §2 rejects a graph with an unreachable node
// (unreachable_node) at compile time; the node can never run, so dropping
// it leaves the invocation and its spans unchanged.
func absorbUntargetedNodes(g *geGraph) {
	targeted := map[string]bool{g.entry: true}
	for _, e := range g.edges {
		targeted[e.to] = true
		if e.cond != nil {
			targeted[e.cond.then], targeted[e.cond.els] = true, true
		}
	}
	g.nodes = slices.DeleteFunc(g.nodes, func(n *geNode) bool { return !targeted[n.name] })
	g.edges = slices.DeleteFunc(g.edges, func(e *geEdge) bool { return !targeted[e.from] })
}

// --- invariants ------------------------------------------------------------

// obsInvariant checks one named invariant (defined by its fixture's .md)
// over the case's invocations.
type obsInvariant func(m *matcher, runs []*obsRun, want *Value) error

// obsInvariants are the observability invariants the suite implements;
// any other name makes the case not implemented.
var obsInvariants = map[string]obsInvariant{
	"correlation_id_consistency":                invCorrelationUniform,
	"each_invocation_correlation_id_uniform":    invCorrelationUniform,
	"correlation_id_uniform_across_tree":        invCorrelationValue,
	"correlation_id_is_uuidv4":                  invCorrelationUUID,
	"all_correlation_ids_uuidv4":                invCorrelationUUID,
	"correlation_ids_differ_across_invocations": invCorrelationsDiffer,
	"unique_fan_out_indices_under":              invUniqueFanOutIndices,
	"fan_out_index_range":                       invFanOutIndexRange,
	"sibling_attempt_count_under_invocation":    invSiblingAttemptCount,
	"attempt_indices":                           invAttemptIndices,
	"all_attempt_spans_error":                   invAllAttemptsError,
}

// runCorrelation returns the correlation id every span of run carries,
// or an error naming a span without it or with another one.
func runCorrelation(run *obsRun) (string, error) {
	spans := run.otel.allSpans()
	if len(spans) == 0 {
		return "", fmt.Errorf("%s emitted no spans", run.Name)
	}
	var id string
	for i, s := range spans {
		got, ok := spanAttrs(s)[otelobserver.AttrCorrelationID].(string)
		if !ok || got == "" {
			return "", fmt.Errorf("span %s has no %s", s.Name, otelobserver.AttrCorrelationID)
		}
		if i == 0 {
			id = got
		} else if got != id {
			return "", fmt.Errorf("span %s: %s %q, want %q", s.Name, otelobserver.AttrCorrelationID, got, id)
		}
	}
	return id, nil
}

func invCorrelationUniform(_ *matcher, runs []*obsRun, want *Value) error {
	for _, r := range runs {
		if _, err := runCorrelation(r); err != nil {
			return compareBool(want, false, err.Error())
		}
	}
	return compareBool(want, true, "")
}

func invCorrelationValue(m *matcher, runs []*obsRun, want *Value) error {
	if want.Kind != KindString {
		return schemaErrorf(want.Pos, "want a correlation id (or <uuid>)")
	}
	for _, r := range runs {
		id, err := runCorrelation(r)
		if err != nil {
			return err
		}
		if err := m.match("correlation_id", want.Str, id, exact); err != nil {
			return err
		}
	}
	return nil
}

func invCorrelationUUID(_ *matcher, runs []*obsRun, want *Value) error {
	for _, r := range runs {
		id, err := runCorrelation(r)
		if err != nil {
			return compareBool(want, false, err.Error())
		}
		if !uuidV4Re.MatchString(id) {
			return compareBool(want, false, fmt.Sprintf("%s: correlation id %q is not a UUIDv4", r.Name, id))
		}
	}
	return compareBool(want, true, "")
}

func invCorrelationsDiffer(_ *matcher, runs []*obsRun, want *Value) error {
	if len(runs) < 2 {
		return fmt.Errorf("needs at least two invocations, got %d", len(runs))
	}
	seen := map[string]string{}
	for _, r := range runs {
		id, err := runCorrelation(r)
		if err != nil {
			return err
		}
		if prev, dup := seen[id]; dup {
			return compareBool(want, false, fmt.Sprintf("%s and %s share correlation id %q", prev, r.Name, id))
		}
		seen[id] = r.Name
	}
	return compareBool(want, true, "")
}

// fanOutInstances returns the fan-out instance spans of the fan-out node
// named name in every run: its span's children carrying a fan_out_index.
func fanOutInstances(runs []*obsRun, name string) ([][]int64, error) {
	var out [][]int64
	for _, r := range runs {
		var node *spanNode
		walkSpans(r.roots, func(n *spanNode) {
			if node == nil && n.span.Name == name {
				if _, ok := spanAttrs(n.span)[otelobserver.AttrFanOutItemCount]; ok {
					node = n
				}
			}
		})
		if node == nil {
			return nil, fmt.Errorf("%s: no fan-out node span %s", r.Name, name)
		}
		var idx []int64
		for _, c := range node.children {
			if i, ok := spanAttrs(c.span)[otelobserver.AttrNodeFanOutIndex].(int64); ok && c.span.Name == name {
				idx = append(idx, i)
			}
		}
		out = append(out, idx)
	}
	return out, nil
}

func walkSpans(ns []*spanNode, f func(*spanNode)) {
	for _, n := range ns {
		f(n)
		walkSpans(n.children, f)
	}
}

func invUniqueFanOutIndices(_ *matcher, runs []*obsRun, want *Value) error {
	name, err := str(want, "unique_fan_out_indices_under")
	if err != nil {
		return err
	}
	all, err := fanOutInstances(runs, name)
	if err != nil {
		return err
	}
	for _, idx := range all {
		if len(idx) == 0 {
			return fmt.Errorf("fan-out %s has no instance spans", name)
		}
		sorted := slices.Clone(idx)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(idx) {
			return fmt.Errorf("fan-out %s instance indices %v are not unique", name, idx)
		}
	}
	return nil
}

// invFanOutIndexRange: [lo, hi] — under each fan-out node span, the
// instance spans' indices are exactly lo..hi (per parent span: nested
// fan-outs repeat the indices, 132).
func invFanOutIndexRange(_ *matcher, runs []*obsRun, want *Value) error {
	if want.Kind != KindList || len(want.Items) != 2 || want.Items[0].Kind != KindInt || want.Items[1].Kind != KindInt {
		return schemaErrorf(want.Pos, "fan_out_index_range must be [low, high]")
	}
	lo, hi := want.Items[0].Int, want.Items[1].Int
	var wantIdx []int64
	for i := lo; i <= hi; i++ {
		wantIdx = append(wantIdx, i)
	}
	for _, r := range runs {
		groups := 0
		var err error
		walkSpans(r.roots, func(n *spanNode) {
			var got []int64
			for _, c := range n.children {
				a := spanAttrs(c.span)
				if _, ok := a[otelobserver.AttrFanOutParentNodeName]; !ok {
					continue
				}
				if i, ok := a[otelobserver.AttrNodeFanOutIndex].(int64); ok {
					got = append(got, i)
				}
			}
			if len(got) == 0 {
				return
			}
			groups++
			slices.Sort(got)
			if !slices.Equal(got, wantIdx) && err == nil {
				err = fmt.Errorf("%s: instance indices %v under %s, want %d..%d", r.Name, got, n.span.Name, lo, hi)
			}
		})
		if err != nil {
			return err
		}
		if groups == 0 {
			return fmt.Errorf("%s: no fan-out instance spans", r.Name)
		}
	}
	return nil
}

// attemptSiblings returns the children of each run's invocation span:
// the attempt spans of a retried outermost node.
func attemptSiblings(runs []*obsRun) ([][]*spanNode, error) {
	var out [][]*spanNode
	for _, r := range runs {
		if len(r.roots) != 1 || r.roots[0].span.Name != otelobserver.InvocationSpanName {
			return nil, fmt.Errorf("%s: want one invocation root span, got %s", r.Name, spanNames(r.roots))
		}
		kids := r.roots[0].children
		for _, k := range kids {
			if k.span.Name != kids[0].span.Name {
				return nil, fmt.Errorf("%s: the invocation's children are not one node's attempts: %s", r.Name, spanNames(kids))
			}
		}
		out = append(out, kids)
	}
	return out, nil
}

func invSiblingAttemptCount(_ *matcher, runs []*obsRun, want *Value) error {
	if want.Kind != KindInt {
		return schemaErrorf(want.Pos, "sibling_attempt_count_under_invocation must be an integer")
	}
	all, err := attemptSiblings(runs)
	if err != nil {
		return err
	}
	for _, kids := range all {
		if int64(len(kids)) != want.Int {
			return fmt.Errorf("want %d attempt spans under the invocation, got %d %s", want.Int, len(kids), spanNames(kids))
		}
	}
	return nil
}

func invAttemptIndices(m *matcher, runs []*obsRun, want *Value) error {
	all, err := attemptSiblings(runs)
	if err != nil {
		return err
	}
	for _, kids := range all {
		var got []any
		for _, k := range kids {
			got = append(got, spanAttrs(k.span)[otelobserver.AttrNodeAttemptIndex])
		}
		if err := m.match("attempt_indices", want.Native(), got, exact); err != nil {
			return err
		}
	}
	return nil
}

func invAllAttemptsError(_ *matcher, runs []*obsRun, want *Value) error {
	all, err := attemptSiblings(runs)
	if err != nil {
		return err
	}
	for _, kids := range all {
		if len(kids) == 0 {
			return compareBool(want, false, "no attempt spans")
		}
		for _, k := range kids {
			if k.span.Status.Code != codes.Error {
				return compareBool(want, false, fmt.Sprintf("attempt %v is %s", spanAttrs(k.span)[otelobserver.AttrNodeAttemptIndex], statusName(k.span.Status.Code)))
			}
		}
	}
	return compareBool(want, true, "")
}
