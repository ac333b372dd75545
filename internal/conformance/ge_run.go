package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// graphEngineSuite runs the graph-engine fixtures against package graph.
// The pipeline-utilities suite is the same runner with the harness's
// recording observer attached (its expectations read the outermost
// graph's full event stream without declaring an observer).
type graphEngineSuite struct {
	invariants *invariantRegistry
	pipeline   bool
}

func newGraphEngineSuite() *graphEngineSuite {
	return &graphEngineSuite{invariants: newInvariantRegistry()}
}

func newPipelineUtilitiesSuite() *graphEngineSuite {
	return &graphEngineSuite{invariants: newInvariantRegistry(), pipeline: true}
}

// newSessionsSuite runs the sessions fixtures: the graph-engine runner,
// whose sessions vocabulary (ss_*.go) registers the harness store on the
// outermost graph and binds invocations to their session ids.
func newSessionsSuite() *graphEngineSuite {
	return &graphEngineSuite{invariants: newInvariantRegistry()}
}

// newSuspensionSuite runs the suspension fixtures: the graph-engine
// runner with the suspension vocabulary (sus_*.go) and the recording
// observer on the outermost graph, whose events the suspension
// invariants read per run.
func newSuspensionSuite() *graphEngineSuite {
	return &graphEngineSuite{invariants: newInvariantRegistry(), pipeline: true}
}

// RunCase parses, builds, runs and asserts one graph-engine case. A case
// with run_count N is executed N times from scratch; every run must pass
// and all runs must agree on final state and execution order
// (graph-engine §5).
func (s *graphEngineSuite) RunCase(ctx context.Context, c *Case) error {
	p := &geParser{invariants: s.invariants}
	gc, err := p.parseCase(c)
	if err != nil {
		return err
	}
	gc.pipeline = s.pipeline
	if gc.ckpt != nil {
		return runCheckpointCase(ctx, gc)
	}
	var first []*invocationRun
	for i := 1; i <= gc.runCount; i++ {
		runs, err := runGraphCase(ctx, gc)
		if err != nil {
			if gc.runCount > 1 {
				return fmt.Errorf("run %d of %d: %w", i, gc.runCount, err)
			}
			return err
		}
		if first == nil {
			first = runs
			continue
		}
		for j := range runs {
			a, b := first[j], runs[j]
			if !deepEqual(a.FinalState, b.FinalState) {
				return fmt.Errorf("run %d final state %s differs from run 1's %s", i, formatValue(b.FinalState), formatValue(a.FinalState))
			}
			if !deepEqual(stringsToAny(a.Path), stringsToAny(b.Path)) {
				return fmt.Errorf("run %d execution order %v differs from run 1's %v", i, b.Path, a.Path)
			}
		}
	}
	return nil
}

