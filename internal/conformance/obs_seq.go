package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/armature-go/armature/graph"
)

// Queryable observer lifecycle (observability §9.4, fixture 049):
// sequential_invocations runs the case's invocations one after the
// other with caller invocation ids, the queryable observers persisting
// across them; a per_invocation_accumulator observer keeps a bucket of
// node events per invocation id until a node drops it explicitly
// (then_drop_for_current_invocation); per_invocation checks each
// invocation's captured fields.

var (
	seqKeys    = vocab("observer_persists_across invocations")
	seqInvKeys = vocab("name caller_invocation_id")
)

// seqInv is one of the sequential invocations.
type seqInv struct{ name, invocationID string }

// accumulator is a per_invocation_accumulator queryable observer.
type accumulator struct {
	mu      sync.Mutex
	buckets map[string][]any
	// dropped counts explicit drops; late counts events that arrived
	// for an invocation after its bucket was dropped (kept: completion
	// does not drop a bucket).
	dropped map[string]bool
	late    int
}

func (a *accumulator) observe(_ context.Context, ev graph.Event) error {
	e, ok := ev.(*graph.NodeEvent)
	if !ok {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dropped[e.InvocationID] {
		a.late++
	}
	a.buckets[e.InvocationID] = append(a.buckets[e.InvocationID], fmt.Sprintf("%s/%s/%s", e.InvocationID, e.NodeName, e.Phase))
	return nil
}

// bucket is get_bucket_for_current_invocation; ok is false when absent.
func (a *accumulator) bucket(id string) ([]any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.buckets[id]
	return append([]any(nil), b...), ok
}

// drop is drop_for_current_invocation.
func (a *accumulator) drop(id string) {
	a.mu.Lock()
	delete(a.buckets, id)
	a.dropped[id] = true
	a.mu.Unlock()
}

// seqCaseKey parses sequential_invocations.
func (om *obsMeta) seqCaseKey(p *geParser, f *Field) error {
	if err := p.checkKeys(f.Value, f.Key, seqKeys); err != nil {
		return err
	}
	invs, ok := f.Value.Get("invocations")
	if !ok || invs.Kind != KindList || len(invs.Items) == 0 {
		return schemaErrorf(f.Value.Pos, "sequential_invocations needs invocations")
	}
	for _, it := range invs.Items {
		if err := p.checkKeys(it, "sequential invocation", seqInvKeys); err != nil {
			return err
		}
		name, err := str(mustGet(it, "name"), "invocation name")
		if err != nil {
			return err
		}
		si := seqInv{name: name}
		if id, ok := it.Get("caller_invocation_id"); ok {
			if si.invocationID, err = str(id, "caller_invocation_id"); err != nil {
				return err
			}
		}
		om.seq = append(om.seq, si)
	}
	return nil
}

// accumulatorDirective builds the accumulator node directives:
// capture_queryable_observer_read_into (get_bucket_for_current_invocation),
// then_drop_for_current_invocation and then_assert_bucket_absent_into.
func (om *obsMeta) accumulatorDirective(p *geParser, d *Field) (*geStep, error) {
	acc := func(name string) (*accumulator, error) {
		if a := om.accumulators[name]; a != nil {
			return a, nil
		}
		return nil, fmt.Errorf("conformance: no accumulator %q", name)
	}
	switch d.Key {
	case "then_drop_for_current_invocation":
		if err := p.checkKeys(d.Value, d.Key, vocab("observer_name")); err != nil {
			return nil, err
		}
		name, err := str(mustGet(d.Value, "observer_name"), "observer_name")
		if err != nil {
			return nil, err
		}
		return &geStep{kind: stepCustom, pos: d.Pos, custom: func(ctx context.Context, _ graph.State, _ graph.Update) error {
			a, err := acc(name)
			if err != nil {
				return err
			}
			a.drop(graph.InvocationID(ctx))
			return nil
		}}, nil
	case "then_assert_bucket_absent_into":
		field, err := str(d.Value, d.Key)
		if err != nil {
			return nil, err
		}
		return &geStep{kind: stepCustom, pos: d.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
			absent := true
			for _, a := range om.accumulators {
				if _, ok := a.bucket(graph.InvocationID(ctx)); ok {
					absent = false
				}
			}
			upd[field] = absent
			return nil
		}}, nil
	}
	// capture_queryable_observer_read_into with
	// get_bucket_for_current_invocation.
	name, _ := str(mustGet(d.Value, "observer_name"), "observer_name")
	field, err := str(mustGet(d.Value, "state_field"), "state_field")
	if err != nil {
		return nil, err
	}
	return &geStep{kind: stepCustom, pos: d.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
		a, err := acc(name)
		if err != nil {
			return err
		}
		// The consumer lets delivery catch up with the events emitted
		// so far (graph.Graph.DrainEventsFor), so the bucket holds them.
		if _, err := om.exec.outer.DrainEventsFor(ctx, graph.InvocationID(ctx)); err != nil {
			return err
		}
		b, _ := a.bucket(graph.InvocationID(ctx))
		upd[field] = map[string]any{"events": b}
		return nil
	}}, nil
}

