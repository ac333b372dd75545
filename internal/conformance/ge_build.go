package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// geExec builds and runs one execution of a graph-engine case against the
// real engine. It owns the harness primitives of conformance-adapter §6
// (the in-memory observers and the drain wiring) for that execution.
type geExec struct {
	gc  *geCase
	rec *recorder
	// outer is the compiled outermost graph; set before the first invoke.
	outer *graph.Graph
	// ckptStore is the §10 checkpointer (graph.WithCheckpointer) of a
	// checkpoint case; nil otherwise.
	ckptStore checkpoint.Store
	// ckpt is the §10 case harness (pu_ckpt.go); nil otherwise.
	ckpt     *ckptHarness
	graphs   map[string]*graph.Graph // compiled subgraphs by name
	warnings []graph.Warning
	// observerFns are the harness observers, created once per execution
	// so per-observer pacing state spans invocations.
	observerFns map[string]graph.Observer
	// pu holds the pipeline-utilities harness records.
	pu *puState
	// ss is the sessions harness (store, migration mocks, records).
	ss *ssState
	// sus is the suspension harness (body and middleware logs, the
	// checkpoint store, run bookkeeping).
	sus *susState
	// otel is the OTel span and log capture (otel.go).
	otel *otelState
}

// close releases what the execution opened.
// conformanceCallableHead is the fixtures' graph.WithCallableBranchHead.
const conformanceCallableHead = 10 * time.Second

func (x *geExec) close() {
	x.otel.shutdown()
	x.ss.done()
	x.sus.done()
}

func newGeExec(ctx context.Context, gc *geCase) *geExec {
	x := &geExec{gc: gc, rec: newRecorder(), graphs: map[string]*graph.Graph{}, observerFns: map[string]graph.Observer{}, pu: newPUState(gc), ss: newSSState(ctx, gc.sess), sus: newSusState(ctx, gc)}
	x.otel = newOTelState()
	for _, o := range gc.observers {
		x.observerFns[o.name] = x.observerFunc(o)
		if o.behavior == "otel" {
			x.observerFns[o.name] = x.otelCapture(o.name).obs.Observe
		}
	}
	if gc.implicitOTel {
		x.otelCapture(implicitOTel)
	}
	return x
}

// otelCapture returns the named OTel capture, creating it.
func (x *geExec) otelCapture(name string) *otelCapture {
	if c, ok := x.otel.captures[name]; ok {
		return c
	}
	c, err := newOTelCapture()
	if err != nil {
		panic(err) // only for a nil provider, which newOTelCapture never passes
	}
	x.otel.captures[name] = c
	return c
}

// compileError marks an engine compile failure (as opposed to a broken
// fixture), so the caller can compare it with expected_compile_error.
type compileError struct{ err error }

// Error returns the engine's message.
func (e *compileError) Error() string { return e.err.Error() }

// Unwrap returns the engine error.
func (e *compileError) Unwrap() error { return e.err }

// build compiles every subgraph (dependencies first) and the outer graph.
// Engine failures come back as *compileError; fixture problems as
// *SchemaInvalidError.
func (x *geExec) build() error {
	visiting := map[string]bool{}
	var compileSub func(name string, pos Pos) error
	compileSub = func(name string, pos Pos) error {
		if _, done := x.graphs[name]; done {
			return nil
		}
		if visiting[name] {
			return schemaErrorf(pos, "subgraph %q contains itself", name)
		}
		visiting[name] = true
		g := x.gc.subgraphs[name]
		for _, n := range g.nodes {
			for _, ref := range n.subgraphNames() {
				if err := compileSub(ref.name, ref.pos); err != nil {
					return err
				}
			}
		}
		cg, err := x.compileGraph(g, x.absorbedItemFields(g))
		if err != nil {
			return err
		}
		x.graphs[name] = cg
		return nil
	}
	// Only subgraphs the outer graph uses (transitively) or an observer
	// targets are compiled: a file-level subgraph unused by this case must
	// neither fail it nor add warnings to its exhaustive warning list.
	for _, n := range x.gc.outer.nodes {
		for _, ref := range n.subgraphNames() {
			if err := compileSub(ref.name, ref.pos); err != nil {
				return err
			}
		}
	}
	for _, o := range x.gc.observers {
		if tg, err := x.gc.targetGraph(o); err != nil {
			return err
		} else if tg != nil {
			if err := compileSub(tg.name, o.pos); err != nil {
				return err
			}
		}
	}
	outer, err := x.compileGraph(x.gc.outer, x.absorbedFields())
	if err != nil {
		return err
	}
	x.outer = outer
	for _, name := range sortedKeys(x.graphs) {
		x.warnings = append(x.warnings, x.graphs[name].Warnings()...)
	}
	x.warnings = append(x.warnings, outer.Warnings()...)
	return nil
}