// runGraphCase executes the case once: compile, check compile-time
// expectations, run each invocation with its assertions, then the case
// invariants.
func runGraphCase(ctx context.Context, gc *geCase) ([]*invocationRun, error) {
	x := newGeExec(ctx, gc)
	defer x.close()
	err := x.build()
	var ce *compileError
	if err != nil && !errors.As(err, &ce) {
		return nil, err
	}
	if ee := gc.registrationError(); ee != nil {
		return nil, x.checkRegistration(ctx, ee, ce)
	}
	if gc.compileError != nil {
		return nil, checkCompileError(gc.compileError, err)
	}
	if err != nil {
		return nil, fmt.Errorf("compilation failed: %w", err)
	}
	if gc.compileWarn != nil {
		if err := checkCompileWarnings(gc.compileWarn, x.warnings); err != nil {
			return nil, err
		}
	}
	if gc.compileOnly {
		return nil, nil
	}
	if err := x.attachObservers(); err != nil {
		return nil, err
	}
	if gc.pipeline {
		if _, err := x.outer.AddObserver(x.pu.record); err != nil {
			return nil, fmt.Errorf("registering the recording observer: %w", err)
		}
	}
	if err := x.prepareSessions(); err != nil {
		return nil, err
	}
	m := newMatcher()
	cr := &caseRun{rec: x.rec, observers: observerInfos(gc.observers), pu: x.pu, gc: gc, ss: x.ss, compiled: true, x: x}
	cr.reinvoke = func(ctx context.Context, initial map[string]any) (*invocationRun, error) {
		return x.invoke(ctx, "re-invocation", initial, nil, "")
	}
	for _, inv := range gc.invocations {
		initial := map[string]any{}
		if inv.initial != nil && !inv.initial.IsNull() {
			n, ok := inv.initial.Native().(map[string]any)
			if !ok {
				return nil, schemaErrorf(inv.initial.Pos, "initial_state must be a mapping")
			}
			initial = n
		}
		var run *invocationRun
		var err error
		if inv.resume != nil {
			rc, rerr := x.resumeCall(inv.resume, gc.invocations, cr.invocations)
			if rerr != nil {
				return nil, fmt.Errorf("invocation %s: %w", inv.name, rerr)
			}
			run, err = x.execute(ctx, inv.name, nil, inv.drain, inv.sessionID, rc)
		} else {
			run, err = x.invoke(ctx, inv.name, initial, inv.drain, inv.sessionID)
		}
		if err != nil {
			return nil, err
		}
		cr.invocations = append(cr.invocations, run)
		if err := x.assertInvocation(ctx, m, cr, inv, run); err != nil {
			if gc.single {
				return nil, err
			}
			return nil, fmt.Errorf("invocation %s: %w", inv.name, err)
		}
	}
	env := &invEnv{run: cr}
	if gc.single && len(cr.invocations) > 0 {
		env.inv = cr.invocations[0]
	}
	x.setDefaultEvents(env)
	if err := evaluateInvariants(ctx, env, gc.invariants); err != nil {
		return nil, err
	}
	return cr.invocations, nil
}

// setDefaultEvents points event predicates at the default observer's
// events for the invariant's scope.
func (x *geExec) setDefaultEvents(env *invEnv) {
	name, ok := env.run.defaultObserver()
	if !ok {
		return
	}
	if env.inv != nil {
		env.events, env.hasEvents = x.observed(name, env.inv), true
	} else {
		env.events, env.hasEvents = x.rec.events(name, ""), true
	}
	env.source = fmt.Sprintf("observer %s", name)
}

// invoke runs one invocation, then the invocation's drain directive (if
// any), then an unconditional full drain so observer assertions see every
// delivered event.
func (x *geExec) invoke(ctx context.Context, name string, initial map[string]any, drain *geDrain, sessionID string) (*invocationRun, error) {
	return x.execute(ctx, name, initial, drain, sessionID, nil)
}

