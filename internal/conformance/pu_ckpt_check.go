package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// ckptResumed is a resumed run.
type ckptResumed struct {
	first *ckptFirst
	res   *graph.Result
	err   error
	run   int
	migs  []string // migrations run by the resume
}

// decodeJSON decodes a record's JSON value for matching.
func decodeJSON(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return normalize(v), nil
}

// positionsView renders completed positions as fixture values.
func positionsView(ps []graph.NodePosition) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		m := map[string]any{"namespace": stringsToAny(p.Namespace), "node_name": p.NodeName, "step": p.Step, "attempt_index": p.AttemptIndex}
		if p.FanOutIndex != nil {
			m["fan_out_index"] = *p.FanOutIndex
		}
		out[i] = normalize(m)
	}
	return out
}

// runCkptOnce runs a case without a resume and checks expected: and
// every_save_assertions against the saves.
func (x *geExec) runCkptOnce(ctx context.Context, m *matcher, h *ckptHarness, initial map[string]any) error {
	cs := x.gc.ckpt
	res, err := x.outer.Invoke(ctx, graph.Update(initial), x.firstRunOptions()...)
	if res == nil {
		return fmt.Errorf("invoke returned no result: %w", err)
	}
	if _, derr := x.outer.Drain(ctx); derr != nil {
		return fmt.Errorf("draining: %w", derr)
	}
	if err != nil {
		return fmt.Errorf("the run ended %s: %v", res.Status, err)
	}
	saves := h.savesSnapshot()
	if cs.everySave != nil {
		want := mustGet(cs.everySave, "schema_version").Str
		if len(saves) == 0 {
			return fmt.Errorf("every_save_assertions: no save happened")
		}
		for i, s := range saves {
			if s.SchemaVersion != want {
				return fmt.Errorf("every_save_assertions: save %d carries schema_version %q, want %q", i, s.SchemaVersion, want)
			}
		}
	}
	if cs.expected == nil {
		return nil
	}
	for _, f := range cs.expected.Fields {
		var err error
		switch f.Key {
		case "final_state":
			err = x.matchFinalState(m, "expected.final_state", f.Value, normalize(res.State))
		case "checkpoint_saves":
			err = checkSaves(m, f.Value, saves)
		case "latest_record_assertions":
			if len(saves) == 0 {
				return fmt.Errorf("latest_record_assertions: no save happened")
			}
			err = checkLatestRecord(m, f.Value, saves[len(saves)-1])
		case "invariants":
			err = checkSaveInvariants(f.Value, saves)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkSaves matches checkpoint_saves: one entry per save, in order.
func checkSaves(m *matcher, want *Value, saves []*graph.CheckpointRecord) error {
	if want.Kind != KindList {
		return schemaErrorf(want.Pos, "checkpoint_saves must be a list")
	}
	if len(saves) != len(want.Items) {
		return fmt.Errorf("checkpoint_saves: %d saves, want %d", len(saves), len(want.Items))
	}
	for i, w := range want.Items {
		s := saves[i]
		path := fmt.Sprintf("checkpoint_saves[%d]", i)
		for _, f := range w.Fields {
			switch f.Key {
			case "after_node":
				if got := s.Path[len(s.Path)-1]; s.Rerun || !scalarEqual(f.Value.Native(), got) {
					return fmt.Errorf("%s: saved after node %q (rerun %v), want after %s", path, got, s.Rerun, f.Value.String())
				}
			case "state":
				got, err := decodeJSON(s.State)
				if err != nil {
					return err
				}
				if err := m.match(path+".state", f.Value.Native(), got, exact); err != nil {
					return err
				}
			case "completed_positions":
				if err := m.match(path+".completed_positions", f.Value.Native(), positionsView(s.CompletedPositions), exact); err != nil {
					return err
				}
			default:
				return &DirectiveUnknownError{Name: "checkpoint_saves." + f.Key, Pos: f.Pos}
			}
		}
	}
	return nil
}

// checkLatestRecord matches latest_record_assertions.
func checkLatestRecord(m *matcher, want *Value, s *graph.CheckpointRecord) error {
	for _, f := range want.Fields {
		path := "latest_record_assertions." + f.Key
		var got any
		switch f.Key {
		case "invocation_id":
			got = s.InvocationID
		case "correlation_id":
			got = s.CorrelationID
		case "state":
			v, err := decodeJSON(s.State)
			if err != nil {
				return err
			}
			got = v
		case "completed_positions":
			got = positionsView(s.CompletedPositions)
		case "parent_states":
			ps := []any{}
			for _, raw := range s.ParentStates {
				v, err := decodeJSON(raw)
				if err != nil {
					return err
				}
				ps = append(ps, v)
			}
			got = ps
		case "fan_out_progress":
			if len(s.FanOutProgress) > 0 {
				got = len(s.FanOutProgress)
			}
		case "last_saved_at":
			if s.SavedAt.IsZero() {
				return fmt.Errorf("%s: not set", path)
			}
			continue
		case "schema_version":
			// <any-string>: the undeclared version is the empty string
			// (pipeline-utilities §10.2's sentinel).
			if f.Value.Kind == KindString && f.Value.Str == "<any-string>" {
				continue
			}
			got = s.SchemaVersion
		default:
			return &DirectiveUnknownError{Name: "latest_record_assertions." + f.Key, Pos: f.Pos}
		}
		if err := m.match(path, f.Value.Native(), got, exact); err != nil {
			return err
		}
	}
	return nil
}

// checkSaveInvariants checks the expected.invariants of a save-only case.
func checkSaveInvariants(want *Value, saves []*graph.CheckpointRecord) error {
	for _, f := range want.Fields {
		ok := true
		switch f.Key {
		case "save_count":
			ok = f.Value.Kind == KindInt && int(f.Value.Int) == len(saves)
		case "save_order_matches_completed_event_order", "completed_positions_step_monotonic":
			for i, s := range saves {
				ps := s.CompletedPositions
				for j := 1; j < len(ps); j++ {
					ok = ok && ps[j].Step > ps[j-1].Step
				}
				if i > 0 {
					prev := saves[i-1].CompletedPositions
					ok = ok && len(ps) >= len(prev) && slices.EqualFunc(prev, ps[:len(prev)], func(a, b graph.NodePosition) bool {
						return a.Step == b.Step && a.NodeName == b.NodeName
					})
				}
			}
		case "invocation_id_is_uuidv4":
			ok = len(saves) > 0 && uuidV4Re.MatchString(saves[0].InvocationID)
		case "last_saved_at_monotonic_across_saves":
			for i := 1; i < len(saves); i++ {
				ok = ok && saves[i].SavedAt.After(saves[i-1].SavedAt)
			}
		default:
			return &DirectiveUnknownError{Name: "invariants." + f.Key, Pos: f.Pos}
		}
		if f.Key != "save_count" && (f.Value.Kind != KindBool || !f.Value.Bool) {
			return schemaErrorf(f.Pos, "invariant %s must be true", f.Key)
		}
		if !ok {
			return fmt.Errorf("invariant %s does not hold over %d saves", f.Key, len(saves))
		}
	}
	return nil
}

// checkSavedRecord checks saved_record_assertions against the record
// the first run left.
func checkSavedRecord(m *matcher, want *Value, stored *checkpoint.Record) error {
	d, err := graph.DecodeCheckpoint(stored)
	if err != nil {
		return fmt.Errorf("saved record: %w", err)
	}
	for _, f := range want.Fields {
		switch f.Key {
		case "state":
			got, err := decodeJSON(d.State)
			if err != nil {
				return fmt.Errorf("saved record state: %v", err)
			}
			if err := m.match("saved_record_assertions.state", f.Value.Native(), got, exact); err != nil {
				return err
			}
		case "completed_positions":
			if err := m.match("saved_record_assertions.completed_positions", f.Value.Native(), positionsView(d.CompletedPositions), exact); err != nil {
				return err
			}
		case "parent_states_present":
			if got := len(d.ParentStates) > 0; f.Value.Kind != KindBool || got != f.Value.Bool {
				return fmt.Errorf("saved record: %d parent states, want present=%s", len(d.ParentStates), f.Value.String())
			}
		case "parent_states_outermost_first":
			// Path[i] is the node the level-i state was dispatching: the
			// outermost state first, down to the subgraph the save is in.
			for i := range d.ParentStates {
				if i >= len(d.Path)-1 {
					return fmt.Errorf("saved record: parent state %d has no level in path %v", i, d.Path)
				}
			}
			if len(d.Path) != len(d.ParentStates)+1 {
				return fmt.Errorf("saved record: path %v does not match %d parent states", d.Path, len(d.ParentStates))
			}
		case "fan_out_node_in_completed_positions":
			found := false
			for _, p := range d.FanOutProgress {
				found = found || slices.ContainsFunc(d.CompletedPositions, func(c graph.NodePosition) bool {
					return c.NodeName == p.FanOutNodeName && slices.Equal(c.Namespace, p.Namespace)
				})
			}
			if f.Value.Kind != KindBool || found != f.Value.Bool {
				return fmt.Errorf("saved record: fan-out node in completed positions %v, want %s", found, f.Value.String())
			}
		case "fan_out_progress":
			if err := checkFanOutProgress(m, f.Value, d.FanOutProgress); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFanOutProgress matches {<node>: {instance_count, instances}}
// against the saved progress entries (top-level fan-outs: no lineage).
func checkFanOutProgress(m *matcher, want *Value, got []graph.FanOutProgress) error {
	for _, nf := range want.Fields {
		path := "saved_record_assertions.fan_out_progress." + nf.Key
		i := slices.IndexFunc(got, func(p graph.FanOutProgress) bool {
			return p.FanOutNodeName == nf.Key && len(p.EnclosingLineage) == 0
		})
		if i < 0 {
			return fmt.Errorf("%s: no progress saved for the fan-out (%d entries)", path, len(got))
		}
		p := got[i]
		for _, f := range nf.Value.Fields {
			switch f.Key {
			case "instance_count":
				if !scalarEqual(f.Value.Native(), p.InstanceCount) {
					return fmt.Errorf("%s.instance_count: want %s, got %d", path, f.Value.String(), p.InstanceCount)
				}
			case "instances":
				if len(f.Value.Items) != len(p.Instances) {
					return fmt.Errorf("%s.instances: want %d, got %d", path, len(f.Value.Items), len(p.Instances))
				}
				for j, w := range f.Value.Items {
					if err := checkInstance(m, fmt.Sprintf("%s.instances[%d]", path, j), w, p.Instances[j]); err != nil {
						return err
					}
				}
			default:
				return &DirectiveUnknownError{Name: "fan_out_progress." + f.Key, Pos: f.Pos}
			}
		}
	}
	return nil
}

func checkInstance(m *matcher, path string, want *Value, in graph.FanOutInstance) error {
	for _, f := range want.Fields {
		var err error
		switch f.Key {
		case "state":
			err = m.match(path+".state", f.Value.Native(), in.State, exact)
		case "state_one_of":
			if !slices.ContainsFunc(f.Value.Items, func(v *Value) bool { return scalarEqual(v.Native(), in.State) }) {
				err = fmt.Errorf("%s.state: %q is not one of %s", path, in.State, f.Value.String())
			}
		case "result":
			got, derr := decodeJSON(in.Result)
			if derr != nil {
				return derr
			}
			err = m.match(path+".result", f.Value.Native(), got, exact)
		case "result_is_error":
			err = m.match(path+".result_is_error", f.Value.Native(), in.ResultIsError, exact)
		case "result_present":
			if got := len(in.Result) > 0; f.Value.Kind != KindBool || got != f.Value.Bool {
				err = fmt.Errorf("%s.result_present: want %s, got %v", path, f.Value.String(), got)
			}
		case "completed_inner_positions":
			var got []any
			for _, p := range in.CompletedInnerPositions {
				got = append(got, map[string]any{"node_name": p.NodeName, "attempt_index": p.AttemptIndex})
			}
			err = m.match(path+".completed_inner_positions", f.Value.Native(), normalize(append([]any{}, got...)), subsetDeep)
		default:
			return &DirectiveUnknownError{Name: "instances." + f.Key, Pos: f.Pos}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// seededRecord builds the seeded_record's checkpoint: resumed after its
// last completed position (inside the subgraphs its namespace names), or
// at the entry node when it has none.
func (x *geExec) seededRecord(v *Value) (*graph.CheckpointRecord, error) {
	rec := &graph.CheckpointRecord{InvocationID: "seeded-invocation", CorrelationID: "seeded-correlation",
		SchemaVersion: x.outer.Schema().Version()}
	if sv, ok := v.Get("schema_version"); ok {
		s, err := versionString(sv, "seeded_record.schema_version")
		if err != nil {
			return nil, err
		}
		rec.SchemaVersion = s
	}
	enc := func(v *Value) (json.RawMessage, error) { return json.Marshal(v.Native()) }
	var err error
	if rec.State, err = enc(mustGet(v, "state")); err != nil {
		return nil, err
	}
	if ps, ok := v.Get("parent_states"); ok {
		for _, it := range ps.Items {
			raw, err := enc(it)
			if err != nil {
				return nil, err
			}
			rec.ParentStates = append(rec.ParentStates, raw)
		}
	}
	for key, dst := range map[string]any{"completed_positions": &rec.CompletedPositions, "fan_out_progress": &rec.FanOutProgress} {
		if fv, ok := v.Get(key); ok {
			raw, err := enc(fv)
			if err == nil {
				err = json.Unmarshal(raw, dst)
			}
			if err != nil {
				return nil, schemaErrorf(fv.Pos, "seeded_record.%s: %v", key, err)
			}
		}
	}
	if n := len(rec.CompletedPositions); n > 0 {
		last := rec.CompletedPositions[n-1]
		rec.Path = append(slices.Clone(last.Namespace), last.NodeName)
	} else {
		rec.Path, rec.Rerun = []string{x.gc.outer.entry}, true
	}
	if len(rec.ParentStates) != len(rec.Path)-1 {
		return nil, schemaErrorf(v.Pos, "seeded_record: %d parent states for path %v", len(rec.ParentStates), rec.Path)
	}
	return rec, nil
}

// resumeEvents returns the resumed run's node events.
func (x *geExec) resumeEvents(r *ckptResumed) []*eventRec {
	return x.pu.nodeEvents(r.res.InvocationID)
}

// instancesRun returns the outermost fan-out instance indices whose nodes
// ran in the resumed run.
func (x *geExec) instancesRun(r *ckptResumed) map[int]bool {
	out := map[int]bool{}
	for _, ev := range x.resumeEvents(r) {
		if ev.Phase != "started" {
			continue
		}
		for _, idx := range ev.FanOutIndexChain {
			if idx != nil {
				out[*idx] = true
				break
			}
		}
	}
	return out
}

// checkResumeExpected checks resume.expected.
func (x *geExec) checkResumeExpected(m *matcher, rv *Value, r *ckptResumed) error {
	exp, _ := rv.Get("expected")
	if exp == nil {
		return nil
	}
	ran := func(node string) bool {
		for _, ev := range x.resumeEvents(r) {
			if ev.NodeName == node && ev.Phase == "started" {
				return true
			}
		}
		return false
	}
	for _, f := range exp.Fields {
		switch f.Key {
		case "final_state":
			if err := x.matchCkptFinalState(m, f.Value, r.res.State); err != nil {
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
		case "instances_executed_during_resume", "instances_skipped_during_resume":
			run := x.instancesRun(r)
			want := f.Key == "instances_executed_during_resume"
			for _, it := range f.Value.Items {
				if it.Kind != KindInt {
					return schemaErrorf(it.Pos, "%s: indices must be integers", f.Key)
				}
				if run[int(it.Int)] != want {
					return fmt.Errorf("resume.expected.%s: instance %d ran=%v during the resume", f.Key, it.Int, !want)
				}
			}
			if want && len(run) != len(f.Value.Items) {
				return fmt.Errorf("resume.expected.%s: instances %v ran during the resume", f.Key, run)
			}
		case "migrations_run":
			if err := m.match("resume.expected.migrations_run", f.Value.Native(), normalize(stringsToAny(r.migs)), exact); err != nil {
				return err
			}
		case "successful_attempt_index_during_resume":
			got := -1
			for _, ev := range x.resumeEvents(r) {
				if ev.Phase == "completed" && !ev.HasError {
					got = ev.AttemptIndex
				}
			}
			if !scalarEqual(f.Value.Native(), got) {
				return fmt.Errorf("resume.expected.%s: want %s, got %d", f.Key, f.Value.String(), got)
			}
		}
	}
	return nil
}

// matchCkptFinalState matches a final state; a <field>_list_length key
// not naming a field asserts that list field's length.
func (x *geExec) matchCkptFinalState(m *matcher, want *Value, st graph.State) error {
	got := normalize(st).(map[string]any)
	rest := &Value{Kind: KindMap, Pos: want.Pos}
	for _, f := range want.Fields {
		if field, ok := cutSuffix(f.Key, "_list_length"); ok && !st.Schema().Has(f.Key) && st.Schema().Has(field) {
			l, _ := got[field].([]any)
			if !scalarEqual(f.Value.Native(), len(l)) {
				return fmt.Errorf("resume.expected.final_state.%s: want %s, got %d", f.Key, f.Value.String(), len(l))
			}
			delete(got, field)
			continue
		}
		rest.Fields = append(rest.Fields, f)
	}
	return x.matchFinalState(m, "resume.expected.final_state", rest, got)
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

// checkResumeInvariants checks resume.invariants.
func (x *geExec) checkResumeInvariants(rv *Value, r *ckptResumed) error {
	inv, _ := rv.Get("invariants")
	if inv == nil {
		return nil
	}
	cs := x.gc.ckpt
	for _, f := range inv.Fields {
		ok, err := x.resumeInvariant(cs, f, r)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("resume invariant %s = %s does not hold (original %s/%s, resumed %s/%s)",
				f.Key, f.Value.String(), r.first.id, r.first.corrID, r.res.InvocationID, r.res.CorrelationID)
		}
	}
	return nil
}

func (x *geExec) resumeInvariant(cs *ckptSpec, f *Field, r *ckptResumed) (bool, error) {
	want := f.Value
	isTrue := want.Kind == KindBool && want.Bool
	evs := x.resumeEvents(r)
	instanceStarts := func(idx int, node string) []*eventRec {
		var out []*eventRec
		for _, ev := range evs {
			if ev.Phase == "started" && ev.FanOutIndex != nil && *ev.FanOutIndex == idx && (node == "" || ev.NodeName == node) {
				out = append(out, ev)
			}
		}
		return out
	}
	list := func(field string) []any {
		l, _ := normalize(r.res.State).(map[string]any)[field].([]any)
		return l
	}
	noDup := func(field string) bool {
		l := list(field)
		for i := range l {
			for j := i + 1; j < len(l); j++ {
				if deepEqual(l[i], l[j]) {
					return false
				}
			}
		}
		return true
	}
	switch f.Key {
	case "resumed_invocation_id_differs_from_original":
		return isTrue && r.res.InvocationID != "" && r.res.InvocationID != r.first.id, nil
	case "resumed_correlation_id_matches_original":
		return isTrue && r.first.corrID != "" && r.res.CorrelationID == r.first.corrID, nil
	case "after_node_crash_rolls_node_forward":
		return isTrue && cs.crashAfter != "" && len(x.nodeStarts(evs, cs.crashAfter)) == 0, nil
	case "subgraph_re_entry_uses_parent_states", "inner_first_node_not_re_run":
		return isTrue && x.reenteredSubgraph(func(n string) bool { return len(x.nodeStarts(evs, n)) > 0 }), nil
	case "attempt_index_reset_to_zero_on_resume":
		starts := x.nodeStarts(evs, "")
		return isTrue && len(starts) > 0 && starts[0].AttemptIndex == 0, nil
	case "error_category_not":
		for _, c := range want.Items {
			if scalarEqual(c.Native(), string(errcat.Of(r.err))) {
				return false, nil
			}
		}
		return true, nil
	case "single_migration_invocation":
		return isTrue && len(r.migs) == 1, nil
	case "migration_count", "migration_invocation_count":
		return scalarEqual(want.Native(), len(r.migs)), nil
	case "migration_order_matches_chain":
		chain := make([]string, 0, len(cs.migrations))
		for _, m := range cs.migrations {
			chain = append(chain, m.from+"->"+m.to)
		}
		return isTrue && slices.Equal(r.migs, chain), nil
	case "migration_registry_not_consulted":
		return isTrue && len(r.migs) == 0, nil
	case "no_duplicate_results":
		return isTrue && noDup("results"), nil
	case "no_duplicate_error_entries":
		return isTrue && noDup("errors"), nil
	case "results_list_length":
		return scalarEqual(want.Native(), len(list("results"))), nil
	case "instance_1_attempt_index_on_resume":
		s := instanceStarts(1, "")
		return len(s) > 0 && scalarEqual(want.Native(), s[0].AttemptIndex), nil
	case "instance_1_resume_attempt_count":
		s := instanceStarts(1, "")
		if len(s) == 0 {
			return false, nil
		}
		return scalarEqual(want.Native(), len(instanceStarts(1, s[0].NodeName))), nil
	case "instance_1_executes_step_a_on_resume":
		return isTrue && len(instanceStarts(1, "step_a")) > 0, nil
	case "instance_1_executes_step_b_on_resume":
		return isTrue && len(instanceStarts(1, "step_b")) > 0, nil
	case "batching_scoped_to_fan_out_internal_saves_only":
		// Every save made outside a fan-out instance was written: the
		// record holds the fan-out node's completion (no progress left).
		rec, err := x.ckpt.base.Load(context.Background(), checkpoint.Key{InvocationID: r.res.InvocationID, Kind: checkpoint.KindCheckpoint})
		if err != nil {
			return false, err
		}
		d, err := graph.DecodeCheckpoint(rec)
		return isTrue && err == nil && !d.Rerun && len(d.FanOutProgress) == 0, nil
	case "degrade_slot_rolled_forward_unchanged":
		return isTrue && len(x.instancesRun(r)) == 0 && len(list("results")) == 1, nil
	case "inner_fan_out_progress_matched_per_enclosing_lineage",
		"each_outer_instance_skips_only_its_own_completed_inner_instances",
		"no_inner_instance_skipped_across_enclosing_instances",
		"legacy_unlineaged_entry_not_applied_to_nested_fan_out",
		"all_inner_instances_re_run_in_every_outer_instance":
		return isTrue && x.innerRunsMatchLineage(cs, evs), nil
	}
	return false, &DirectiveUnknownError{Name: "resume.invariants." + f.Key, Pos: f.Pos}
}

// nodeStarts returns the started events of node ("" = any) in evs.
func (x *geExec) nodeStarts(evs []*eventRec, node string) []*eventRec {
	var out []*eventRec
	for _, ev := range evs {
		if ev.Phase == "started" && (node == "" || ev.NodeName == node) {
			out = append(out, ev)
		}
	}
	return out
}

// innerRunsMatchLineage checks, for a nested fan-out resumed from a
// seeded record, that each outer instance re-ran exactly the inner
// instances its own lineage-matched entry did not complete (all of them
// when no entry matches).
func (x *geExec) innerRunsMatchLineage(cs *ckptSpec, evs []*eventRec) bool {
	var saved []graph.FanOutProgress
	if fp, ok := cs.seeded.Get("fan_out_progress"); ok {
		raw, _ := json.Marshal(fp.Native())
		if json.Unmarshal(raw, &saved) != nil {
			return false
		}
	}
	ran := map[[2]int]bool{} // {outer, inner}
	outers := map[int]bool{}
	for _, ev := range evs {
		if ev.Phase != "started" {
			continue
		}
		var idx []int
		for _, i := range ev.FanOutIndexChain {
			if i != nil {
				idx = append(idx, *i)
			}
		}
		if len(idx) >= 2 {
			ran[[2]int{idx[0], idx[1]}] = true
		}
		if len(idx) >= 1 {
			outers[idx[0]] = true
		}
	}
	for outer := range outers {
		var entry *graph.FanOutProgress
		for i := range saved {
			l := saved[i].EnclosingLineage
			if len(l) == 1 && l[0].FanOutIndex == outer {
				entry = &saved[i]
			}
		}
		for inner := 0; inner < 3; inner++ {
			completed := entry != nil && inner < len(entry.Instances) && entry.Instances[inner].State == graph.InstanceCompleted
			if ran[[2]int{outer, inner}] == completed {
				return false
			}
		}
	}
	return len(outers) > 0
}

// checkCaseInvariants checks the case-level invariants of a resume case
// (correlation and invocation ids across the two runs).
func (x *geExec) checkCaseInvariants(h *ckptHarness, r *ckptResumed) error {
	inv := x.gc.ckpt.invariants
	if inv == nil {
		return nil
	}
	cs := x.gc.ckpt
	saves := h.savesSnapshot()
	for _, f := range inv.Fields {
		isTrue := f.Value.Kind == KindBool && f.Value.Bool
		var ok bool
		switch f.Key {
		case "first_run_correlation_id":
			ok = scalarEqual(f.Value.Native(), r.first.corrID)
		case "resumed_run_correlation_id":
			ok = scalarEqual(f.Value.Native(), r.res.CorrelationID)
		case "correlation_id_uniform_across_both_runs", "no_new_correlation_id_generated_on_resume":
			ok = isTrue && r.res.CorrelationID == r.first.corrID
			for _, ev := range append(x.pu.nodeEvents(r.first.id), x.pu.nodeEvents(r.res.InvocationID)...) {
				ok = ok && ev.CorrelationID == r.first.corrID
			}
			for _, s := range saves {
				ok = ok && s.CorrelationID == r.first.corrID
			}
		case "first_and_resumed_invocation_ids_differ":
			ok = isTrue && r.first.id != r.res.InvocationID
		case "saved_record_correlation_id":
			ok = len(saves) > 0
			for _, s := range saves {
				ok = ok && scalarEqual(f.Value.Native(), s.CorrelationID)
			}
		case "first_run_correlation_id_is_uuidv4":
			ok = isTrue && uuidV4Re.MatchString(r.first.corrID)
		case "resumed_run_correlation_id_matches_first":
			ok = isTrue && r.res.CorrelationID == r.first.corrID
		case "first_run_invocation_id":
			ok = scalarEqual(f.Value.Native(), r.first.id)
		case "resumed_run_invocation_id_is_fresh_uuidv4":
			ok = isTrue && uuidV4Re.MatchString(r.res.InvocationID) && r.res.InvocationID != r.first.id
		case "resumed_run_invocation_id_not_caller_supplied":
			ok = isTrue
			if c, has := cs.resume.Get("caller_invocation_id"); has {
				ok = r.res.InvocationID != c.Str
			}
		default:
			return &DirectiveUnknownError{Name: "invariants." + f.Key, Pos: f.Pos}
		}
		if !ok {
			return fmt.Errorf("invariant %s = %s does not hold (first %s/%s, resumed %s/%s)",
				f.Key, f.Value.String(), r.first.id, r.first.corrID, r.res.InvocationID, r.res.CorrelationID)
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
