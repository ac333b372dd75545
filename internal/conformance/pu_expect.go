package conformance

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// errorsFields returns the outer graph's fan-out / parallel-branches
// errors_field names.
func (x *geExec) errorsFields() []string {
	var out []string
	for _, n := range x.gc.outer.nodes {
		switch {
		case n.fan != nil && n.fan.errorsField != "":
			out = append(out, n.fan.errorsField)
		case n.par != nil && n.par.errorsField != "":
			out = append(out, n.par.errorsField)
		}
	}
	return out
}

// matchFinalState compares a final state exactly, except for the
// records of an errors_field.
//
// Fixture mismatch absorption (next to graph-engine 020's, see
// absorbedFields): the engine records a collected failure as
// {fan_out_index: <int> | branch_name, category, message}; fixtures 019
// and 034 list {fan_out_index: "1", category: node_exception} — a string
// index and no message. Records of an errors_field are therefore matched
// per record as subsets of the actual record (same count and order), and
// a numeric string equals the same integer.
func (x *geExec) matchFinalState(m *matcher, path string, want *Value, got any) error {
	fields := x.errorsFields()
	gm, ok := got.(map[string]any)
	if len(fields) == 0 || !ok {
		return m.match(path, want.Native(), got, exact)
	}
	w := want.Native().(map[string]any)
	rest, restGot := map[string]any{}, map[string]any{}
	for k, v := range w {
		rest[k] = v
	}
	for k, v := range gm {
		restGot[k] = v
	}
	for _, f := range fields {
		wl, wok := w[f].([]any)
		if !wok {
			continue
		}
		if err := matchErrorRecords(m, joinPath(path, f), wl, gm[f]); err != nil {
			return err
		}
		delete(rest, f)
		delete(restGot, f)
	}
	return m.match(path, rest, restGot, exact)
}

func matchErrorRecords(m *matcher, path string, want []any, got any) error {
	gl, ok := normalize(got).([]any)
	if !ok {
		return mismatch(path, want, got)
	}
	if len(gl) != len(want) {
		return fmt.Errorf("%s: want %d records %s, got %d: %s", path, len(want), formatValue(want), len(gl), formatValue(gl))
	}
	for i, wr := range want {
		rp := fmt.Sprintf("%s[%d]", path, i)
		wm, wok := wr.(map[string]any)
		gr, gok := gl[i].(map[string]any)
		if !wok || !gok {
			if err := m.match(rp, wr, gl[i], exact); err != nil {
				return err
			}
			continue
		}
		for _, k := range sortedKeys(wm) {
			gv, present := gr[k]
			if !present {
				return fmt.Errorf("%s: missing key %q (record %s)", rp, k, formatValue(gr))
			}
			wv := wm[k]
			if s, isStr := wv.(string); isStr {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil {
					if gi, isInt := gv.(int64); isInt && gi == n {
						continue
					}
				}
			}
			if err := m.match(joinPath(rp, k), wv, gv, exact); err != nil {
				return err
			}
		}
	}
	return nil
}

// assertPipeline checks the pipeline-utilities expectations of one
// invocation.
func (x *geExec) assertPipeline(m *matcher, e *geExpect, run *invocationRun) error {
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	st := x.pu
	id := run.InvocationID
	if e.observerEventList != nil {
		fail(matchEvents(m, "observer_events", e.observerEventList, st.nodeEvents(id)))
	}
	for _, f := range e.traceRecords {
		var got []*traceRec
		st.mu.Lock()
		for _, r := range st.traces[f.Key] {
			if r.InvocationID == id {
				got = append(got, r)
			}
		}
		st.mu.Unlock()
		fail(matchRecords(m, "trace_records."+f.Key, f.Value, len(got), func(i int) any {
			st.mu.Lock()
			defer st.mu.Unlock()
			return got[i].view()
		}))
	}
	if e.timingRecords != nil {
		var got []*timingRec
		st.mu.Lock()
		for _, r := range st.timings {
			if r.InvocationID == id {
				got = append(got, r)
			}
		}
		st.mu.Unlock()
		fail(matchRecords(m, "timing_records", e.timingRecords, len(got), func(i int) any { return got[i].view() }))
	}
	if e.observerEvent != nil {
		fail(checkObserverEvent(m, e.observerEvent, st.nodeEvents(id)))
	}
	if e.attemptEvents != nil {
		evs := st.nodeEvents(id)
		fail(matchRecords(m, "expected_attempt_events", e.attemptEvents, len(evs), func(i int) any {
			v := evs[i].view()
			if evs[i].HasError {
				v["error_category"] = nullable(evs[i].ErrCause)
			}
			return v
		}))
	}
	fis := st.fiEvents(id)
	if e.fiEvent != nil {
		if len(fis) != 1 {
			fail(fmt.Errorf("expected_failure_isolation_event: want exactly one failure-isolation event, got %d", len(fis)))
		} else {
			fail(m.match("expected_failure_isolation_event", fiExpectation(e.fiEvent), fiView(fis[0]), subsetDeep))
		}
	}
	if e.noFIEvent != nil {
		if got := len(fis) == 0; got != e.noFIEvent.Bool {
			fail(fmt.Errorf("no_failure_isolation_event: want %t, got %d event(s)", e.noFIEvent.Bool, len(fis)))
		}
	}
	if e.maxInFlight != nil {
		st.mu.Lock()
		peak := st.maxInFlight
		st.mu.Unlock()
		if peak < 1 || peak > int(e.maxInFlight.Int) {
			fail(fmt.Errorf("concurrency_invariant.max_in_flight: want at most %d instances in flight, observed %d", e.maxInFlight.Int, peak))
		}
	}
	if e.recoverableState != nil {
		if run.Err == nil {
			fail(fmt.Errorf("recoverable_state: the invocation did not fail"))
		} else {
			fail(m.match("recoverable_state", e.recoverableState.Native(), run.FinalState, exact))
		}
	}
	if ee := e.expectedError; ee != nil && run.Err != nil {
		fail(x.checkPipelineError(m, ee, run))
	}
	return errors.Join(errs...)
}