// execute runs one invocation — an Invoke, or a Resume when rc is set —
// tagging its context with a fresh run index (see runTag).
func (x *geExec) execute(ctx context.Context, name string, initial map[string]any, drain *geDrain, sessionID string, rc *resumeCall) (*invocationRun, error) {
	var opts []graph.InvokeOption
	for _, o := range x.gc.observers {
		if o.attach == "invocation" {
			opts = append(opts, graph.WithObserver(x.observerFns[o.name], x.observerOptions(o)...))
		}
	}
	// A resume keeps the paused record's session; ids given to Resume
	// are ignored.
	if sessionID != "" && rc == nil {
		opts = append(opts, graph.WithSessionID(sessionID))
	}
	var sr *ssRun
	if x.gc.sess != nil {
		sr = x.ss.begin(sessionID)
	}
	runIdx := x.sus.nextRun()
	ctx = withRunIndex(ctx, runIdx)
	delivFrom, puFrom := x.rec.deliveredTotal(), x.pu.eventCount()
	otelFrom := x.otel.mark()
	var res *graph.Result
	var err error
	if rc != nil {
		res, err = x.outer.Resume(ctx, rc.id, graph.Update(rc.payload), opts...)
	} else {
		res, err = x.outer.Invoke(ctx, graph.Update(initial), opts...)
	}
	if sr != nil && res != nil {
		x.ss.end(sr, res.InvocationID)
	}
	if res == nil {
		return nil, fmt.Errorf("invoke returned no result: %w", err)
	}
	if err != nil && !errors.Is(err, res.Err) {
		return nil, fmt.Errorf("invoke returned error %v but result error %v", err, res.Err)
	}
	run := &invocationRun{
		Name:         name,
		InvocationID: res.InvocationID,
		Status:       res.Status.String(),
		Err:          res.Err,
		FinalState:   normalize(res.State),
		Path:         x.executed(runTagOf(res.InvocationID, runIdx), res.Path),
		Initial:      initial,
		Sess:         sr,
		Run:          runIdx,
		Suspension:   res.Suspension,
		Resume:       rc,
		delivFrom:    delivFrom,
		puFrom:       puFrom,
	}
	x.sus.afterRun(ctx, run)
	if drain != nil {
		var dopts []graph.DrainOption
		if drain.hasTimeout {
			dopts = append(dopts, graph.DrainTimeout(drain.timeout))
		}
		start := time.Now()
		sum, derr := x.outer.Drain(ctx, dopts...)
		run.Drain = &drainRec{
			HasTimeout: drain.hasTimeout, Timeout: drain.timeout, Elapsed: time.Since(start),
			Undelivered: sum.Undelivered, TimeoutReached: sum.TimeoutReached, Err: derr,
			DeliveredAtReturn: x.rec.deliveredCount(res.InvocationID),
		}
	}
	if _, err := x.outer.Drain(ctx); err != nil {
		run.FullDrainErr = err
		return nil, fmt.Errorf("draining invocation %s: %w", name, err)
	}
	run.delivTo, run.puTo = x.rec.deliveredTotal(), x.pu.eventCount()
	run.otel = x.otel.since(otelFrom)
	return run, nil
}

// executed filters an invocation's dispatch path down to the nodes that
// executed (fixture execution_order): composite nodes (subgraph, fan-out,
// parallel branches) and nodes whose body ran. A node short-circuited by
// its middleware was dispatched but never executed (pipeline-utilities
// 004). The filter is per node name, not per dispatch: no fixture both
// runs and short-circuits one node within an invocation.
func (x *geExec) executed(tag string, path []string) []string {
	out := make([]string, 0, len(path))
	for _, name := range path {
		n := x.gc.outer.node(name)
		if n == nil || n.composite() || x.pu.ran(tag, name) {
			out = append(out, name)
		}
	}
	return out
}

