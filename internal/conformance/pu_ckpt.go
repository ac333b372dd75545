package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// §10 checkpoint cases (pipeline-utilities 025, 029, 030, 070): a case
// with checkpointer: in_memory that neither suspends nor resumes a
// suspension runs with graph.WithCheckpointer on a harness-held
// checkpoint.MemoryStore. The graph is parsed by the ordinary path; the §10
// directives are run here. Directives the engine cannot back yet keep the
// case not implemented, with the reason.

// Case-level keys the checkpoint path runs; every other key not in
// ckptGraphKeys leaves the case not implemented.
var (
	ckptGraphKeys = []string{"name", "description", "state", "entry", "nodes", "edges", "initial_state", "subgraphs", "subgraph"}
	ckptKeys      = []string{"checkpointer", "first_run_expected_error", "saved_record_assertions", "resume",
		"crash_injection", "populate_checkpointer_via_runs", "invoke_with", "expected_error"}
	// ckptUnbacked names, per directive the checkpoint path does not run,
	// what is missing.
	ckptUnbacked = map[string]string{
		"expected": "per-save assertions (checkpoint_saves, latest_record_assertions) need completed_positions " +
			"with step/attempt_index, parent_states, fan_out_progress and schema_version in the engine's " +
			"checkpoint record, which records only the last position, CompletedNodeCount and SavedAt",
		"caller_correlation_id": "caller_correlation_id / caller_invocation_id on a checkpoint case are not wired " +
			"into the §10 runner (observability-scoped directive)",
		"caller_invocation_id": "caller_correlation_id / caller_invocation_id on a checkpoint case are not wired " +
			"into the §10 runner (observability-scoped directive)",
		"invariants": "case-level §10 invariants (span/log correlation across both runs) are not wired",
	}
	ckptResumeExpectKeys = []string{"final_state", "nodes_executed_during_resume", "nodes_skipped_during_resume"}
	// ckptResumeInvariants are the resume: invariants the runner checks.
	ckptResumeInvariants = []string{"resumed_invocation_id_differs_from_original", "resumed_correlation_id_matches_original",
		"after_node_crash_rolls_node_forward", "subgraph_re_entry_uses_parent_states", "inner_first_node_not_re_run"}
	ckptRecordKeys = []string{"state", "completed_positions", "parent_states_present", "parent_states_outermost_first"}
)

// ckptSpec is a checkpoint case's §10 directives.
type ckptSpec struct {
	firstErr    *Value // first_run_expected_error
	saved       *Value // saved_record_assertions
	resume      *Value // resume:
	crashAfter  string // crash_injection.after_node
	populate    int    // populate_checkpointer_via_runs
	resumeID    string // invoke_with.resume_invocation
	expectedErr *Value // expected_error (with resume_invocation)
}

func ckptNotImplemented(reason string) error {
	return notImplemented(capCheckpoint + ": " + reason)
}

