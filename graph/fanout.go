package graph

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/armature-go/armature/errcat"
)

// ErrorPolicy says how a fan-out or parallel-branches node handles a
// failing instance or branch (pipeline-utilities §9.5, §11.5).
type ErrorPolicy string

// Error policies. They are wire identifiers and must not change.
const (
	// FailFast cancels the siblings of the first failure and fails the
	// node with it (the default).
	FailFast ErrorPolicy = "fail_fast"
	// Collect runs everything to completion, merges the successes and
	// records the failures in the errors field; the node never fails.
	Collect ErrorPolicy = "collect"
)

// OnEmpty says what a fan-out does with zero instances.
type OnEmpty string

// Empty fan-out behaviors. They are wire identifiers and must not change.
const (
	// OnEmptyRaise fails the node with fan_out_empty (the default).
	OnEmptyRaise OnEmpty = "raise"
	// OnEmptyNoop runs nothing and merges empty contributions.
	OnEmptyNoop OnEmpty = "noop"
)

// IntSource resolves an integer from the state at fan-out entry.
type IntSource func(s State) (int, error)

// Fixed returns an IntSource that always resolves to n.
func Fixed(n int) IntSource { return func(State) (int, error) { return n, nil } }

// DefaultConcurrency is the fan-out concurrency bound when none is set.
const DefaultConcurrency = 10

// MaxFanOutCount bounds the instances a Count may resolve: a larger
// count is fan_out_invalid_count (every instance's state is built before
// any starts). A fan-out over ItemsField runs once per item of a list
// already in memory.
const MaxFanOutCount = 1 << 20

// callSource resolves an IntSource, a panic in it recovered as an error
// (the fan-out then fails as its node would, node_exception).
func callSource(src IntSource, s State) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, newPanicError(p)
		}
	}()
	return src(s)
}

// FanOut configures a fan-out node (pipeline-utilities §9): Subgraph runs
// once per item of ItemsField (or Count times), up to Concurrency at a
// time, and each instance's CollectField is gathered into TargetField in
// instance order, through TargetField's reducer.
type FanOut struct {
	// Subgraph is run once per instance, each on a fresh state.
	Subgraph *Graph
	// ItemsField (a parent list field) gives one instance per item,
	// assigned to the subgraph's ItemField. Alternatively Count gives the
	// number of instances. Exactly one of ItemsField and Count is set.
	ItemsField string
	ItemField  string
	Count      IntSource
	// CollectField is the subgraph field collected from each instance
	// into the parent's TargetField.
	CollectField string
	TargetField  string
	// Concurrency bounds the instances running at once (default 10);
	// Unbounded removes the bound.
	Concurrency IntSource
	Unbounded   bool
	// ErrorPolicy is FailFast (default) or Collect. With Collect, failed
	// instances are recorded in ErrorsField (a parent list field), when
	// set, as {"fan_out_index", "category", "message"} records.
	ErrorPolicy ErrorPolicy
	ErrorsField string
	// OnEmpty is OnEmptyRaise (default) or OnEmptyNoop.
	OnEmpty OnEmpty
	// CountField, when set, receives the number of instances.
	CountField string
	// Inputs copies parent fields into every instance (subgraph field →
	// parent field); ExtraOutputs merges subgraph fields of every instance
	// into parent fields (parent field → subgraph field), in instance
	// order.
	Inputs       map[string]string
	ExtraOutputs map[string]string
	// InstanceMiddleware wraps each instance's whole subgraph run; it
	// receives the instance's initial state and returns the instance's
	// contribution in subgraph field names (CollectField and the
	// ExtraOutputs sources). Retry here re-runs the whole instance.
	InstanceMiddleware []Middleware
}

