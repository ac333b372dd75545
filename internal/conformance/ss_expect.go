package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/armature-go/armature/session"
)

// registrationError returns the expected_error of a case whose failure
// is expected at registration (raised_at: registration, sessions 009).
func (gc *geCase) registrationError() *geErrorExpect {
	if !gc.single || len(gc.invocations) != 1 {
		return nil
	}
	if ee := gc.invocations[0].expect.expectedError; ee != nil && ee.raisedAt == "registration" {
		return ee
	}
	return nil
}

// checkRegistration asserts a failure at registration: compilation must
// have failed with the expected error (category, carries, ...), and no
// invocation runs; the case invariants are then evaluated.
func (x *geExec) checkRegistration(ctx context.Context, want *geErrorExpect, ce *compileError) error {
	if ce == nil {
		return fmt.Errorf("expected_error (raised_at: registration): want %s at compile time, compilation succeeded", want.category.String())
	}
	run := &invocationRun{Name: "registration", Status: "errored", Err: ce.err}
	if err := checkExpectedError(newMatcher(), want, run); err != nil {
		return err
	}
	cr := &caseRun{rec: x.rec, observers: observerInfos(x.gc.observers), pu: x.pu, gc: x.gc, ss: x.ss, x: x}
	env := &invEnv{run: cr}
	x.setDefaultEvents(env)
	return evaluateInvariants(ctx, env, x.gc.invariants)
}

// prepareSessions attaches the harness observers to every compiled
// subgraph and seeds the store (sessions cases only).
func (x *geExec) prepareSessions() error {
	if x.gc.sess == nil {
		return nil
	}
	for _, name := range sortedKeys(x.graphs) {
		if _, err := x.graphs[name].AddObserver(x.ss.observer(name)); err != nil {
			return fmt.Errorf("registering the session observer on %s: %w", name, err)
		}
	}
	return x.ss.seed(x.gc)
}

// assertSessions checks an invocation's sessions expectations.
func (x *geExec) assertSessions(m *matcher, e *geExpect, inv *geInvocation, run *invocationRun) error {
	se := e.ss
	if se == nil {
		return nil
	}
	r := run.Sess
	if r == nil {
		return fmt.Errorf("sessions expectations: the invocation recorded no session activity")
	}
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if se.expectedFinal != nil {
		fail(x.matchFinalState(m, "expected_final_state", se.expectedFinal, run.FinalState))
	}
	if se.loaded != nil {
		fail(checkLoaded(m, se.loaded, r))
	}
	for _, lf := range se.loadedInvoke {
		path := loadedInvokePrefix + lf.Key
		b := x.ss.entry(run.InvocationID)
		if b == nil {
			fail(fmt.Errorf("%s: no node body ran, so the invoke state at entry was not observed", path))
			continue
		}
		got, ok := b.Pre[lf.Key]
		if !ok {
			fail(fmt.Errorf("%s: the entry state of %s has no field %s", path, b.Node, lf.Key))
			continue
		}
		fail(m.match(path, lf.Value.Native(), got, exact))
	}
	if se.saved != nil {
		fail(checkSaved(m, se.saved, r))
	}
	if se.storeAfter != nil {
		fail(x.checkStoreAfter(m, se.storeAfter))
	}
	if se.noLoad != nil {
		n := len(r.loads())
		fail(expectFlag("no_session_load", se.noLoad, n == 0, describeCalls(r.Calls)))
	}
	if se.noSave != nil {
		n := len(r.writes())
		fail(expectFlag("no_session_save", se.noSave, n == 0, describeCalls(r.Calls)))
	}
	if se.untouched != nil {
		got := len(r.Calls) == 0 && sameSummaries(r.ListBefore, r.ListAfter)
		fail(expectFlag("store_untouched", se.untouched, got,
			fmt.Sprintf("calls %s, records before %d, after %d", describeCalls(r.Calls), len(r.ListBefore), len(r.ListAfter))))
	}
	if se.noAutoSave != nil {
		got := true
		for _, w := range r.writes() {
			if !w.InNode {
				got = false
			}
		}
		fail(expectFlag("no_auto_save_on_end", se.noAutoSave, got, describeCalls(r.Calls)))
	}
	if se.innerPre != nil {
		fail(x.checkInnerPre(m, se.innerPre, run))
	}
	if se.instancePres != nil {
		fail(x.checkInstancePres(m, se.instancePres, run))
	}
	if se.migrationsRun != nil {
		var got []any
		for _, mc := range r.Migrations {
			got = append(got, mc.Name)
		}
		fail(m.match("migrations_run", se.migrationsRun.Native(), append([]any{}, got...), exact))
	}
	return errors.Join(errs...)
}