// assertInvocation checks one invocation's expected block, collecting
// every failure.
func (x *geExec) assertInvocation(ctx context.Context, m *matcher, cr *caseRun, inv *geInvocation, run *invocationRun) error {
	e := inv.expect
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	expectsError := e.expectedError != nil || e.errorCategory != nil ||
		(e.outcome != nil && e.outcome.Str != "completed")
	if !expectsError && run.Status != "completed" {
		fail(fmt.Errorf("invocation ended %s: %v", run.Status, run.Err))
	}
	if e.outcome != nil && run.Status != e.outcome.Str {
		fail(fmt.Errorf("outcome: want %s, got %s (%v)", e.outcome.Str, run.Status, run.Err))
	}
	if e.errorCategory != nil {
		fail(checkErrorCategory(m, e.errorCategory, run.Err))
	}
	if e.expectedError != nil {
		fail(checkExpectedError(m, e.expectedError, run))
	}
	if e.finalState != nil {
		fail(x.matchFinalState(m, "final_state", e.finalState, run.FinalState))
	}
	fail(x.assertPipeline(m, e, run))
	if e.executionOrder != nil {
		fail(m.match("execution_order", e.executionOrder.Native(), stringsToAny(run.Path), exact))
	}
	for _, f := range e.observerEvents {
		fail(matchEvents(m, "observer_events."+f.Key, f.Value, x.observed(f.Key, run)))
	}
	if e.deliveryOrder != nil {
		var got []any
		for _, d := range x.rec.deliveryLog(run.InvocationID) {
			got = append(got, map[string]any{"observer": d.Observer, "step": int64(d.Event.Step), "phase": d.Event.Phase})
		}
		fail(m.match("delivery_order", e.deliveryOrder.Native(), got, exact))
	}
	if e.drainSummary != nil {
		if run.Drain == nil {
			fail(fmt.Errorf("drain_summary: the invocation has no drain directive"))
		} else {
			fail(checkDrainSummary("drain_summary", e.drainSummary, run.Drain))
		}
	}
	nodeDrains := x.rec.nodeDrainsFor(run.InvocationID)
	for _, f := range e.nodeDrainSummaries {
		nd, ok := nodeDrains[f.Key]
		if !ok {
			fail(fmt.Errorf("node_drain_summaries.%s: node %s never drained", f.Key, f.Key))
			continue
		}
		fail(checkDrainSummary("node_drain_summaries."+f.Key, f.Value, &nd.drainRec))
	}
	for _, nf := range e.nodeSnapshots {
		nd, ok := nodeDrains[nf.Key]
		if !ok {
			fail(fmt.Errorf("node_accumulator_snapshots.%s: node %s never drained", nf.Key, nf.Key))
			continue
		}
		for _, of := range nf.Value.Fields {
			path := "node_accumulator_snapshots." + nf.Key + "." + of.Key
			if nd.Observer != of.Key {
				fail(fmt.Errorf("%s: node %s snapshotted observer %s", path, nf.Key, nd.Observer))
				continue
			}
			fail(matchEvents(m, path, of.Value, nd.Snapshot))
		}
	}
	for _, si := range e.nodeSnapshotInvariants {
		nd, ok := nodeDrains[si.node]
		if !ok || nd.Observer != si.observer {
			fail(fmt.Errorf("node_accumulator_snapshot_invariants.%s.%s: node %s took no snapshot of %s", si.node, si.observer, si.node, si.observer))
			continue
		}
		env := &invEnv{run: cr, inv: run, events: nd.Snapshot, hasEvents: true,
			source: fmt.Sprintf("the %s snapshot taken in node %s", si.observer, si.node)}
		fail(evaluateInvariants(ctx, env, si.uses))
	}
	for _, f := range e.finalAccumulator {
		fail(matchEvents(m, "final_accumulator_state."+f.Key, f.Value, x.observed(f.Key, run)))
	}
	if e.noPropagatedError != nil {
		got := run.Err == nil && run.Status == "completed"
		if got != e.noPropagatedError.Bool {
			fail(fmt.Errorf("no_propagated_error: want %t, got %t (%v)", e.noPropagatedError.Bool, got, run.Err))
		}
	}
	if e.emptyPhases != nil {
		fail(x.checkEmptyPhases(e.emptyPhases.Bool))
	}
	fail(x.assertSessions(m, e, inv, run))
	fail(x.assertSuspension(m, e, run))
	fail(x.assertOTel(m, e, run))
	if len(e.invariants) > 0 || len(inv.invariants) > 0 || len(e.observerInvariants) > 0 {
		env := &invEnv{run: cr, inv: run}
		x.setDefaultEvents(env)
		fail(evaluateInvariants(ctx, env, e.invariants))
		fail(evaluateInvariants(ctx, env, inv.invariants))
		fail(evaluateInvariants(ctx, env, e.observerInvariants))
	}
	return errors.Join(errs...)
}