// parseCheckpointCase parses a §10 checkpoint case: the graph through
// parseCase on the body without its §10 keys, the rest here.
func (p *geParser) parseCheckpointCase(body *Value) (*geCase, error) {
	// A state-migration case is reported under its own capability, as
	// before (the caller's key check recorded what the case needs).
	if slices.Contains(p.missing, capMigration) {
		return nil, notImplemented(capMigration)
	}
	// The caller's key check counted the §10 keys as unbuilt; this path
	// runs them (or names what it cannot).
	p.missing = nil
	cs := &ckptSpec{}
	stripped := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		switch {
		case slices.Contains(ckptGraphKeys, f.Key):
			stripped.Fields = append(stripped.Fields, f)
			continue
		case !slices.Contains(ckptKeys, f.Key):
			if r, ok := ckptUnbacked[f.Key]; ok {
				return nil, ckptNotImplemented(r)
			}
			return nil, ckptNotImplemented("directive " + f.Key + " is not wired")
		}
		v := f.Value
		switch f.Key {
		case "checkpointer":
			if v.Kind != KindString || v.Str != "in_memory" {
				return nil, ckptNotImplemented("checkpointer " + v.String() + " (only in_memory is wired)")
			}
		case "first_run_expected_error":
			cs.firstErr = v
		case "saved_record_assertions":
			for _, sf := range v.Fields {
				if !slices.Contains(ckptRecordKeys, sf.Key) {
					return nil, ckptNotImplemented("saved_record_assertions." + sf.Key + " is not recorded by the engine")
				}
			}
			cs.saved = v
		case "resume":
			if err := checkCkptResume(v); err != nil {
				return nil, err
			}
			cs.resume = v
		case "crash_injection":
			a, ok := v.Get("after_node")
			if !ok || len(v.Fields) != 1 {
				return nil, ckptNotImplemented("crash_injection other than after_node (per-instance fan-out progress is not saved by the engine)")
			}
			s, err := str(a, "crash_injection.after_node")
			if err != nil {
				return nil, err
			}
			cs.crashAfter = s
		case "populate_checkpointer_via_runs":
			if v.Kind != KindInt || v.Int < 0 || v.Int > 100 {
				return nil, schemaErrorf(v.Pos, "populate_checkpointer_via_runs must be an integer between 0 and 100")
			}
			cs.populate = int(v.Int)
		case "invoke_with":
			rv, ok := v.Get("resume_invocation")
			if !ok || len(v.Fields) != 1 {
				return nil, ckptNotImplemented("invoke_with other than resume_invocation")
			}
			s, err := str(rv, "resume_invocation")
			if err != nil {
				return nil, err
			}
			cs.resumeID = s
		case "expected_error":
			cs.expectedErr = v
		}
	}
	if (cs.resumeID == "") != (cs.expectedErr == nil) {
		return nil, ckptNotImplemented("expected_error without invoke_with.resume_invocation (or the reverse)")
	}
	if cs.resumeID == "" && cs.resume == nil {
		return nil, ckptNotImplemented("a checkpoint case without a resume is not wired")
	}
	gc, err := p.parseCase(&Case{Body: stripped})
	if err != nil {
		return nil, err
	}
	gc.ckpt = cs
	return gc, nil
}

func checkCkptResume(v *Value) error {
	if v.Kind != KindMap {
		return schemaErrorf(v.Pos, "resume: must be a mapping")
	}
	for _, f := range v.Fields {
		switch f.Key {
		case "from_first_run":
			if f.Value.Kind != KindBool || !f.Value.Bool {
				return ckptNotImplemented("resume other than from_first_run: true")
			}
		case "expected":
			for _, ef := range f.Value.Fields {
				if !slices.Contains(ckptResumeExpectKeys, ef.Key) {
					return ckptNotImplemented("resume.expected." + ef.Key + " is not wired")
				}
			}
		case "invariants":
			for _, inf := range f.Value.Fields {
				if !slices.Contains(ckptResumeInvariants, inf.Key) {
					return ckptNotImplemented("resume invariant " + inf.Key + " is not wired")
				}
			}
		default:
			return ckptNotImplemented("resume." + f.Key + " is not wired")
		}
	}
	return nil
}

// crashStore wraps the case's store: after the engine's save of the
// crash_injection node's completed checkpoint it cancels the first run
// and blocks that run's goroutine inside Save, so the invocation is
// abandoned right after the save, as if its process had died there. The
// record in the store is the engine's own.
type crashStore struct {
	checkpoint.Store
	after   string
	crashed chan *checkpoint.Record // the record saved at the crash point
	release chan struct{}
	once    sync.Once
}

func (s *crashStore) Save(ctx context.Context, r checkpoint.Record) error {
	if err := s.Store.Save(ctx, r); err != nil {
		return err
	}
	var d ckptData
	if r.Kind == checkpoint.KindCheckpoint && json.Unmarshal(r.Data, &d) == nil && !d.Rerun && d.NodeName == s.after {
		fired := false
		s.once.Do(func() { fired = true })
		if fired {
			rc := r
			s.crashed <- &rc
			<-s.release
			return errors.New("conformance: crash-injected invocation abandoned")
		}
	}
	return nil
}