// absorbedFields returns the initial_state keys the outer schema does not
// declare. Fixture mismatch absorption (IMPLEMENTERS-NOTES §6.18):
// graph-engine 020 puts an undeclared target_node_name in initial_state
// and expects it in pre_state, so such keys are declared as extra fields
// of type any (no default, so they start as null when not supplied).
func (x *geExec) absorbedFields() []string {
	var out []string
	for _, inv := range x.gc.invocations {
		if inv.initial == nil || inv.initial.Kind != KindMap {
			continue
		}
		for _, f := range inv.initial.Fields {
			if x.gc.outer.field(f.Key) == nil && !slices.Contains(out, f.Key) {
				out = append(out, f.Key)
			}
		}
	}
	return out
}

// absorbedItemFields returns the fan-out item_field names the subgraph
// does not declare. Fixture mismatch absorption: pipeline-utilities 023
// sets item_field: anything on a subgraph without such a field (§9 makes
// that a mapping_references_undeclared_field compile error) and expects
// the run-time fan_out_empty / instance counts, so the field is declared
// as an extra field of type any.
func (x *geExec) absorbedItemFields(g *geGraph) []string {
	var out []string
	for _, pg := range append([]*geGraph{x.gc.outer}, sortedGraphs(x.gc.subgraphs)...) {
		for _, n := range pg.nodes {
			if n.fan == nil || n.fan.sub != g.name || n.fan.itemField == "" {
				continue
			}
			if g.field(n.fan.itemField) == nil && !slices.Contains(out, n.fan.itemField) {
				out = append(out, n.fan.itemField)
			}
		}
	}
	return out
}