// perInvocation checks expected.per_invocation for the run at index i.
func (om *obsMeta) perInvocation(i int, final map[string]any) error {
	if om.perInv == nil || i >= len(om.seq) {
		return nil
	}
	want, ok := om.perInv.Get(om.seq[i].name)
	if !ok {
		return nil
	}
	events := func(f map[string]any) []any {
		b, _ := f["captured_bucket"].(map[string]any)
		ev, _ := b["events"].([]any)
		return ev
	}
	om.captured = append(om.captured, events(final))
	var errs []error
	for _, f := range want.Fields {
		var got bool
		why := ""
		switch f.Key {
		case "captured_bucket_is_non_empty":
			got = len(events(final)) > 0
		case "bucket_after_drop_is_absent":
			got = final["bucket_after_drop_is_absent"] == true
		case "captured_bucket_disjoint_from_invocation_1":
			got = len(om.captured) > 1
			for _, e := range om.captured[len(om.captured)-1] {
				for _, e1 := range om.captured[0] {
					if e == e1 {
						got, why = false, fmt.Sprintf("both captured %v", e)
					}
				}
			}
		default:
			return notImplemented(capObs + " per_invocation " + f.Key)
		}
		if err := compareBool(f.Value, got, why); err != nil {
			errs = append(errs, fmt.Errorf("per_invocation.%s.%s: %w", om.seq[i].name, f.Key, err))
		}
	}
	return errors.Join(errs...)
}

// accumulatorInvariants check the lifecycle over the runs.
var accumulatorInvariants = map[string]func(om *obsMeta, runs []*obsRun) (bool, string){
	// Events after the explicit drop (the reading node's completed
	// event) started a new bucket: completion dropped nothing.
	"no_auto_drop_on_completion_signal": func(om *obsMeta, _ []*obsRun) (bool, string) {
		for _, a := range om.accumulators {
			a.mu.Lock()
			late := a.late
			a.mu.Unlock()
			return late > 0, "no event after a drop"
		}
		return false, "no accumulator"
	},
	"explicit_drop_removes_bucket": func(_ *obsMeta, runs []*obsRun) (bool, string) {
		for _, r := range runs {
			if f, _ := r.FinalState.(map[string]any); f["bucket_after_drop_is_absent"] != true {
				return false, r.Name + ": the bucket was still there after the drop"
			}
		}
		return len(runs) > 0, "no runs"
	},
	"per_invocation_id_bucket_isolation": func(om *obsMeta, runs []*obsRun) (bool, string) {
		for i, evs := range om.captured {
			for _, e := range evs {
				s, _ := e.(string)
				if i < len(runs) && (len(s) <= len(runs[i].InvocationID) || s[:len(runs[i].InvocationID)+1] != runs[i].InvocationID+"/") {
					return false, fmt.Sprintf("%s's bucket holds %v", runs[i].Name, e)
				}
			}
		}
		return len(om.captured) > 1, "fewer than two captured buckets"
	},
	"accumulator_exposes_drop_method": func(om *obsMeta, _ []*obsRun) (bool, string) {
		for _, a := range om.accumulators {
			a.mu.Lock()
			n := len(a.dropped)
			a.mu.Unlock()
			return n > 0, "no drop"
		}
		return false, "no accumulator"
	},
}