// ckptData is the engine's checkpoint payload as far as the runner reads it.
type ckptData struct {
	Positions []struct {
		Node  string          `json:"node"`
		State json.RawMessage `json:"state"`
	} `json:"positions"`
	Rerun     bool     `json:"rerun_on_resume"`
	NodeName  string   `json:"node_name"`
	Namespace []string `json:"namespace"`
}

// runCheckpointCase runs a §10 case.
func runCheckpointCase(ctx context.Context, gc *geCase) error {
	cs := gc.ckpt
	x := newGeExec(gc)
	defer x.otel.shutdown()
	mem := checkpoint.NewMemoryStore(nil)
	var store checkpoint.Store = mem
	var crash *crashStore
	if cs.crashAfter != "" {
		crash = &crashStore{Store: mem, after: cs.crashAfter, crashed: make(chan *checkpoint.Record, 1), release: make(chan struct{})}
		store = crash
	}
	x.ckptStore = store
	if err := x.build(); err != nil {
		return fmt.Errorf("compilation failed: %w", err)
	}
	if _, err := x.outer.AddObserver(x.pu.record); err != nil {
		return fmt.Errorf("registering the recording observer: %w", err)
	}
	initial := map[string]any{}
	if inv := gc.invocations[0]; inv.initial != nil && !inv.initial.IsNull() {
		n, ok := inv.initial.Native().(map[string]any)
		if !ok {
			return schemaErrorf(inv.initial.Pos, "initial_state must be a mapping")
		}
		initial = n
	}
	m := newMatcher()
	for i := range cs.populate {
		res, err := x.outer.Invoke(ctx, graph.Update(initial))
		if err != nil {
			return fmt.Errorf("populating run %d: %w", i+1, err)
		}
		if _, err := mem.Load(ctx, checkpoint.Key{InvocationID: res.InvocationID, Kind: checkpoint.KindCheckpoint}); err != nil {
			return fmt.Errorf("populating run %d saved no checkpoint: %w", i+1, err)
		}
	}
	if cs.resumeID != "" {
		_, err := x.outer.ResumeCheckpoint(ctx, cs.resumeID)
		if err == nil {
			return fmt.Errorf("expected_error: resuming %q succeeded", cs.resumeID)
		}
		return checkCkptError(m, cs.expectedErr, err)
	}

	// The first run: to its error, or abandoned at the crash point.
	first, rec, err := x.ckptFirstRun(ctx, crash, initial)
	if err != nil {
		return err
	}
	if crash != nil {
		// The abandoned first run is still in flight (inside Save) until
		// the case ends, so the process-wide drain waits for its release.
		defer func() {
			close(crash.release)
			<-first.done
			_, _ = x.outer.Drain(ctx)
		}()
	}
	if cs.saved != nil {
		if err := checkSavedRecord(m, cs.saved, rec); err != nil {
			return err
		}
	}
	runIdx := x.sus.nextRun()
	res, err := x.outer.ResumeCheckpoint(withRunIndex(ctx, runIdx), first.id)
	if res == nil {
		return fmt.Errorf("resume returned no result: %w", err)
	}
	if crash == nil {
		if _, derr := x.outer.Drain(ctx); derr != nil {
			return fmt.Errorf("draining: %w", derr)
		}
	}
	if err != nil {
		return fmt.Errorf("resume: ended %s: %v", res.Status, err)
	}
	return x.checkCkptResume(m, cs.resume, first, res, runIdx)
}

// ckptFirst is the first run of a resume case.
type ckptFirst struct {
	id, corrID string
	run        int
	done       chan struct{}
}