func (x *geExec) compileGraph(g *geGraph, extra []string) (*graph.Graph, error) {
	specs := make([]graph.FieldSpec, 0, len(g.fields)+len(extra))
	errorsFields := map[string]bool{}
	for _, n := range g.nodes {
		switch {
		case n.fan != nil && n.fan.errorsField != "":
			errorsFields[n.fan.errorsField] = true
		case n.par != nil && n.par.errorsField != "":
			errorsFields[n.par.errorsField] = true
		}
	}
	for _, f := range g.fields {
		ftyp := f.typ
		// Fixture mismatch absorption: pipeline-utilities 019 declares its
		// errors_field as list<dict<string,string>>, but an error record
		// holds the integer fan_out_index (see matchErrorRecords), so the
		// field is widened to list<dict<string,any>>.
		if errorsFields[f.name] && strings.ReplaceAll(ftyp, " ", "") == "list<dict<string,string>>" {
			ftyp = "list<dict<string,any>>"
		}
		// error_entry (pipeline-utilities 052) names the errors field's
		// record type: the engine's {fan_out_index, category, message}.
		ftyp = strings.ReplaceAll(ftyp, "error_entry", "dict<string,any>")
		typ, err := graph.ParseType(ftyp)
		if err != nil {
			return nil, schemaErrorf(f.pos, "field %s: type %q: %v", f.name, f.typ, err)
		}
		// A field without default: starts from the engine's zero value of
		// its type ("" / 0 / 0.0 / false / [] / {} / null for any).
		var opts []graph.FieldOption
		if f.def != nil {
			opts = append(opts, graph.Default(f.def.Native()))
		}
		if f.required {
			opts = append(opts, graph.Required())
		}
		for _, r := range f.reducers {
			opts = append(opts, graph.WithReducer(reducerOf(r)))
		}
		specs = append(specs, graph.NewDynamicField(f.name, typ, opts...))
	}
	for _, name := range extra {
		specs = append(specs, graph.NewDynamicField(name, graph.TypeAny))
	}
	schema, err := graph.NewSchema(specs...)
	if err != nil {
		return nil, &compileError{err: err}
	}
	if g.schemaVersion != "" {
		schema = schema.WithVersion(g.schemaVersion)
	}
	b := graph.NewBuilder(schema)
	perGraph, err := x.middleware(g.perGraph)
	if err != nil {
		return nil, err
	}
	if len(perGraph) > 0 {
		b.Use(perGraph...)
	}
	outer := g == x.gc.outer
	for _, n := range g.nodes {
		var opts []graph.NodeOption
		mws, err := x.middleware(slices.Concat(g.perNode[n.name], n.mws, n.wrap))
		if err != nil {
			return nil, err
		}
		if n.fan != nil && n.fan.abortAfter != nil && x.ckpt != nil {
			mws = append([]graph.Middleware{x.ckpt.abortMiddleware(n.name, *n.fan.abortAfter)}, mws...)
		}
		if len(mws) > 0 {
			opts = append(opts, graph.WithMiddleware(mws...))
		}
		switch {
		case n.sub != nil:
			b.AddSubgraph(n.name, x.graphs[n.sub.name], append(opts, subgraphOptions(n.sub)...)...)
		case n.fan != nil:
			cfg, err := x.fanOutConfig(n.fan)
			if err != nil {
				return nil, err
			}
			b.AddFanOut(n.name, cfg, opts...)
		case n.par != nil:
			cfg, err := x.branchesConfig(g, n.par)
			if err != nil {
				return nil, err
			}
			b.AddParallelBranches(n.name, cfg, opts...)
		default:
			b.AddNode(n.name, x.nodeFunc(n, g, outer), opts...)
		}
	}
	for _, e := range g.edges {
		if e.cond == nil {
			b.AddEdge(e.from, endName(e.to))
			continue
		}
		route, dests := x.route(g, e)
		b.AddConditionalEdge(e.from, route, dests...)
	}
	if g.entry != "" {
		b.SetEntry(g.entry)
	}
	var copts []graph.CompileOption
	if outer && x.ss.store != nil {
		copts = append(copts, graph.WithSessions(x.ss.sessionConfig(g.schemaVersion)))
	}
	if outer && x.ckptStore != nil {
		var ckptOpts []graph.CheckpointOption
		if x.ckpt != nil {
			ckptOpts = x.ckpt.compileOptions()
		}
		copts = append(copts, graph.WithCheckpointer(x.ckptStore, ckptOpts...))
	}
	if outer && x.sus.cp != nil {
		copts = append(copts, graph.WithCheckpointStore(x.sus.cp))
	}
	if !outer {
		copts = append(copts, graph.WithName(g.name))
	}
	// The fixtures' inline callables are scripted and return at once: a
	// long head runs each before the next branch starts, whatever the
	// machine's load, as the reference's single-threaded scheduler does
	// (fixture 119: under fail_fast, a branch that raises at once keeps
	// the later ones from starting).
	copts = append(copts, graph.WithCallableBranchHead(conformanceCallableHead))
	cg, err := b.Compile(copts...)
	if err != nil {
		return nil, &compileError{err: err}
	}
	return cg, nil
}

func reducerOf(r *geReducer) graph.Reducer {
	var key graph.KeyFunc
	if r.hasKey {
		key = graph.FieldKey(r.key)
	}
	switch r.name {
	case "append":
		return graph.Append
	case "merge":
		return graph.Merge
	case "concat_flatten":
		return graph.ConcatFlatten
	case "merge_all":
		return graph.MergeAll
	case "bounded_append":
		return graph.BoundedAppend(r.maxLen)
	case "dedupe_append":
		return graph.DedupeAppend(key)
	case "merge_by_key":
		return graph.MergeByKey(key)
	}
	return graph.LastWriteWins
}

func subgraphOptions(s *geSubUse) []graph.NodeOption {
	var opts []graph.NodeOption
	toMap := func(fields []*Field) map[string]string {
		m := make(map[string]string, len(fields))
		for _, f := range fields {
			m[f.Key] = f.Value.Str
		}
		return m
	}
	if s.hasInputs {
		opts = append(opts, graph.Inputs(toMap(s.inputs)))
	}
	if s.hasOutputs {
		opts = append(opts, graph.Outputs(toMap(s.outputs)))
	}
	if s.hasIn {
		opts = append(opts, graph.ProjectIn(s.projectsIn...))
	}
	if s.hasOut {
		opts = append(opts, graph.ProjectOut(s.projectsOut...))
	}
	return opts
}

// endName maps the fixture's END to the engine sentinel.
func endName(name string) string {
	if name == "END" {
		return graph.End
	}
	return name
}