// checkPipelineError checks the pipeline-utilities extras of
// expected_error.
func (x *geExec) checkPipelineError(m *matcher, want *geErrorExpect, run *invocationRun) error {
	err := run.Err
	if want.flakyCallCount != nil {
		if got := x.pu.totalFlakyCalls(); int64(got) != want.flakyCallCount.Int {
			return fmt.Errorf("expected_error.flaky_call_count: want %d, got %d", want.flakyCallCount.Int, got)
		}
	}
	if want.fanOutCategory != nil {
		cat, _ := errcat.Derived(err)
		if !scalarEqual(want.fanOutCategory.Native(), string(cat)) {
			return fmt.Errorf("expected_error.fan_out_category: want %s, got %q (chain %v)", want.fanOutCategory.String(), cat, errcat.Chain(err))
		}
	}
	if want.branchName != nil {
		var ne *graph.NodeError
		if !errors.As(err, &ne) {
			return fmt.Errorf("expected_error.branch_name: the error is not a node error: %v", err)
		}
		if e := m.match("expected_error.branch_name", want.branchName.Native(), ne.BranchName, exact); e != nil {
			return e
		}
	}
	if want.causeMessage != nil {
		if e := m.match("expected_error.cause_message", want.causeMessage.Native(), innermostMessage(err), exact); e != nil {
			return e
		}
	}
	return nil
}

// matchRecords compares an exact-length list of expected records, each a
// subset of the actual record's view.
func matchRecords(m *matcher, path string, want *Value, n int, view func(i int) any) error {
	if len(want.Items) != n {
		var got []any
		for i := 0; i < n; i++ {
			got = append(got, view(i))
		}
		return fmt.Errorf("%s: want %d records, got %d: %s", path, len(want.Items), n, formatValue(got))
	}
	for i, w := range want.Items {
		if err := m.match(fmt.Sprintf("%s[%d]", path, i), w.Native(), view(i), subsetTop); err != nil {
			return err
		}
	}
	return nil
}

// checkObserverEvent implements expected_observer_event (fixture 006):
// the last completed event of node_name, with error_absent asserting it
// carries no error.
func checkObserverEvent(m *matcher, want *Value, evs []*eventRec) error {
	node, err := str(mustGet(want, "node_name"), "expected_observer_event.node_name")
	if err != nil {
		return err
	}
	phase := "completed"
	if p, ok := want.Get("phase"); ok {
		if phase, err = str(p, "expected_observer_event.phase"); err != nil {
			return err
		}
	}
	var ev *eventRec
	for _, e := range evs {
		if e.NodeName == node && e.Phase == phase {
			ev = e
		}
	}
	if ev == nil {
		return fmt.Errorf("expected_observer_event: no %s event for node %q among %s", phase, node, summarizeEvents(evs))
	}
	view := ev.view()
	for _, f := range want.Fields {
		path := "expected_observer_event." + f.Key
		switch f.Key {
		case "node_name", "phase":
		case "error_absent":
			if f.Value.Kind != KindBool {
				return schemaErrorf(f.Value.Pos, "error_absent must be a bool")
			}
			if absent := !ev.HasError; absent != f.Value.Bool {
				return fmt.Errorf("%s: want %t, got %t (%s)", path, f.Value.Bool, absent, ev.ErrCategory)
			}
		default:
			gv, ok := view[f.Key]
			if !ok {
				return fmt.Errorf("%s: absent on the event", path)
			}
			if err := m.match(path, f.Value.Native(), gv, exact); err != nil {
				return err
			}
		}
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fiView renders a failure-isolation event in the fixture vocabulary
// (pipeline-utilities §6.3; conformance-adapter §5.8 caught_exception).
func fiView(ev *graph.FailureIsolationEvent) map[string]any {
	var fi, bn any
	if ev.FanOutIndex != nil {
		fi = int64(*ev.FanOutIndex)
	}
	if ev.BranchName != nil {
		bn = *ev.BranchName
	}
	chain := make([]any, len(ev.CaughtException.Chain))
	for i, l := range ev.CaughtException.Chain {
		chain[i] = map[string]any{"category": nullable(string(l.Category)), "message": l.Message, "carrier": l.Carrier}
	}
	return map[string]any{
		"event_name": ev.EventName,
		"wrapped_node_lineage": map[string]any{
			"namespace": stringsToAny(ev.Namespace), "attempt_index": int64(ev.AttemptIndex),
			"fan_out_index": fi, "branch_name": bn,
		},
		"pre_state":  normalize(ev.PreState),
		"post_state": normalize(map[string]any(ev.PostState)),
		"caught_exception": map[string]any{
			"category": nullable(string(ev.CaughtException.Category)),
			"message":  ev.CaughtException.Message,
			"chain":    chain,
		},
	}
}

// fiExpectation is the expected event in the shape subsetDeep compares:
// mappings at every depth are subsets, except that the state mappings
// (pre_state, post_state) are compared exactly by wrapping them in an
// exact marker. Carrier chain links list only {carrier, category}; their
// engine-internal message is not pinned (conformance-adapter §5.8).
func fiExpectation(v *Value) any {
	w := v.Native().(map[string]any)
	for _, k := range []string{"pre_state", "post_state"} {
		if s, ok := w[k]; ok {
			w[k] = exactValue{s}
		}
	}
	return w
}

// exactValue marks a value compared exactly inside a subset comparison.
type exactValue struct{ v any }