func expectFlag(name string, want *Value, got bool, detail string) error {
	if want.Bool != got {
		return fmt.Errorf("%s: want %t, got %t (%s)", name, want.Bool, got, detail)
	}
	return nil
}

// describeCalls renders store calls for messages.
func describeCalls(calls []*storeCall) string {
	if len(calls) == 0 {
		return "no store calls"
	}
	parts := make([]string, len(calls))
	for i, c := range calls {
		s := c.Op
		if c.SessionID != "" {
			s += "(" + c.SessionID + ")"
		}
		if c.Outcome != "" {
			s += "=" + c.Outcome
		}
		if c.InNode {
			s += "@" + strings.Join(c.Namespace, "/")
		}
		if c.Err != nil && c.Outcome == "" {
			s += "!" + c.Err.Error()
		}
		parts[i] = s
	}
	return "store calls [" + strings.Join(parts, " ") + "]"
}

func sameSummaries(a, b []session.Summary) bool {
	return slices.EqualFunc(a, b, func(x, y session.Summary) bool {
		return x.SessionID == y.SessionID && x.Version == y.Version && x.SchemaVersion == y.SchemaVersion
	})
}

// checkLoaded asserts loaded_session_state: the session's stored record
// before the invocation (null: none) is want, and the engine's load at
// entry resolved to exactly that record — it returned it, or confirmed
// that its cached copy is that version (a conditional load answered
// not-modified).
func checkLoaded(m *matcher, want *Value, r *ssRun) error {
	const path = "loaded_session_state"
	var l *storeCall
	for _, c := range r.loads() {
		if c.SessionID == r.SessionID {
			l = c
			break
		}
	}
	if l == nil {
		return fmt.Errorf("%s: the engine never loaded session %q (%s)", path, r.SessionID, describeCalls(r.Calls))
	}
	if want.IsNull() {
		if r.Pre != nil {
			st, _ := decodeRecord(r.Pre)
			return fmt.Errorf("%s: want no record, the store held %s", path, formatValue(st))
		}
		if l.Outcome != "not_found" {
			return fmt.Errorf("%s: want the load to find no record, it returned %s", path, l.Outcome)
		}
		return nil
	}
	if r.Pre == nil {
		return fmt.Errorf("%s: want %s, the store held no record for %q", path, want.String(), r.SessionID)
	}
	stored, err := decodeRecord(r.Pre)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := m.match(path, want.Native(), stored, exact); err != nil {
		return err
	}
	switch l.Outcome {
	case "record":
		got, err := decodeRecord(l.Record)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if l.Record.Version != r.Pre.Version || !deepEqual(got, stored) {
			return fmt.Errorf("%s: the engine loaded version %d %s, the store held version %d %s",
				path, l.Record.Version, formatValue(got), r.Pre.Version, formatValue(stored))
		}
	case "not_modified":
		if l.IfVersionNot != r.Pre.Version {
			return fmt.Errorf("%s: the engine confirmed its cached version %d, the store held version %d", path, l.IfVersionNot, r.Pre.Version)
		}
	default:
		return fmt.Errorf("%s: the engine's load returned %s: %v", path, l.Outcome, l.Err)
	}
	return nil
}

// checkSaved asserts saved_session_assertions: the invocation wrote the
// session, and the stored record after it has the expected state, schema
// version and none of the excluded fields.
func checkSaved(m *matcher, sa *ssSaved, r *ssRun) error {
	const path = "saved_session_assertions"
	wrote := false
	for _, w := range r.writes() {
		if w.SessionID == r.SessionID && w.Err == nil {
			wrote = true
		}
	}
	if !wrote {
		return fmt.Errorf("%s: the invocation did not save session %q (%s)", path, r.SessionID, describeCalls(r.Calls))
	}
	if r.Post == nil {
		return fmt.Errorf("%s: the store holds no record for %q", path, r.SessionID)
	}
	return checkRecord(m, path, "state", "schema_version", sa.state, sa.schemaVersion, sa.excludes, r.Post)
}

func checkRecord(m *matcher, path, stateKey, versionKey string, state, version *Value, excludes []string, rec *session.Record) error {
	st, err := decodeRecord(rec)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if state != nil {
		if err := m.match(path+"."+stateKey, state.Native(), st, exact); err != nil {
			return err
		}
	}
	if version != nil {
		want, err := versionString(version, versionKey)
		if err != nil {
			return err
		}
		if rec.SchemaVersion != want {
			return fmt.Errorf("%s.%s: want %q, got %q", path, versionKey, want, rec.SchemaVersion)
		}
	}
	for _, f := range excludes {
		if _, ok := rec.State[f]; ok {
			return fmt.Errorf("%s.excludes_fields: the record holds %s (%s)", path, f, formatValue(st))
		}
	}
	return nil
}