// checkEmptyPhases registers an observer with an empty phase set, which
// must be rejected at registration (graph-engine 018).
func (x *geExec) checkEmptyPhases(want bool) error {
	remove, err := x.outer.AddObserver(func(context.Context, graph.Event) error { return nil }, graph.Phases())
	if remove != nil {
		remove()
	}
	if got := err != nil; got != want {
		return fmt.Errorf("empty_phases_raises_at_registration: want %t, got %t", want, got)
	}
	return nil
}

// matchEvents compares an exact-length, exact-order event list; each
// expected event is a subset of the actual event's fields (absent keys
// are not checked).
func matchEvents(m *matcher, path string, want *Value, got []*eventRec) error {
	if len(want.Items) != len(got) {
		return fmt.Errorf("%s: want %d events, got %d: %s", path, len(want.Items), len(got), summarizeEvents(got))
	}
	for i, we := range want.Items {
		if err := matchEvent(m, fmt.Sprintf("%s[%d]", path, i), we, got[i]); err != nil {
			return err
		}
	}
	return nil
}

func matchEvent(m *matcher, path string, want *Value, got *eventRec) error {
	view := got.view()
	for _, f := range want.Fields {
		fp := joinPath(path, f.Key)
		if f.Key == "error" {
			if err := matchEventError(m, fp, f.Value, got); err != nil {
				return err
			}
			continue
		}
		gv, ok := view[f.Key]
		if !ok {
			return fmt.Errorf("%s: absent on the %s event of %s (want %s)", fp, got.Phase, got.NodeName, f.Value.String())
		}
		if err := m.match(fp, f.Value.Native(), gv, exact); err != nil {
			return err
		}
	}
	return nil
}

// matchEventError handles an expected event's error: a category scalar or
// {category, message}. A failed event must not carry post_state (§6:
// exactly one of post_state and error).
func matchEventError(m *matcher, path string, want *Value, got *eventRec) error {
	if want.IsNull() {
		if got.HasError {
			return fmt.Errorf("%s: want no error, got %s", path, got.ErrCategory)
		}
		return nil
	}
	if !got.HasError {
		return fmt.Errorf("%s: want %s, the event has no error", path, want.String())
	}
	if got.HasPostState {
		return fmt.Errorf("%s: the failed event also carries post_state", path)
	}
	if want.Kind == KindString {
		return m.match(path, want.Str, got.ErrCategory, exact)
	}
	return m.match(path, want.Native(), map[string]any{"category": got.ErrCategory, "message": got.ErrMessage}, subsetTop)
}

func summarizeEvents(evs []*eventRec) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("%d:%s:%s", e.Step, strings.Join(e.Namespace, "/"), e.Phase)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func checkDrainSummary(path string, want *Value, got *drainRec) error {
	if got.Err != nil {
		return fmt.Errorf("%s: drain failed: %w", path, got.Err)
	}
	for _, f := range want.Fields {
		switch f.Key {
		case "timeout_reached":
			if f.Value.Kind != KindBool || f.Value.Bool != got.TimeoutReached {
				return fmt.Errorf("%s.timeout_reached: want %s, got %t (undelivered %d, elapsed %v)", path, f.Value.String(), got.TimeoutReached, got.Undelivered, got.Elapsed)
			}
		case "undelivered_count":
			if f.Value.Kind != KindInt || int(f.Value.Int) != got.Undelivered {
				return fmt.Errorf("%s.undelivered_count: want %s, got %d", path, f.Value.String(), got.Undelivered)
			}
		case "undelivered_count_min":
			if f.Value.Kind != KindInt || got.Undelivered < int(f.Value.Int) {
				return fmt.Errorf("%s.undelivered_count_min: want at least %s, got %d", path, f.Value.String(), got.Undelivered)
			}
		}
	}
	return nil
}