// AddFanOut adds a fan-out node.
func (b *Builder) AddFanOut(name string, cfg FanOut, opts ...NodeOption) *Builder {
	if cfg.Subgraph == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, name, "", "fan-out node %q has a nil subgraph", name))
		return b
	}
	c := cfg
	c.Inputs, c.ExtraOutputs = cloneMap(cfg.Inputs), cloneMap(cfg.ExtraOutputs)
	c.InstanceMiddleware = append([]Middleware(nil), cfg.InstanceMiddleware...)
	return b.add(applyOptions(&node{name: name, fan: &c}, opts))
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkFanOut validates a fan-out node and returns its round-trip
// warnings.
func checkFanOut(parent *Schema, n *node) ([]Warning, error) {
	f, sub := n.fan, n.fan.Subgraph.schema
	bad := func(cat errcat.Category, field, format string, args ...any) error {
		return compileErr(cat, n.name, field, "fan-out node %q: "+format, append([]any{n.name}, args...)...)
	}
	undeclared := func(side, field string) error {
		return bad(errcat.MappingReferencesUndeclaredField, field, "field %q is not declared in the %s schema", field, side)
	}
	switch {
	case (f.ItemsField == "") == (f.Count == nil):
		return nil, bad(errcat.FanOutCountModeAmbiguous, "", "set exactly one of ItemsField and Count")
	case f.Count != nil && f.ItemField != "":
		return nil, bad(errcat.FanOutCountModeAmbiguous, f.ItemField, "ItemField applies to ItemsField mode only")
	case f.ItemsField != "" && f.ItemField == "":
		return nil, bad(errcat.MappingReferencesUndeclaredField, "", "ItemsField mode needs an ItemField")
	case f.CollectField == "" || f.TargetField == "":
		return nil, bad(errcat.MappingReferencesUndeclaredField, "", "CollectField and TargetField are required")
	}
	for _, pf := range []string{f.ItemsField, f.TargetField, f.ErrorsField, f.CountField} {
		if pf != "" && !parent.Has(pf) {
			return nil, undeclared("parent", pf)
		}
	}
	for _, sf := range []string{f.ItemField, f.CollectField} {
		if sf != "" && !sub.Has(sf) {
			return nil, undeclared("subgraph", sf)
		}
	}
	for _, sf := range sortedKeys(f.Inputs) {
		if !sub.Has(sf) {
			return nil, undeclared("subgraph", sf)
		}
		if !parent.Has(f.Inputs[sf]) {
			return nil, undeclared("parent", f.Inputs[sf])
		}
	}
	for _, pf := range sortedKeys(f.ExtraOutputs) {
		if !parent.Has(pf) {
			return nil, undeclared("parent", pf)
		}
		if !sub.Has(f.ExtraOutputs[pf]) {
			return nil, undeclared("subgraph", f.ExtraOutputs[pf])
		}
	}
	if f.ItemsField != "" && !isListType(parent.Type(f.ItemsField)) {
		return nil, bad(errcat.FanOutFieldNotList, f.ItemsField, "items field %q has type %s, not a list", f.ItemsField, parent.Type(f.ItemsField))
	}
	if f.ErrorsField != "" && !isListType(parent.Type(f.ErrorsField)) {
		return nil, bad(errcat.MappingReferencesUndeclaredField, f.ErrorsField, "errors field %q must be a list field", f.ErrorsField)
	}
	if f.CountField != "" && !isIntType(parent.Type(f.CountField)) {
		return nil, bad(errcat.MappingReferencesUndeclaredField, f.CountField, "count field %q must be an int field", f.CountField)
	}
	switch f.ErrorPolicy {
	case "", FailFast, Collect:
	default:
		return nil, bad(errcat.InvalidGraph, "", "unknown error policy %q", f.ErrorPolicy)
	}
	switch f.OnEmpty {
	case "", OnEmptyRaise, OnEmptyNoop:
	default:
		return nil, bad(errcat.InvalidGraph, "", "unknown on_empty %q", f.OnEmpty)
	}
	for _, m := range f.InstanceMiddleware {
		if m == nil {
			return nil, bad(errcat.InvalidGraph, "", "nil instance middleware")
		}
		if fi, ok := m.(*FailureIsolation); ok {
			if d, static := fi.staticDegraded(); static {
				if _, ok := d[f.CollectField]; !ok {
					return nil, bad(errcat.FanOutDegradedUpdateMissingCollectField, f.CollectField,
						"the static degraded update of instance failure isolation %q does not set collect field %q", fi.cfg.EventName, f.CollectField)
				}
			}
		}
	}
	// Round trips: through Inputs/ExtraOutputs on one subgraph field, or
	// the collect field seeded from the target field.
	var trips []string
	for _, pf := range sortedKeys(f.ExtraOutputs) {
		sf := f.ExtraOutputs[pf]
		if f.Inputs[sf] == pf {
			trips = append(trips, pf)
		}
	}
	if f.Inputs[f.CollectField] == f.TargetField ||
		(f.ItemsField != "" && f.ItemField == f.CollectField && f.ItemsField == f.TargetField) {
		trips = append(trips, f.TargetField)
	}
	return roundTripWarnings(parent, n.name, trips), nil
}