// checkStoreAfter asserts store_after: a load from the store after the
// invocation returns no record, or the expected one.
func (x *geExec) checkStoreAfter(m *matcher, sa *ssStoreAfter) error {
	if sa.noneFor != "" {
		_, err := x.ss.mem.Load(context.Background(), session.LoadRequest{SessionID: sa.noneFor})
		if err == nil {
			st, _ := decodeRecord(x.ss.peek(sa.noneFor))
			return fmt.Errorf("store_after.load_returns_none_for_session_id: load(%q) returns %s", sa.noneFor, formatValue(st))
		}
		if !errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("store_after: load(%q): %w", sa.noneFor, err)
		}
		return nil
	}
	rec, err := x.ss.mem.Load(context.Background(), session.LoadRequest{SessionID: sa.someFor})
	if err != nil {
		return fmt.Errorf("store_after.load_returns_for_session_id: load(%q): %w", sa.someFor, err)
	}
	return checkRecord(m, "store_after", "loaded_state", "loaded_schema_version", sa.state, sa.schemaVersion, nil, rec)
}

// compositeSubgraph returns the subgraph the outermost graph dispatches
// through subgraph: nodes (fanOut false) or fan_out: nodes (fanOut true);
// it must be unique.
func (gc *geCase) compositeSubgraph(fanOut bool) (*geGraph, *geNode, error) {
	var g *geGraph
	var node *geNode
	for _, n := range gc.outer.nodes {
		name := ""
		switch {
		case fanOut && n.fan != nil:
			name = n.fan.sub
		case !fanOut && n.sub != nil:
			name = n.sub.name
		default:
			continue
		}
		if g != nil && g.name != name {
			return nil, nil, fmt.Errorf("the outermost graph dispatches more than one subgraph (%s, %s)", g.name, name)
		}
		g, node = gc.subgraphs[name], n
	}
	if g == nil {
		kind := "subgraph"
		if fanOut {
			kind = "fan_out"
		}
		return nil, nil, fmt.Errorf("the outermost graph has no %s node", kind)
	}
	return g, node, nil
}

// entryStarts returns the started events of g's entry node in one
// invocation (first attempts only), instances ordered by fan-out index.
func (x *geExec) entryStarts(g *geGraph, invocationID string, instances bool) []*eventRec {
	var out []*eventRec
	for _, ev := range x.ss.subEvents(g.name, invocationID) {
		if ev.Phase == "started" && ev.NodeName == g.entry && ev.AttemptIndex == 0 && (ev.FanOutIndex != nil) == instances {
			out = append(out, ev)
		}
	}
	if instances {
		sort.SliceStable(out, func(i, j int) bool { return *out[i].FanOutIndex < *out[j].FanOutIndex })
	}
	return out
}

// checkInnerPre asserts inner_pre_state: the pre_state of the subgraph's
// entry node, as delivered to an observer on the subgraph.
func (x *geExec) checkInnerPre(m *matcher, want *Value, run *invocationRun) error {
	g, _, err := x.gc.compositeSubgraph(false)
	if err != nil {
		return fmt.Errorf("inner_pre_state: %w", err)
	}
	starts := x.entryStarts(g, run.InvocationID, false)
	if len(starts) == 0 {
		return fmt.Errorf("inner_pre_state: subgraph %s's entry node %s never started", g.name, g.entry)
	}
	return m.match("inner_pre_state", want.Native(), starts[0].PreState, exact)
}

// checkInstancePres asserts instance_pre_states: the pre_state of each
// fan-out instance's entry node, in instance order.
func (x *geExec) checkInstancePres(m *matcher, want *Value, run *invocationRun) error {
	g, _, err := x.gc.compositeSubgraph(true)
	if err != nil {
		return fmt.Errorf("instance_pre_states: %w", err)
	}
	starts := x.entryStarts(g, run.InvocationID, true)
	got := make([]any, len(starts))
	for i, ev := range starts {
		if *ev.FanOutIndex != i {
			return fmt.Errorf("instance_pre_states: instance indices are not 0..%d: %s", len(starts)-1, summarizeEvents(starts))
		}
		got[i] = ev.PreState
	}
	return m.match("instance_pre_states", want.Native(), got, exact)
}

// checkCause asserts expected_error.cause: an error below the raised
// error in its chain has the expected type name (exception_type).
func checkCause(want *Value, err error) error {
	typ := mustGet(want, "exception_type").Str
	var chain []string
	for cur := err; cur != nil; cur = errors.Unwrap(cur) {
		name := errorTypeName(cur)
		if len(chain) > 0 && name == typ {
			return nil
		}
		chain = append(chain, name)
	}
	return fmt.Errorf("expected_error.cause.exception_type: no %s in the cause chain %s", typ, strings.Join(chain, " -> "))
}

func errorTypeName(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}
