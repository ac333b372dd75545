package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/armature-go/armature/graph"
)

// The queryable observer pattern (observability §9) in the observability
// suite: queryable_observers declares observers exposing read methods
// (kind event_counter: get_count, the node events received so far),
// attached to each invocation; a node's capture_queryable_observer_read_into
// calls one and stores the result; final_state_bounds and the pattern's
// invariants check the reads.

var queryReadKeys = vocab("observer_name method state_field")

// eventCounter is an event_counter queryable observer: it counts the
// node events it receives. Its read method is safe against the
// concurrent delivery goroutine (§9.2).
// A typed_event_counter also counts by phase (get_snapshot: the total
// and the per-phase breakdown, read together).
type eventCounter struct {
	typed  bool
	mu     sync.Mutex
	n      int
	byType map[string]int
}

func (c *eventCounter) observe(_ context.Context, ev graph.Event) error {
	if e, ok := ev.(*graph.NodeEvent); ok {
		c.mu.Lock()
		c.n++
		c.byType[string(e.Phase)]++
		c.mu.Unlock()
	}
	return nil
}

// snapshot is the get_snapshot read method: one consistent view.
func (c *eventCounter) snapshot() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[string]any{}
	for k, v := range c.byType {
		by[k] = v
	}
	return map[string]any{"total": c.n, "by_type": by}
}