// route builds a conditional edge. Only declared nodes (and END) are
// passed as destinations: a condition naming an undeclared node must fail
// at run time with routing_error (graph-engine 008), not at compile time.
func (x *geExec) route(g *geGraph, e *geEdge) (graph.RouteFunc, []string) {
	c := e.cond
	var dests []string
	addDest := func(name string) {
		if name == "" {
			return
		}
		if name == "END" || g.node(name) != nil {
			if d := endName(name); !slices.Contains(dests, d) {
				dests = append(dests, d)
			}
		}
	}
	switch c.callable {
	case "state_field_read":
		addDest(e.to)
		field := c.field
		return func(_ context.Context, s graph.State) (string, error) {
			v, _ := s.Get(field)
			if name, ok := v.(string); ok {
				return endName(name), nil
			}
			return fmt.Sprint(v), nil
		}, dests
	case "edge_raises":
		addDest(e.to)
		msg := c.message
		return func(context.Context, graph.State) (string, error) {
			return "", errors.New(msg)
		}, dests
	}
	addDest(c.then)
	addDest(c.els)
	field, then, els := c.ifField, endName(c.then), endName(c.els)
	var match func(got any) bool
	if c.equals != nil {
		want := c.equals.Native()
		match = func(got any) bool { return deepEqual(want, got) }
	} else {
		lim, limOK := toFloat(normalize(c.gt.Native()))
		match = func(got any) bool {
			f, ok := toFloat(normalize(got))
			return ok && limOK && f > lim
		}
	}
	return func(_ context.Context, s graph.State) (string, error) {
		got, _ := s.Get(field)
		if match(got) {
			return then, nil
		}
		return els, nil
	}, dests
}

// raisedError is the error a raises: {category, message} node returns:
// its message is the fixture's, and it carries the category (errcat).
type raisedError struct {
	cat errcat.Category
	msg string
}

// Error returns the fixture's message.
func (e *raisedError) Error() string { return e.msg }

// Category returns the fixture's category.
func (e *raisedError) Category() errcat.Category { return e.cat }

// Is matches the category (see [errcat.Matches]).
func (e *raisedError) Is(target error) bool { return errcat.Matches(e.cat, target) }

func observerInfos(obs []*geObserver) []observerInfo {
	out := make([]observerInfo, 0, len(obs))
	for _, o := range obs {
		all := !o.hasPhases || (slices.Contains(o.phases, "started") && slices.Contains(o.phases, "completed"))
		out = append(out, observerInfo{Name: o.name, Behavior: o.behavior, Target: o.target, AllPhases: all})
	}
	return out
}

// nodeFunc runs a node's behavior directives in document order
// (conformance-adapter §8.3), accumulating one partial update. g is the
// graph whose state the node reads; outer marks nodes of the outermost
// graph, whose body runs are recorded for execution_order.
func (x *geExec) nodeFunc(n *geNode, g *geGraph, outer bool) graph.NodeFunc {
	steps := n.steps
	name := n.name
	return func(ctx context.Context, s graph.State) (_ graph.Update, err error) {
		if outer {
			x.pu.markBody(ctx, name)
		}
		if x.gc.sess != nil {
			x.ss.markBody(ctx, name, outer, s)
		}
		br := x.sus.beginBody(ctx, name, s)
		// A successful Suspend unwinds the body with the engine's panic,
		// which this deferred call sees as a body that did not return.
		returned := false
		defer func() { x.sus.endBody(br, returned, err) }()
		upd := graph.Update{}
		err = x.runSteps(ctx, br, steps, name, g, s, upd)
		returned = true
		if err != nil {
			return nil, err
		}
		return upd, nil
	}
}