func checkCompileError(want *Value, err error) error {
	cat, e := str(want, "expected_compile_error")
	if e != nil {
		return e
	}
	if err == nil {
		return fmt.Errorf("expected_compile_error: want %s, compilation succeeded", cat)
	}
	if got := errcat.Of(err); string(got) != cat {
		return fmt.Errorf("expected_compile_error: want %s, got %q (%v)", cat, got, err)
	}
	return nil
}

// checkCompileWarnings: a scalar asserts presence; a list the exhaustive,
// order-insensitive set (conformance-adapter §5.8).
func checkCompileWarnings(want *Value, warnings []graph.Warning) error {
	var got []any
	for _, w := range warnings {
		got = append(got, string(w.Category))
	}
	switch want.Kind {
	case KindString:
		for _, g := range got {
			if g == want.Str {
				return nil
			}
		}
		return fmt.Errorf("expected_compile_warning: %s not among %s", want.Str, formatValue(got))
	case KindList:
		w, err := strList(want, "expected_compile_warning")
		if err != nil {
			return err
		}
		if !sameSet(stringsToAny(w), got) {
			return fmt.Errorf("expected_compile_warning: want exactly %s, got %s", formatValue(stringsToAny(w)), formatValue(got))
		}
		return nil
	}
	return schemaErrorf(want.Pos, "expected_compile_warning must be a category or a list of categories")
}

func checkErrorCategory(m *matcher, want *Value, err error) error {
	if err == nil {
		return fmt.Errorf("error: want %s, the invocation did not fail", want.String())
	}
	got := map[string]any{"category": string(errcat.Of(err)), "message": innermostMessage(err)}
	if want.Kind == KindString {
		return m.match("error.category", want.Str, got["category"], exact)
	}
	return m.match("error", want.Native(), got, subsetTop)
}

func checkExpectedError(m *matcher, want *geErrorExpect, run *invocationRun) error {
	err := run.Err
	if err == nil {
		return fmt.Errorf("expected_error: the invocation completed with final state %s", formatValue(run.FinalState))
	}
	if want.category != nil {
		if got := string(errcat.Of(err)); !scalarEqual(want.category.Native(), got) {
			return fmt.Errorf("expected_error.category: want %s, got %q (%v)", want.category.String(), got, err)
		}
	}
	if want.raisedFrom != nil {
		var ne *graph.NodeError
		if !errors.As(err, &ne) {
			return fmt.Errorf("expected_error.raised_from: the error is not attributed to a node: %v", err)
		}
		w := want.raisedFrom.Native()
		ok := scalarEqual(w, ne.Node) || (len(ne.Namespace) > 0 && scalarEqual(w, ne.Namespace[0]))
		if !ok {
			return fmt.Errorf("expected_error.raised_from: want %s, got node %q (namespace %v)", want.raisedFrom.String(), ne.Node, ne.Namespace)
		}
	}
	if want.message != nil {
		if e := m.match("expected_error.message", want.message.Native(), innermostMessage(err), exact); e != nil {
			return e
		}
	}
	if want.recoverableState != nil {
		if e := m.match("expected_error.recoverable_state", want.recoverableState.Native(), run.FinalState, exact); e != nil {
			return e
		}
	}
	if want.executionOrder != nil {
		if e := m.match("expected_error.execution_order", want.executionOrder.Native(), stringsToAny(run.Path), exact); e != nil {
			return e
		}
	}
	if want.carries != nil {
		if e := checkCarries(m, want.carries, err, run); e != nil {
			return e
		}
	}
	if want.cause != nil {
		if e := checkCause(want.cause, err); e != nil {
			return e
		}
	}
	return nil
}