func isListType(t Type) bool {
	switch t := t.(type) {
	case listType:
		return true
	case reflectTyped:
		return t.reflectType().Kind() == reflect.Slice
	}
	return false
}

func isIntType(t Type) bool {
	switch t := t.(type) {
	case scalarType:
		return t.kind == "int"
	case reflectTyped:
		switch t.reflectType().Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return true
		}
	}
	return false
}

// reflectTyped is implemented by the types of Go-typed fields.
type reflectTyped interface{ reflectType() reflect.Type }

func (goType[T]) reflectType() reflect.Type { return reflect.TypeFor[T]() }

// unitResult is the outcome of one fan-out instance or branch.
type unitResult struct {
	upd Update
	err error
	ran bool
}

// runUnits runs n units on a pool of at most limit goroutines (limit <= 0:
// one per unit). Units start in index order: unit i+1 is handed out only
// after unit i emitted its first event or finished. Under FailFast the
// first failure cancels the context of the others and no further unit
// starts. It returns when every started unit has returned.
func runUnits(ctx context.Context, n, limit int, policy ErrorPolicy, run func(ctx context.Context, i int, started *startSignal) (Update, error)) (results []unitResult, first int) {
	results = make([]unitResult, n)
	first = -1
	if n == 0 {
		return results, first
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := n
	if limit > 0 && limit < n {
		workers = limit
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		jobs = make(chan int)
		sigs = make([]startSignal, n)
		grp  = unitGroup{failFast: policy != Collect}
	)
	for i := range sigs {
		sigs[i].grp, sigs[i].idx = &grp, i
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if sigs[i].stopped() {
					sigs[i].finish() // a unit failed (fail_fast): this one never starts
					continue
				}
				u, err := run(ctx, i, &sigs[i])
				sigs[i].finish()
				mu.Lock()
				results[i] = unitResult{upd: u, err: err, ran: true}
				if err != nil && policy != Collect {
					sigs[i].failed()
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
dispatch:
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		sigs[i].ch = make(chan struct{})
		select {
		case jobs <- i:
		case <-ctx.Done():
			break dispatch
		}
		select {
		case <-sigs[i].ch:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(jobs)
	wg.Wait()
	first = int(grp.first.Load()) - 1
	return results, first
}

// runFanOut is the work of a fan-out node.
func (d *dispatchCtx) runFanOut(ctx context.Context, s State) (Update, error) {
	n, f := d.n, d.n.fan
	sub := f.Subgraph
	fc := &FanOutConfig{ErrorPolicy: string(orDefault(f.ErrorPolicy, FailFast)), ParentNodeName: n.name}
	if sub != nil {
		fc.SubgraphName = sub.name
	}

	var items []any
	count, err := 0, error(nil)
	if f.ItemsField != "" {
		v, _ := s.Get(f.ItemsField)
		if items, err = asAnyList(v); err != nil {
			err = errcat.Wrap(errcat.FanOutFieldNotList, fmt.Sprintf("items field %q", f.ItemsField), err)
		}
		count = len(items)
	} else {
		count, err = callSource(f.Count, s)
		switch {
		case err == nil && count < 0:
			err = errcat.New(errcat.FanOutInvalidCount, fmt.Sprintf("count resolved to %d", count))
		case err == nil && count > MaxFanOutCount:
			// Every instance gets its state before any starts: a count
			// from state or input must not take the process's memory.
			err = errcat.New(errcat.FanOutInvalidCount, fmt.Sprintf("count resolved to %d, more than MaxFanOutCount (%d)", count, MaxFanOutCount))
			count = 0
		}
	}
	fc.ItemCount = max(count, 0)
	limit := 0
	if err == nil && !f.Unbounded {
		limit = DefaultConcurrency
		if f.Concurrency != nil {
			limit, err = callSource(f.Concurrency, s)
			if err == nil && limit <= 0 {
				err = errcat.New(errcat.FanOutInvalidConcurrency, fmt.Sprintf("concurrency resolved to %d", limit))
			}
		}
		if err == nil {
			fc.Concurrency = &limit
		}
	}
	step, attempt := d.begin(ctx, s, fc, nil)
	fail := func(cat errcat.Category, cause error) error {
		return d.failPending(step, attempt, s, d.fr.fail(cat, n, s, cause), fc, nil)
	}
	// Configuration failures are node_exception carriers whose cause
	// carries the fan-out category (pipeline-utilities §9.1, §9.2).
	if err != nil {
		return nil, fail(errcat.NodeException, err)
	}
	if count == 0 && orDefault(f.OnEmpty, OnEmptyRaise) == OnEmptyRaise {
		return nil, fail(errcat.NodeException, errcat.New(errcat.FanOutEmpty, "fan-out has no instances and on_empty is raise"))
	}

	// Checkpointing: the fan-out's progress, and on a resumed run the
	// saved progress it continues (whose instance count must match).
	var (
		fo   *liveFanOut
		skip []bool
	)
	if d.fr.inv.ckpt != nil {
		var saved *FanOutProgress
		fo, saved = d.enterFanOut(count)
		if saved != nil && saved.InstanceCount != count {
			return nil, fail(errcat.CheckpointRecordInvalid, fmt.Errorf(
				"the checkpoint saved %d instances of fan-out %q, the resumed run resolves %d", saved.InstanceCount, n.name, count))
		}
		if saved != nil && len(saved.Instances) > saved.InstanceCount {
			return nil, fail(errcat.CheckpointRecordInvalid, fmt.Errorf(
				"the checkpoint holds %d instance records for the %d instances of fan-out %q", len(saved.Instances), saved.InstanceCount, n.name))
		}
		if fo != nil {
			skip = make([]bool, count)
			for i := range skip {
				skip[i] = fo.cur[i].State == InstanceCompleted
			}
		}
	}

	// Build every instance's initial state before starting any.
	inits := make([]State, count)
	for i := range inits {
		in := make(Update, len(f.Inputs)+1)
		for sf, pf := range f.Inputs {
			in[sf], _ = s.Get(pf)
		}
		if items != nil {
			in[f.ItemField] = items[i]
		}
		st, err := sub.schema.New(in)
		if err != nil {
			return nil, fail(errcat.StateValidationError, fmt.Errorf("instance %d: %w", i, err))
		}
		inits[i] = st
	}
	extraSrc := make([]string, 0, len(f.ExtraOutputs))
	for _, pf := range sortedKeys(f.ExtraOutputs) {
		extraSrc = append(extraSrc, f.ExtraOutputs[pf])
	}
	base := d.fr.child(sub, n.name, s, nil, nil)
	if f.ErrorPolicy == Collect {
		base.noSuspend = fmt.Sprintf("an instance of collect-mode fan-out %q", n.name)
	}
	indices := make([]int, count)
	results, first := runUnits(ctx, count, limit, f.ErrorPolicy, func(ctx context.Context, i int, started *startSignal) (_ Update, err error) {
		defer recoverSuspend(&err)
		if skip != nil && skip[i] {
			// Saved by the run this one resumes: rolled forward, not re-run.
			r, err := restoreInstance(f, fo.cur[i], extraSrc)
			if err != nil {
				return nil, &CheckpointError{cat: errcat.CheckpointRecordInvalid, InvocationID: d.fr.inv.id,
					Err: fmt.Errorf("fan-out %q instance %d: %w", n.name, i, err)}
			}
			return r.upd, r.err
		}
		indices[i] = i
		fr := base.instance(&indices[i], started)
		if fo != nil {
			fr.inst, fr.instTop = &instRef{fo: fo, i: i}, true
		}
		uctx := &scopeCtx{Context: ctx, sc: scope{inv: fr.inv, fr: fr, state: inits[i]}}
		uctx.ownMeta(ctx)
		inner := func(ctx context.Context, is State) (Update, error) {
			uctx.sc.lastAttempt = AttemptIndex(ctx)
			if fr.inst != nil {
				fr.inst.restart(fr.inv.ckpt)
			}
			final, err := sub.run(ctx, fr, is)
			if err != nil {
				return nil, err
			}
			u := make(Update, 1+len(extraSrc))
			u[f.CollectField], _ = final.Get(f.CollectField)
			for _, sf := range extraSrc {
				u[sf], _ = final.Get(sf)
			}
			return u, nil
		}
		u, err := runChain(uctx, f.InstanceMiddleware, inits[i], inner)
		if fo != nil {
			if serr := d.instanceDone(ctx, fo, i, u, err, extraSrc); serr != nil && err == nil {
				return nil, serr
			}
		}
		return u, err
	})
	if first >= 0 {
		if sig, ok := results[first].err.(*suspendSignal); ok {
			d.rethrowSuspend(sig, "fan_out_index", first)
		}
		idx := first
		ne := d.fr.failFor(n, s, results[first].err)
		ne.FanOutIndex = &idx
		return nil, d.failPending(step, attempt, s, ne, fc, nil)
	}
	if i, err := frameworkFailure(results); err != nil {
		ne := d.fr.failFor(n, s, err)
		ne.FanOutIndex = &i
		return nil, d.failPending(step, attempt, s, ne, fc, nil)
	}
	if err := ctx.Err(); err != nil {
		// Cancelled mid-way: some instances may not have run.
		return nil, fail(errcat.InvocationCancelled, fmt.Errorf("invocation cancelled during fan-out %q: %w", n.name, context.Cause(ctx)))
	}

	upd := d.fanIn(s, results, count)
	d.setPending(step, attempt, s, fc, nil)
	return upd, nil
}

// fanIn is the fan-out's update from its instances' results, in instance
// order: the contributions of the instances that ran and succeeded and,
// under Collect, the failures' records; the count.
func (d *dispatchCtx) fanIn(s State, results []unitResult, count int) Update {
	f := d.n.fan
	collected := make([]any, 0, count)
	extras := make(map[string][]any, len(f.ExtraOutputs))
	var records []any
	for i, r := range results {
		if !r.ran {
			continue
		}
		if r.err != nil {
			if f.ErrorsField != "" && f.ErrorPolicy == Collect {
				cat, msg := errcat.Of(r.err), r.err.Error()
				records = append(records, map[string]any{"fan_out_index": i, "category": string(cat), "message": msg})
			}
			continue
		}
		collected = append(collected, r.upd[f.CollectField])
		for pf, sf := range f.ExtraOutputs {
			extras[pf] = append(extras[pf], r.upd[sf])
		}
	}
	upd := Update{f.TargetField: s.schema.listUpdate(f.TargetField, collected)}
	for pf, vals := range extras {
		// A reducer that takes a list of contributions (append,
		// concat_flatten, merge_all, ...) gets one positional slot per
		// instance, like the target field; any other merges each
		// instance's value in instance order.
		if r, _ := s.schema.Reducer(pf); r.collects() {
			upd[pf] = s.schema.listUpdate(pf, vals)
		} else {
			upd[pf] = sequence(vals)
		}
	}
	if f.ErrorsField != "" {
		upd[f.ErrorsField] = s.schema.listUpdate(f.ErrorsField, records)
	}
	if f.CountField != "" {
		upd[f.CountField] = count
	}
	return upd
}

// frameworkFailure returns the first unit failure of the engine's own
// machinery (suspension, sessions): those fail the composite node even
// under the Collect policy, unwrapped (suspension §8.2).
func frameworkFailure(results []unitResult) (int, error) {
	for i, r := range results {
		if r.err != nil && frameworkCat(errcat.Of(r.err)) {
			return i, r.err
		}
	}
	return -1, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// sequence is an update value merged element by element, in order,
// through the field's reducer: how fan-out and parallel branches merge
// several contributions to one field deterministically. Middleware sees
// it as an opaque value.
type sequence []any

// listUpdate converts engine-collected values into the update shape the
// field's reducer takes: []any for dynamic fields, the field's Go slice
// type for typed list fields (when every value fits).
func (s *Schema) listUpdate(field string, vals []any) any {
	if vals == nil {
		vals = []any{}
	}
	i, ok := s.index[field]
	if !ok {
		return vals
	}
	rt, ok := s.fields[i].typ.(reflectTyped)
	if !ok {
		return vals
	}
	t := rt.reflectType()
	if r := s.fields[i].reducer.Name(); r == ReducerConcatFlatten {
		t = reflect.SliceOf(t)
	} else if t.Kind() != reflect.Slice {
		return vals
	}
	elem := t.Elem()
	out := reflect.MakeSlice(t, len(vals), len(vals))
	for j, v := range vals {
		if v == nil {
			continue
		}
		rv := reflect.ValueOf(v)
		if !rv.Type().AssignableTo(elem) {
			return vals
		}
		out.Index(j).Set(rv)
	}
	return out.Interface()
}