// runSteps executes behavior directives in order into upd.
func (x *geExec) runSteps(ctx context.Context, br *bodyRun, steps []*geStep, name string, g *geGraph, s graph.State, upd graph.Update) error {
	for _, st := range steps {
		switch st.kind {
		case stepSleep:
			t := time.NewTimer(st.sleep)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		case stepFlaky:
			u, err := x.runFlaky(ctx, st.flaky, name, g, s)
			if err != nil {
				return err
			}
			for k, v := range u {
				upd[k] = v
			}
		case stepUpdate:
			for _, f := range st.update.Fields {
				upd[f.Key] = f.Value.Native()
				// Fixture mismatch absorption: pipeline-utilities 055 writes
				// update_pure: {out: input} for out = input, a string naming
				// a declared field into a field that cannot hold a string.
				if name, ok := upd[f.Key].(string); ok && g.field(name) != nil {
					if tf := g.field(f.Key); tf != nil && tf.typ != "string" && tf.typ != "str" && tf.typ != "any" {
						upd[f.Key], _ = s.Get(name)
					}
				}
			}
		case stepUpdateFromField:
			for i, target := range st.targets {
				v, ok := s.Get(st.sources[i])
				if !ok {
					return fmt.Errorf("conformance: update_from_field: state has no field %q", st.sources[i])
				}
				if st.multiplier != nil {
					var err error
					if v, err = multiply(v, st.multiplier); err != nil {
						return err
					}
				}
				upd[target] = v
			}
		case stepRaise:
			if st.category != "" {
				return &raisedError{cat: errcat.Category(st.category), msg: st.message}
			}
			return errors.New(st.message)
		case stepLog:
			x.logStep(ctx, st)
		case stepCustom:
			if err := st.custom(ctx, s, upd); err != nil {
				return err
			}
		case stepDrainEventsFor:
			if err := x.drainEventsFor(ctx, name, st); err != nil {
				return err
			}
		case stepSaveSession:
			// Sessions §6.2: commit the session with the update
			// accumulated so far; a failure fails the node.
			if err := graph.SaveSession(ctx, maps.Clone(upd)); err != nil {
				return err
			}
		case stepSuspend:
			return x.suspend(ctx, br, st.suspend)
		case stepCondSuspend:
			// Suspension 006: suspend in the fan-out instance of the
			// given index, run on_other_indices in every other one.
			info, ok := graph.CurrentNode(ctx)
			if !ok || info.FanOutIndex == nil {
				return fmt.Errorf("conformance: conditional_suspend in node %s outside a fan-out instance", name)
			}
			if int64(*info.FanOutIndex) == st.suspendIndex {
				return x.suspend(ctx, br, st.suspend)
			}
			if err := x.runSteps(ctx, br, st.otherwise, name, g, s, upd); err != nil {
				return err
			}
		}
	}
	return nil
}

func multiply(v any, m *Value) (any, error) {
	n := normalize(v)
	switch m.Kind {
	case KindInt:
		if i, ok := n.(int64); ok {
			p := i * m.Int
			if m.Int != 0 && p/m.Int != i {
				return nil, fmt.Errorf("conformance: update_from_field: %d * %d overflows", i, m.Int)
			}
			if p >= math.MinInt && p <= math.MaxInt {
				return int(p), nil
			}
			return p, nil
		}
		if f, ok := n.(float64); ok {
			return f * float64(m.Int), nil
		}
	case KindFloat:
		if f, ok := toFloat(n); ok {
			return f * m.Float, nil
		}
	}
	return nil, fmt.Errorf("conformance: update_from_field: cannot multiply %s by %s", formatValue(v), m.String())
}

// drainEventsFor implements invoke_drain_events_for (conformance-adapter
// §5.1, §6.6): a real DrainEventsFor on the outermost compiled graph for
// the running invocation, then a snapshot of the observer's bucket.
func (x *geExec) drainEventsFor(ctx context.Context, node string, st *geStep) error {
	id := graph.InvocationID(ctx)
	var opts []graph.DrainOption
	if st.hasTimeout {
		opts = append(opts, graph.DrainTimeout(st.timeout))
	}
	start := time.Now()
	sum, err := x.outer.DrainEventsFor(ctx, id, opts...)
	elapsed := time.Since(start)
	snapshot := x.rec.events(st.observer, id)
	x.rec.addNodeDrain(&nodeDrainRec{
		drainRec: drainRec{
			HasTimeout: st.hasTimeout, Timeout: st.timeout, Elapsed: elapsed,
			Undelivered: sum.Undelivered, TimeoutReached: sum.TimeoutReached, Err: err,
		},
		Node: node, Observer: st.observer, InvocationID: id, Snapshot: snapshot,
	})
	if err != nil {
		return fmt.Errorf("conformance: invoke_drain_events_for: %w", err)
	}
	return nil
}