// checkCarries implements conformance-adapter §5.13: bare field names
// assert equality (subset for mappings), _present asserts presence and
// _mentions a substring. The fields an error exposes are the exported
// fields of every error in its chain (snake_cased, outermost first) plus
// category, message and recoverable_state.
func checkCarries(m *matcher, carries *Value, err error, run *invocationRun) error {
	fields := errorFields(err)
	fields["recoverable_state"] = run.FinalState
	for _, f := range carries.Fields {
		path := "expected_error.carries." + f.Key
		name, flavor := f.Key, ""
		for _, suffix := range []string{"_present", "_mentions"} {
			if strings.HasSuffix(f.Key, suffix) {
				name, flavor = strings.TrimSuffix(f.Key, suffix), suffix
			}
		}
		got, exposed := fields[name]
		switch flavor {
		case "_present":
			if f.Value.Kind != KindBool {
				return schemaErrorf(f.Value.Pos, "%s must be a bool", f.Key)
			}
			present := exposed && got != nil
			if present != f.Value.Bool {
				return fmt.Errorf("%s: want present=%t, got %t", path, f.Value.Bool, present)
			}
			continue
		case "_mentions":
			if !exposed {
				return fmt.Errorf("%s: the error exposes no field %q (it exposes %s)", path, name, strings.Join(sortedKeys(fields), ", "))
			}
			sub, e := str(f.Value, f.Key)
			if e != nil {
				return e
			}
			if !strings.Contains(fmt.Sprint(got), sub) {
				return fmt.Errorf("%s: %s does not mention %q", path, formatValue(got), sub)
			}
			continue
		}
		if !exposed {
			return fmt.Errorf("%s: the error exposes no field %q (it exposes %s)", path, name, strings.Join(sortedKeys(fields), ", "))
		}
		if e := m.match(path, f.Value.Native(), got, subsetDeep); e != nil {
			return e
		}
	}
	return nil
}

// errorFields collects the fields a raised error exposes.
func errorFields(err error) map[string]any {
	out := map[string]any{
		"category": string(errcat.Of(err)),
		"message":  innermostMessage(err),
	}
	errorType := reflect.TypeFor[error]()
	for cur := err; cur != nil; cur = errors.Unwrap(cur) {
		for _, a := range errorAccessors {
			if v, ok := a.get(cur); ok {
				if _, seen := out[a.name]; !seen {
					out[a.name] = normalize(v)
				}
			}
		}
		rv := reflect.ValueOf(cur)
		for rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		if rv.Kind() != reflect.Struct {
			continue
		}
		rt := rv.Type()
		for i := 0; i < rt.NumField(); i++ {
			sf := rt.Field(i)
			if !sf.IsExported() || sf.Type.Implements(errorType) {
				continue
			}
			key := snakeCase(sf.Name)
			if _, seen := out[key]; !seen {
				out[key] = normalize(rv.Field(i).Interface())
			}
		}
	}
	return out
}

// errorAccessors expose the spec fields an error provides through
// methods rather than struct fields: migrate.Error's from_version /
// to_version / registered_migrations_count / registry_description
// (pipeline-utilities §10.10, sessions §10).
var errorAccessors = []struct {
	name string
	get  func(error) (any, bool)
}{
	{"from_version", func(e error) (any, bool) {
		a, ok := e.(interface{ FromVersion() string })
		if !ok {
			return nil, false
		}
		return a.FromVersion(), true
	}},
	{"to_version", func(e error) (any, bool) {
		a, ok := e.(interface{ ToVersion() string })
		if !ok {
			return nil, false
		}
		return a.ToVersion(), true
	}},
	{"registered_migrations_count", func(e error) (any, bool) {
		a, ok := e.(interface{ RegisteredMigrationsCount() int })
		if !ok {
			return nil, false
		}
		return a.RegisteredMigrationsCount(), true
	}},
	{"registry_description", func(e error) (any, bool) {
		a, ok := e.(interface{ RegistryDescription() string })
		if !ok {
			return nil, false
		}
		return a.RegistryDescription(), true
	}},
}

// snakeCase converts a Go field name ("ParentStates", "FromVersion",
// "ID") to the spec's field spelling ("parent_states", "from_version",
// "id").
func snakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