// count is the get_count read method.
func (c *eventCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// queryRead is one read a node made.
type queryRead struct {
	observer string
	value    int
	snapshot map[string]any
}

// queryCaseKey parses queryable_observers.
func (om *obsMeta) queryCaseKey(p *geParser, f *Field) error {
	if f.Value.Kind != KindList {
		return schemaErrorf(f.Value.Pos, "queryable_observers must be a list")
	}
	for _, it := range f.Value.Items {
		if err := p.checkKeys(it, "queryable observer", vocab("name kind persists_across_invocations")); err != nil {
			return err
		}
		name, err := str(mustGet(it, "name"), "queryable observer name")
		if err != nil {
			return err
		}
		kind, err := str(mustGet(it, "kind"), "queryable observer kind")
		if err != nil {
			return err
		}
		if kind == "per_invocation_accumulator" {
			om.accumulators[name] = &accumulator{buckets: map[string][]any{}, dropped: map[string]bool{}}
			continue
		}
		if kind != "event_counter" && kind != "typed_event_counter" {
			return notImplemented(capObs + " queryable observer kind " + kind)
		}
		om.counters[name] = &eventCounter{typed: kind == "typed_event_counter", byType: map[string]int{}}
	}
	return nil
}

// queryDirective builds capture_queryable_observer_read_into.
func (om *obsMeta) queryDirective(p *geParser, d *Field) (*geStep, error) {
	if err := p.checkKeys(d.Value, d.Key, queryReadKeys); err != nil {
		return nil, err
	}
	name, err := str(mustGet(d.Value, "observer_name"), "observer_name")
	if err != nil {
		return nil, err
	}
	method, err := str(mustGet(d.Value, "method"), "method")
	if err != nil {
		return nil, err
	}
	if method == "get_bucket_for_current_invocation" {
		return om.accumulatorDirective(p, d)
	}
	if method != "get_count" && method != "get_snapshot" {
		return nil, notImplemented(capObs + " queryable observer method " + method)
	}
	field, err := str(mustGet(d.Value, "state_field"), "state_field")
	if err != nil {
		return nil, err
	}
	return &geStep{kind: stepCustom, pos: d.Pos, custom: func(_ context.Context, _ graph.State, upd graph.Update) error {
		c := om.counters[name]
		if c == nil {
			return fmt.Errorf("conformance: no queryable observer %q", name)
		}
		if method == "get_snapshot" {
			if !c.typed {
				return fmt.Errorf("conformance: %s has no get_snapshot", name)
			}
			snap := c.snapshot()
			om.reads.mu.Lock()
			om.queryReads = append(om.queryReads, queryRead{observer: name, value: snap["total"].(int), snapshot: snap})
			om.reads.mu.Unlock()
			upd[field] = snap
			return nil
		}
		v := c.count()
		om.reads.mu.Lock()
		om.queryReads = append(om.queryReads, queryRead{observer: name, value: v})
		om.reads.mu.Unlock()
		upd[field] = v
		return nil
	}}, nil
}

// queryOptions attaches the queryable observers to an invocation.
func (om *obsMeta) queryOptions() []graph.InvokeOption {
	var opts []graph.InvokeOption
	for _, name := range sortedKeys(om.counters) {
		opts = append(opts, graph.WithObserver(om.counters[name].observe))
	}
	for _, name := range sortedKeys(om.accumulators) {
		opts = append(opts, graph.WithObserver(om.accumulators[name].observe))
	}
	return opts
}

// finalStateBounds checks final_state_bounds: {field: {min, max}}.
func finalStateBounds(want *Value, final map[string]any) error {
	var errs []error
	for _, f := range want.Fields {
		got, ok := toFloat(normalize(final[f.Key]))
		if !ok {
			errs = append(errs, fmt.Errorf("final_state_bounds.%s: %s is not a number", f.Key, formatValue(final[f.Key])))
			continue
		}
		if lo, ok := f.Value.Get("min"); ok {
			if l, ok := toFloat(normalize(lo.Native())); !ok {
				errs = append(errs, fmt.Errorf("final_state_bounds.%s: min %s is not a number", f.Key, formatValue(lo.Native())))
			} else if got < l {
				errs = append(errs, fmt.Errorf("final_state_bounds.%s: %v < min %v", f.Key, got, l))
			}
		}
		if hi, ok := f.Value.Get("max"); ok {
			if h, ok := toFloat(normalize(hi.Native())); !ok {
				errs = append(errs, fmt.Errorf("final_state_bounds.%s: max %s is not a number", f.Key, formatValue(hi.Native())))
			} else if got > h {
				errs = append(errs, fmt.Errorf("final_state_bounds.%s: %v > max %v", f.Key, got, h))
			}
		}
	}
	return errors.Join(errs...)
}

// queryInvariants check the reads against the runs.
var queryInvariants = map[string]func(om *obsMeta, runs []*obsRun) (bool, string){
	// The observer was attached, received events and a node consumed a
	// read: after the drain it has every node event (two per node).
	"observer_attach_emit_consume_cycle_works": func(om *obsMeta, runs []*obsRun) (bool, string) {
		want := 0
		for _, r := range runs {
			want += 2 * len(r.Path)
		}
		for name, c := range om.counters {
			if got := c.count(); got != want {
				return false, fmt.Sprintf("%s counted %d events, want %d", name, got, want)
			}
		}
		return len(om.queryReads) > 0, "no read"
	},
	"snapshot_total_equals_sum_of_breakdown": func(om *obsMeta, _ []*obsRun) (bool, string) {
		n := 0
		for _, r := range om.queryReads {
			if r.snapshot == nil {
				continue
			}
			n++
			sum := 0
			for _, v := range r.snapshot["by_type"].(map[string]any) {
				sum += v.(int)
			}
			if sum != r.value {
				return false, fmt.Sprintf("total %d, breakdown sums to %d", r.value, sum)
			}
		}
		return n > 0, "no snapshot read"
	},
	// The read ran (it would have failed the node had it raised).
	"read_does_not_raise_on_concurrent_write": func(om *obsMeta, runs []*obsRun) (bool, string) {
		for _, r := range runs {
			if r.Err != nil {
				return false, r.Err.Error()
			}
		}
		return len(om.queryReads) > 0, "no read"
	},
	"read_returns_non_negative_integer": func(om *obsMeta, _ []*obsRun) (bool, string) {
		for _, r := range om.queryReads {
			if r.value < 0 {
				return false, fmt.Sprintf("read %d", r.value)
			}
		}
		return len(om.queryReads) > 0, "no read"
	},
	// A read never exceeds the events emitted before it: the reading
	// node's started event is the last (2*position+1 events).
	"read_is_consistent_no_torn_view": func(om *obsMeta, runs []*obsRun) (bool, string) {
		for _, r := range om.queryReads {
			if max := 2*len(runs[0].Path) - 1; r.value > max {
				return false, fmt.Sprintf("read %d > %d events emitted", r.value, max)
			}
		}
		return len(om.queryReads) > 0, "no read"
	},
	// The reads change neither routing (every declared node ran, in
	// order) nor the state beyond the field they are stored in.
	"observer_does_not_mutate_state_or_influence_routing": func(_ *obsMeta, runs []*obsRun) (bool, string) {
		for _, r := range runs {
			if r.Status != graph.Completed.String() {
				return false, fmt.Sprintf("%s ended %s", r.Name, r.Status)
			}
		}
		return true, ""
	},
}

func (om *obsMeta) checkQueryInvariant(name string, want *Value, runs []*obsRun) (bool, error) {
	inv, ok := queryInvariants[name]
	if !ok {
		return false, nil
	}
	got, why := inv(om, runs)
	if got {
		why = ""
	}
	return true, compareBool(want, got, why)
}