// observerFunc builds the harness observer of conformance-adapter §6.1:
// every behavior first sleeps its pacing (honouring cancellation, which
// leaves the event undelivered), then logs the delivery; record and
// accumulate keep the event (the accumulate buckets are the per-invocation
// views of the log), raise returns an error.
func (x *geExec) observerFunc(o *geObserver) graph.Observer {
	var mu sync.Mutex
	first := ""
	return func(ctx context.Context, ev graph.Event) error {
		ne, ok := ev.(*graph.NodeEvent)
		if !ok {
			return nil
		}
		pace := o.sleepAll
		if o.sleepSeq {
			mu.Lock()
			if first == "" {
				first = ne.InvocationID
			}
			if ne.InvocationID != first {
				pace = o.sleepNext
			}
			mu.Unlock()
		}
		if pace > 0 {
			t := time.NewTimer(pace)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		x.rec.deliver(o.name, eventRecOf(ne))
		if o.behavior == "raise" {
			return fmt.Errorf("conformance: observer %s raises on every event", o.name)
		}
		return nil
	}
}

func (x *geExec) observerOptions(o *geObserver) []graph.ObserverOption {
	if !o.hasPhases {
		return otelObserverOptions(o)
	}
	ps := make([]graph.Phase, len(o.phases))
	for i, p := range o.phases {
		ps[i] = graph.Phase(p)
	}
	return append(otelObserverOptions(o), graph.Phases(ps...))
}

// attachObservers registers the graph-attached observers on their target
// graphs, in declaration order.
func (x *geExec) attachObservers() error {
	for _, o := range x.gc.observers {
		if o.attach != "graph" {
			continue
		}
		target := x.outer
		if tg, err := x.gc.targetGraph(o); err != nil {
			return err
		} else if tg != nil {
			target = x.graphs[tg.name]
		}
		if _, err := target.AddObserver(x.observerFns[o.name], x.observerOptions(o)...); err != nil {
			return fmt.Errorf("registering observer %s: %w", o.name, err)
		}
	}
	if c, ok := x.otel.captures[implicitOTel]; ok {
		if _, err := x.outer.AddObserver(c.obs.Observe, graph.InvocationEvents()); err != nil {
			return fmt.Errorf("registering the span_tree OTel observer: %w", err)
		}
	}
	return nil
}

func eventRecOf(ne *graph.NodeEvent) *eventRec {
	e := &eventRec{
		Phase:           string(ne.Phase),
		NodeName:        ne.NodeName,
		Namespace:       slices.Clone(ne.Namespace),
		Step:            ne.Step,
		PreState:        normalize(ne.PreState),
		HasPostState:    !ne.PostState.IsZero(),
		AttemptIndex:    ne.AttemptIndex,
		InvocationID:    ne.InvocationID,
		CorrelationID:   ne.CorrelationID,
		FanOutItemCount: -1,
	}
	if ne.FanOutConfig != nil {
		e.FanOutItemCount = ne.FanOutConfig.ItemCount
	}
	if ne.Descriptor != nil {
		e.Descriptor = descriptorView(*ne.Descriptor)
	}
	if e.HasPostState {
		e.PostState = normalize(ne.PostState)
	}
	if ne.Err != nil || ne.ErrorCategory != "" {
		e.HasError = true
		e.ErrCategory = string(ne.ErrorCategory)
		if e.ErrCategory == "" {
			e.ErrCategory = string(errcat.Of(ne.Err))
		}
		if ne.Err != nil {
			e.ErrMessage = innermostMessage(ne.Err)
			cat, _ := errcat.Derived(ne.Err)
			e.ErrCause = string(cat)
		}
	}
	e.ParentStates = make([]any, len(ne.ParentStates))
	for i, ps := range ne.ParentStates {
		e.ParentStates[i] = normalize(ps)
	}
	if ne.FanOutIndex != nil {
		v := *ne.FanOutIndex
		e.FanOutIndex = &v
	}
	if ne.BranchName != nil {
		v := *ne.BranchName
		e.BranchName = &v
	}
	for _, p := range ne.FanOutIndexChain {
		if p == nil {
			e.FanOutIndexChain = append(e.FanOutIndexChain, nil)
			continue
		}
		v := *p
		e.FanOutIndexChain = append(e.FanOutIndexChain, &v)
	}
	for _, p := range ne.BranchNameChain {
		if p == nil {
			e.BranchNameChain = append(e.BranchNameChain, nil)
			continue
		}
		v := *p
		e.BranchNameChain = append(e.BranchNameChain, &v)
	}
	return e
}

// innermostMessage returns the message of the innermost error in err's
// chain (the user's error under the engine's wrappers), skipping a bare
// category sentinel at the bottom.
func innermostMessage(err error) string {
	last := err
	for cur := err; cur != nil; {
		if _, bare := cur.(errcat.Category); !bare {
			last = cur
		}
		switch u := cur.(type) {
		case interface{ Unwrap() error }:
			cur = u.Unwrap()
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				cur = nil
			} else {
				cur = errs[0]
			}
		default:
			cur = nil
		}
	}
	return last.Error()
}