func (x *geExec) ckptFirstRun(ctx context.Context, crash *crashStore, initial map[string]any) (*ckptFirst, *checkpoint.Record, error) {
	cs := x.gc.ckpt
	f := &ckptFirst{run: x.sus.nextRun(), done: make(chan struct{})}
	rctx := withRunIndex(ctx, f.run)
	if crash != nil {
		var res *graph.Result
		go func() {
			defer close(f.done)
			res, _ = x.outer.Invoke(rctx, graph.Update(initial))
		}()
		select {
		case rec := <-crash.crashed:
			f.id, f.corrID = rec.InvocationID, rec.CorrelationID
			return f, rec, nil
		case <-f.done:
			return nil, nil, fmt.Errorf("crash_injection: the first run ended %s before node %s's checkpoint", res.Status, cs.crashAfter)
		}
	}
	defer close(f.done)
	res, err := x.outer.Invoke(rctx, graph.Update(initial))
	if res == nil {
		return nil, nil, fmt.Errorf("invoke returned no result: %w", err)
	}
	if _, derr := x.outer.Drain(ctx); derr != nil {
		return nil, nil, fmt.Errorf("draining: %w", derr)
	}
	f.id, f.corrID = res.InvocationID, res.CorrelationID
	if cs.firstErr != nil {
		if err == nil {
			return nil, nil, fmt.Errorf("first_run_expected_error: the first run completed")
		}
		if e := checkCkptError(newMatcher(), cs.firstErr, err); e != nil {
			return nil, nil, fmt.Errorf("first_run_expected_error: %w", e)
		}
	} else if err != nil {
		return nil, nil, fmt.Errorf("first run ended %s: %v", res.Status, err)
	}
	rec, lerr := x.ckptStore.Load(ctx, checkpoint.Key{InvocationID: f.id, Kind: checkpoint.KindCheckpoint})
	if lerr != nil {
		return nil, nil, fmt.Errorf("no checkpoint record after the first run: %w", lerr)
	}
	return f, rec, nil
}

// checkCkptError matches {category, raised_from, transient} against err.
func checkCkptError(m *matcher, want *Value, err error) error {
	for _, f := range want.Fields {
		switch f.Key {
		case "category":
			if got := string(errcat.Of(err)); !scalarEqual(f.Value.Native(), got) {
				return fmt.Errorf("error category: want %s, got %q (%v)", f.Value.String(), got, err)
			}
		case "transient":
			if got := errcat.Of(err).Transient(); f.Value.Kind != KindBool || f.Value.Bool != got {
				return fmt.Errorf("error transient: want %s, got %v", f.Value.String(), got)
			}
		case "raised_from":
			var ne *graph.NodeError
			if !errors.As(err, &ne) {
				return fmt.Errorf("raised_from: the error is not attributed to a node: %v", err)
			}
			w := f.Value.Native()
			if !scalarEqual(w, ne.Node) && !slices.ContainsFunc(ne.Namespace, func(s string) bool { return scalarEqual(w, s) }) {
				return fmt.Errorf("raised_from: want %s, got node %q (namespace %v)", f.Value.String(), ne.Node, ne.Namespace)
			}
		default:
			return schemaErrorf(f.Pos, "unknown expected error key %s", f.Key)
		}
	}
	_ = m
	return nil
}

// checkSavedRecord checks saved_record_assertions against the engine's
// record, as far as the engine records it: the state at the last position,
// the number of completed positions (CompletedNodeCount) and, for a record
// saved at a completed node, that node's name and parent namespace. Steps
// and attempt indexes of earlier positions are not recorded.
func checkSavedRecord(m *matcher, want *Value, rec *checkpoint.Record) error {
	var d ckptData
	if err := json.Unmarshal(rec.Data, &d); err != nil || len(d.Positions) == 0 {
		return fmt.Errorf("saved record: unreadable payload: %v", err)
	}
	for _, f := range want.Fields {
		switch f.Key {
		case "state":
			var got any
			if err := json.Unmarshal(d.Positions[len(d.Positions)-1].State, &got); err != nil {
				return fmt.Errorf("saved record state: %v", err)
			}
			if err := m.match("saved_record_assertions.state", f.Value.Native(), normalize(got), exact); err != nil {
				return err
			}
		case "completed_positions":
			if f.Value.Kind != KindList {
				return schemaErrorf(f.Pos, "completed_positions must be a list")
			}
			if n := len(f.Value.Items); rec.CompletedNodeCount != n {
				return fmt.Errorf("saved record: %d completed positions, want %d", rec.CompletedNodeCount, n)
			}
			if d.Rerun || len(f.Value.Items) == 0 {
				continue
			}
			last := f.Value.Items[len(f.Value.Items)-1]
			nn, _ := last.Get("node_name")
			if nn == nil || !scalarEqual(nn.Native(), d.NodeName) {
				return fmt.Errorf("saved record: last completed node %q, want %v", d.NodeName, nn)
			}
			if ns, ok := last.Get("namespace"); ok && len(d.Namespace) > 0 {
				parent := stringsToAny(d.Namespace[:len(d.Namespace)-1])
				if !deepEqual(ns.Native(), parent) {
					return fmt.Errorf("saved record: last completed node's namespace %v, want %s", parent, ns.String())
				}
			}
		case "parent_states_present":
			if got := len(d.Positions) > 1; f.Value.Kind != KindBool || got != f.Value.Bool {
				return fmt.Errorf("saved record: %d positions (parent states present %v), want %s", len(d.Positions), got, f.Value.String())
			}
		case "parent_states_outermost_first":
			if len(d.Namespace) < len(d.Positions)-1 {
				return fmt.Errorf("saved record: namespace %v shorter than its parent states", d.Namespace)
			}
			for i := range d.Positions[:len(d.Positions)-1] {
				if d.Positions[i].Node != d.Namespace[i] {
					return fmt.Errorf("saved record: parent state %d is at %q, namespace %v", i, d.Positions[i].Node, d.Namespace)
				}
			}
		}
	}
	return nil
}

// checkCkptResume checks the resume: block against the resumed run.
func (x *geExec) checkCkptResume(m *matcher, rv *Value, first *ckptFirst, res *graph.Result, runIdx int) error {
	ran := func(node string) bool {
		x.sus.mu.Lock()
		defer x.sus.mu.Unlock()
		for _, b := range x.sus.bodies {
			if b.Run == runIdx && b.Node == node {
				return true
			}
		}
		return false
	}
	exp, _ := rv.Get("expected")
	if exp != nil {
		for _, f := range exp.Fields {
			switch f.Key {
			case "final_state":
				if err := x.matchFinalState(m, "resume.expected.final_state", f.Value, normalize(res.State)); err != nil {
					return err
				}
			case "nodes_executed_during_resume", "nodes_skipped_during_resume":
				names, err := strList(f.Value, f.Key)
				if err != nil {
					return err
				}
				want := f.Key == "nodes_executed_during_resume"
				for _, n := range names {
					if ran(n) != want {
						return fmt.Errorf("resume.expected.%s: node %s ran=%v during the resume", f.Key, n, !want)
					}
				}
			}
		}
	}
	inv, _ := rv.Get("invariants")
	if inv == nil {
		return nil
	}
	for _, f := range inv.Fields {
		if f.Value.Kind != KindBool || !f.Value.Bool {
			return ckptNotImplemented("resume invariant " + f.Key + " other than true")
		}
		var ok bool
		switch f.Key {
		case "resumed_invocation_id_differs_from_original":
			ok = res.InvocationID != "" && res.InvocationID != first.id
		case "resumed_correlation_id_matches_original":
			ok = first.corrID != "" && res.CorrelationID == first.corrID
		case "after_node_crash_rolls_node_forward":
			ok = x.gc.ckpt.crashAfter != "" && !ran(x.gc.ckpt.crashAfter)
		case "subgraph_re_entry_uses_parent_states", "inner_first_node_not_re_run":
			// The resumed run re-entered the subgraph at the inner position:
			// the composite node's inner first node did not run again.
			ok = x.reenteredSubgraph(ran)
		}
		if !ok {
			return fmt.Errorf("resume invariant %s does not hold (original %s/%s, resumed %s/%s)",
				f.Key, first.id, first.corrID, res.InvocationID, res.CorrelationID)
		}
	}
	return nil
}

// reenteredSubgraph reports whether, for some outer subgraph node, the
// subgraph's entry node did not run during the resume while another of its
// nodes did.
func (x *geExec) reenteredSubgraph(ran func(string) bool) bool {
	for _, n := range x.gc.outer.nodes {
		for _, ref := range n.subgraphNames() {
			g := x.gc.subgraphs[ref.name]
			if g == nil || g.entry == "" || ran(g.entry) {
				continue
			}
			for _, in := range g.nodes {
				if in.name != g.entry && ran(in.name) {
					return true
				}
			}
		}
	}
	return false
}
