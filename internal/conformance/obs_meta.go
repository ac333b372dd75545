package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// Caller-supplied invocation metadata (observability §3.4) in the
// observability suite: the caller_metadata and caller_invocation_id case
// keys, the augment_metadata / capture_invocation_metadata_into node
// directives (set_invocation_metadata and get_invocation_metadata from a
// node body), retry_middleware with per_attempt_behavior (045), the
// direct_call of get_invocation_metadata outside an invocation (046), and
// their expectations and invariants.

// obsMetaCaseKeys, obsMetaExpectKeys and obsMetaNodeKeys are the keys
// this file implements.
var (
	obsMetaCaseKeys = vocab("caller_metadata caller_invocation_id session_id detached_subgraphs detached_fan_outs queryable_observers informative " +
		"sequential_invocations")
	obsMetaExpectKeys = vocab("invoke_rejects_at_api_boundary no_spans_emitted no_langfuse_observations_emitted " +
		"augment_rejects_at_call_site final_state traces parent_trace detached_trace_count log_records determinism_check " +
		"final_state_bounds per_invocation invocation_id")
	obsMetaNodeKeys = []string{"augment_metadata", "capture_invocation_metadata_into", "retry_middleware", "per_attempt_behavior",
		"noop", "capture_queryable_observer_read_into", "then_drop_for_current_invocation", "then_assert_bucket_absent_into"}
)

// transientMarker is the category of the raises: of a per_attempt_behavior
// entry, which the retry_middleware classifier treats as transient.
const transientMarker = "transient_marker"

// obsMeta is a case's metadata harness.
type obsMeta struct {
	caller       map[string]any
	invocationID string
	// sessionID binds every invocation to a session (session_id);
	// runSessions and runInitial are the invocations: list entries'.
	sessionID   string
	runSessions []string
	runInitial  []*Value
	// steps are the metadata directives of each node, by graph ("" for
	// the outermost) and node name, run before the node's other
	// directives.
	steps map[string]map[string][]*geStep
	// expectations
	rejects, noSpans, noLangfuse, augmentRejects, finalState *Value
	reads                                                    *metaReads
	// wantInvID is expected.invocation_id: the value every invocation
	// span carries as openarmature.invocation_id.
	wantInvID *Value
	// detached trace mode (obs_traces.go)
	detachedSubs, detachedFans         []string
	traces, parentTrace, detachedCount *Value
	// log correlation (obs_logs.go): logMws are the emits_log
	// middleware of composite nodes, by graph and node.
	logRecords *Value
	logMws     map[string]map[string]*mwSpec
	// determinism (obs_determinism.go)
	determinism *determinismCheck
	// queryable observers (obs_query.go); queryReads is guarded by
	// reads.mu.
	counters   map[string]*eventCounter
	queryReads []queryRead
	bounds     *Value
	// instanceMws are runner-built fan-out instance middleware by graph
	// and fan-out node (instanceKey, obs_inner.go).
	instanceMws map[string]*mwSpec
	// absorbed are outer fields the runner declared (obs_inner.go),
	// left out of final_state.
	absorbed []string
	// sequential invocations and accumulators (obs_seq.go); runIdx
	// counts the runs asserted, captured their captured buckets.
	seq          []seqInv
	accumulators map[string]*accumulator
	perInv       *Value
	runIdx       int
	captured     [][]any
	// exec is the case's execution (set by geExec.obsOTel).
	exec *geExec
	// lead counts the metadata steps install put at the start of each
	// node, which run before the node's other directives (the LLM and
	// tool calls go after them).
	lead map[*geNode]int
	// branchAugments are the branch-level augment_metadata entries
	// (obs_langfuse_meta.go).
	branchAugments map[branchAugmentKey]map[string]any
}

// metaRead is one get_invocation_metadata capture.
type metaRead struct {
	node    string
	attempt int
	fanIdx  *int
	md      graph.Metadata
}

type metaReads struct {
	mu   sync.Mutex
	list []metaRead
	// augmented records the entries each node (and attempt) added.
	augmented map[string]map[string]any
}

func (r *metaReads) snapshot() []metaRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

func newObsMeta() *obsMeta {
	return &obsMeta{steps: map[string]map[string][]*geStep{}, reads: &metaReads{augmented: map[string]map[string]any{}},
		logMws: map[string]map[string]*mwSpec{}, counters: map[string]*eventCounter{}, instanceMws: map[string]*mwSpec{},
		accumulators: map[string]*accumulator{}}
}

// caseKey parses caller_metadata or caller_invocation_id.
func (om *obsMeta) caseKey(f *Field) error {
	if _, ok := obsTraceCaseKeys[f.Key]; ok {
		return om.traceCaseKey(f)
	}
	if f.Key == "queryable_observers" {
		return om.queryCaseKey(&geParser{}, f)
	}
	if f.Key == "sequential_invocations" {
		return om.seqCaseKey(&geParser{}, f)
	}
	if f.Key == "informative" {
		// An informative fixture (one that documents a contract without
		// enforcing strict outcomes) runs like any other.
		if f.Value.Kind != KindBool {
			return schemaErrorf(f.Value.Pos, "informative must be a bool")
		}
		return nil
	}
	switch f.Key {
	case "caller_metadata":
		m, ok := f.Value.Native().(map[string]any)
		if !ok {
			return schemaErrorf(f.Value.Pos, "caller_metadata must be a mapping")
		}
		om.caller = m
	case "caller_invocation_id":
		s, err := str(f.Value, "caller_invocation_id")
		if err != nil {
			return err
		}
		om.invocationID = s
	case "session_id":
		s, err := str(f.Value, "session_id")
		if err != nil {
			return err
		}
		if s == "" {
			return schemaErrorf(f.Value.Pos, "session_id must not be empty")
		}
		om.sessionID = s
	}
	return nil
}

// invocationList parses invocations: as a list (084): one invocation per
// entry, each with its session_id and initial_state.
func (om *obsMeta) invocationList(v *Value) error {
	if len(v.Items) == 0 || len(v.Items) > 100 {
		return schemaErrorf(v.Pos, "invocations must list 1 to 100 invocations")
	}
	for i, it := range v.Items {
		if err := hcStrictKeys(it, fmt.Sprintf("invocations[%d]", i), "session_id", "initial_state"); err != nil {
			return err
		}
		var sid string
		if s, ok := it.Get("session_id"); ok {
			var err error
			if sid, err = str(s, "session_id"); err != nil {
				return err
			}
		}
		init, _ := it.Get("initial_state")
		if init != nil && init.Kind != KindMap && !init.IsNull() {
			return schemaErrorf(init.Pos, "invocations[%d].initial_state must be a mapping", i)
		}
		om.runSessions, om.runInitial = append(om.runSessions, sid), append(om.runInitial, init)
	}
	return nil
}

// expectKey records one of obsMetaExpectKeys.
func (om *obsMeta) expectKey(p *geParser, f *Field) error {
	if _, ok := obsTraceExpectKeys[f.Key]; ok {
		return om.traceExpectKey(p, f)
	}
	if f.Key == "log_records" {
		return om.logExpectKey(p, f)
	}
	if f.Key == "per_invocation" {
		if f.Value.Kind != KindMap {
			return schemaErrorf(f.Value.Pos, "per_invocation must be a mapping")
		}
		om.perInv = f.Value
		return nil
	}
	if f.Key == "final_state_bounds" {
		if f.Value.Kind != KindMap {
			return schemaErrorf(f.Value.Pos, "final_state_bounds must be a mapping")
		}
		om.bounds = f.Value
		return nil
	}
	if f.Key == "determinism_check" {
		dc, err := p.parseDeterminism(f.Value)
		om.determinism = dc
		return err
	}
	if f.Key == "invocation_id" {
		if f.Value.Kind != KindString || f.Value.Str == "" {
			return schemaErrorf(f.Value.Pos, "invocation_id must be a non-empty string")
		}
		om.wantInvID = f.Value
		return nil
	}
	v := f.Value
	if f.Key != "final_state" && v.Kind != KindBool {
		return schemaErrorf(v.Pos, "%s must be a bool", f.Key)
	}
	switch f.Key {
	case "invoke_rejects_at_api_boundary":
		om.rejects = v
	case "no_spans_emitted":
		om.noSpans = v
	case "no_langfuse_observations_emitted":
		om.noLangfuse = v
	case "augment_rejects_at_call_site":
		om.augmentRejects = v
	case "final_state":
		if v.Kind != KindMap {
			return schemaErrorf(v.Pos, "final_state must be a mapping")
		}
		om.finalState = v
	}
	return nil
}

// invokeOptions are the options of invocation i: caller metadata and
// invocation id, and the queryable observers.
func (om *obsMeta) invokeOptions(i int) []graph.InvokeOption {
	var opts []graph.InvokeOption
	if om.caller != nil {
		opts = append(opts, graph.WithMetadata(om.caller))
	}
	if om.invocationID != "" {
		opts = append(opts, graph.WithInvocationID(om.invocationID))
	}
	if i < len(om.seq) && om.seq[i].invocationID != "" {
		opts = append(opts, graph.WithInvocationID(om.seq[i].invocationID))
	}
	switch {
	case i < len(om.runSessions) && om.runSessions[i] != "":
		opts = append(opts, graph.WithSessionID(om.runSessions[i]))
	case om.sessionID != "":
		opts = append(opts, graph.WithSessionID(om.sessionID))
	}
	return append(opts, om.queryOptions()...)
}

// extract removes the metadata directives from the nodes of every graph
// of body (nodes:, subgraph:, subgraphs:), recording them as steps.
func (om *obsMeta) extract(body *Value) (*Value, error) {
	for _, f := range body.Fields {
		if slices.Contains(obsCaseNotBuilt, f.Key) {
			return nil, notImplemented(fmt.Sprintf("%s %s", capObs, f.Key))
		}
	}
	out := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		nf := f
		switch f.Key {
		case "nodes":
			v, err := om.extractNodes("", f.Value)
			if err != nil {
				return nil, err
			}
			nf = &Field{Key: f.Key, Pos: f.Pos, Value: v}
		case "edges":
			v, err := rewriteWhenEdges(f.Value)
			if err != nil {
				return nil, err
			}
			nf = &Field{Key: f.Key, Pos: f.Pos, Value: v}
		case "subgraph":
			if f.Value.Kind == KindMap {
				name, _ := f.Value.Get("name")
				if name == nil || name.Kind != KindString {
					break // the graph-engine parser reports it
				}
				v, err := om.extractGraph(name.Str, f.Value)
				if err != nil {
					return nil, err
				}
				nf = &Field{Key: f.Key, Pos: f.Pos, Value: v}
			}
		case "subgraphs":
			if f.Value.Kind == KindMap {
				gs := &Value{Kind: KindMap, Pos: f.Value.Pos}
				for _, sf := range f.Value.Fields {
					v, err := om.extractGraph(sf.Key, sf.Value)
					if err != nil {
						return nil, err
					}
					gs.Fields = append(gs.Fields, &Field{Key: sf.Key, Pos: sf.Pos, Value: v})
				}
				nf = &Field{Key: f.Key, Pos: f.Pos, Value: gs}
			}
		}
		out.Fields = append(out.Fields, nf)
	}
	return out, nil
}

func (om *obsMeta) extractGraph(name string, g *Value) (*Value, error) {
	if g.Kind != KindMap {
		return g, nil
	}
	out := &Value{Kind: KindMap, Pos: g.Pos}
	for _, f := range g.Fields {
		var v *Value
		var err error
		switch f.Key {
		case "nodes":
			v, err = om.extractNodes(name, f.Value)
		case "edges":
			v, err = rewriteWhenEdges(f.Value)
		}
		if err != nil {
			return nil, err
		}
		if v != nil {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: v}
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

func (om *obsMeta) extractNodes(graphKey string, nodes *Value) (*Value, error) {
	out := &Value{Kind: nodes.Kind, Pos: nodes.Pos}
	for _, nf := range nodes.Fields { // none unless a mapping
		n := nf.Value
		if fo, ok := n.Get("fan_out"); ok {
			if _, ok := fo.Get("augment_metadata_from_field"); ok {
				return nil, notImplemented(capObs + " fan_out augment_metadata_from_field outside inner_subgraphs")
			}
		}
		rn := &Value{Kind: KindMap, Pos: n.Pos}
		if n.Kind != KindMap {
			rn = n // no directives; the graph-engine parser reports its shape
		}
		if pb, ok := n.Get("parallel_branches"); ok {
			npb, err := om.stripBranchAugments(graphKey, nf.Key, pb)
			if err != nil {
				return nil, err
			}
			if npb != pb {
				n = replaceField(n, "parallel_branches", npb)
			}
		}
		var steps []*geStep
		composite := slices.ContainsFunc([]string{"subgraph", "fan_out", "parallel_branches"}, func(k string) bool { _, ok := n.Get(k); return ok })
		for _, d := range n.Fields {
			if d.Key == "emits_log" && composite {
				if err := om.compositeLog(graphKey, nf.Key, d); err != nil {
					return nil, err
				}
				continue
			}
			if !slices.Contains(obsMetaNodeKeys, d.Key) {
				rn.Fields = append(rn.Fields, d)
				continue
			}
			switch d.Key {
			case "retry_middleware":
				mw, err := retryMiddleware(d.Value)
				if err != nil {
					return nil, err
				}
				rn.Fields = append(rn.Fields, &Field{Key: "middleware", Pos: d.Pos, Value: mw})
			case "per_attempt_behavior":
				st, err := om.perAttempt(nf.Key, d.Value)
				if err != nil {
					return nil, err
				}
				steps = append(steps, st)
			case "noop":
				if d.Value.Kind != KindBool || !d.Value.Bool {
					return nil, schemaErrorf(d.Value.Pos, "noop must be true")
				}
			case "then_drop_for_current_invocation", "then_assert_bucket_absent_into":
				st, err := om.accumulatorDirective(&geParser{}, d)
				if err != nil {
					return nil, err
				}
				steps = append(steps, st)
			case "capture_queryable_observer_read_into":
				st, err := om.queryDirective(&geParser{}, d)
				if err != nil {
					return nil, err
				}
				steps = append(steps, st)
			default:
				st, err := om.directive(nf.Key, d)
				if err != nil {
					return nil, err
				}
				steps = append(steps, st)
			}
		}
		if len(steps) > 0 {
			if om.steps[graphKey] == nil {
				om.steps[graphKey] = map[string][]*geStep{}
			}
			om.steps[graphKey][nf.Key] = steps
		}
		out.Fields = append(out.Fields, &Field{Key: nf.Key, Pos: nf.Pos, Value: rn})
	}
	return out, nil
}

// directive builds augment_metadata or capture_invocation_metadata_into.
func (om *obsMeta) directive(node string, d *Field) (*geStep, error) {
	switch d.Key {
	case "augment_metadata":
		entries, ok := d.Value.Native().(map[string]any)
		if !ok {
			return nil, schemaErrorf(d.Value.Pos, "augment_metadata must be a mapping")
		}
		return &geStep{kind: stepCustom, pos: d.Pos, custom: func(ctx context.Context, _ graph.State, _ graph.Update) error {
			if err := graph.SetInvocationMetadata(ctx, entries); err != nil {
				return err
			}
			om.reads.mu.Lock()
			key := fmt.Sprintf("%s#%d", node, graph.AttemptIndex(ctx))
			om.reads.augmented[key] = entries
			om.reads.mu.Unlock()
			return nil
		}}, nil
	case "capture_invocation_metadata_into":
		field, err := str(d.Value, d.Key)
		if err != nil {
			return nil, err
		}
		return &geStep{kind: stepCustom, pos: d.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
			md := graph.InvocationMetadata(ctx)
			r := metaRead{node: node, attempt: graph.AttemptIndex(ctx), md: md}
			if info, ok := graph.CurrentNode(ctx); ok {
				r.fanIdx = info.FanOutIndex
			}
			om.reads.mu.Lock()
			om.reads.list = append(om.reads.list, r)
			om.reads.mu.Unlock()
			m := md.Map()
			if m == nil {
				m = map[string]any{}
			}
			upd[field] = m
			return nil
		}}, nil
	}
	return nil, &DirectiveUnknownError{Name: d.Key, Pos: d.Pos}
}

// retryMiddleware rewrites retry_middleware {max_attempts, classifier:
// transient_marker} into the graph-engine middleware list: a retry
// without backoff whose transient category is the one per_attempt_behavior
// raises.
func retryMiddleware(v *Value) (*Value, error) {
	if v.Kind != KindMap {
		return nil, schemaErrorf(v.Pos, "retry_middleware must be a mapping")
	}
	ma, ok := v.Get("max_attempts")
	if !ok || ma.Kind != KindInt {
		return nil, schemaErrorf(v.Pos, "retry_middleware needs an integer max_attempts")
	}
	for _, f := range v.Fields {
		switch f.Key {
		case "max_attempts":
		case "classifier":
			if f.Value.Kind != KindString || f.Value.Str != transientMarker {
				return nil, &DirectiveUnknownError{Name: fmt.Sprint(f.Value.Native()), Pos: f.Value.Pos}
			}
		default:
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	p := v.Pos
	str := func(s string) *Value { return &Value{Kind: KindString, Pos: p, Str: s} }
	mp := func(fs ...*Field) *Value { return &Value{Kind: KindMap, Pos: p, Fields: fs} }
	fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
	retry := mp(
		fd("type", str("retry")),
		fd("max_attempts", ma),
		fd("backoff", mp(fd("type", str("deterministic")), fd("seconds", &Value{Kind: KindInt, Pos: p}))),
		fd("classifier", mp(fd("transient_categories", &Value{Kind: KindList, Pos: p, Items: []*Value{str(transientMarker)}}))),
	)
	return &Value{Kind: KindList, Pos: p, Items: []*Value{retry}}, nil
}

// perAttempt builds per_attempt_behavior: a list of {attempt: i, ...}
// whose entry for the running attempt runs its directives in order
// (augment_metadata, capture_invocation_metadata_into, raises: a
// transient error, succeeds: true).
func (om *obsMeta) perAttempt(node string, v *Value) (*geStep, error) {
	if v.Kind != KindList {
		return nil, schemaErrorf(v.Pos, "per_attempt_behavior must be a list")
	}
	byAttempt := map[int64][]*geStep{}
	for _, it := range v.Items {
		a, ok := it.Get("attempt")
		if it.Kind != KindMap || !ok || a.Kind != KindInt {
			return nil, schemaErrorf(it.Pos, "per_attempt_behavior entries need an integer attempt")
		}
		var steps []*geStep
		for _, d := range it.Fields {
			switch d.Key {
			case "attempt":
			case "succeeds":
				if d.Value.Kind != KindBool || !d.Value.Bool {
					return nil, schemaErrorf(d.Value.Pos, "succeeds must be true")
				}
			case "raises":
				msg, err := str(d.Value, "raises")
				if err != nil {
					return nil, err
				}
				steps = append(steps, &geStep{kind: stepRaise, pos: d.Pos, category: transientMarker, message: msg})
			case "augment_metadata", "capture_invocation_metadata_into":
				st, err := om.directive(node, d)
				if err != nil {
					return nil, err
				}
				steps = append(steps, st)
			default:
				return nil, &DirectiveUnknownError{Name: d.Key, Pos: d.Pos}
			}
		}
		byAttempt[a.Int] = steps
	}
	return &geStep{kind: stepCustom, pos: v.Pos, custom: func(ctx context.Context, s graph.State, upd graph.Update) error {
		for _, st := range byAttempt[int64(graph.AttemptIndex(ctx))] {
			if st.kind == stepRaise {
				return &raisedError{cat: errcat.Category(st.category), msg: st.message}
			}
			if err := st.custom(ctx, s, upd); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

// install prepends the recorded steps to their nodes, and the emits_log
// middleware of composite nodes to their middleware.
func (om *obsMeta) install(gc *geCase) error {
	if err := om.installBranchAugments(gc); err != nil {
		return err
	}
	for key, g := range map[string]*geGraph{"": gc.outer} {
		for _, n := range g.nodes {
			if mw, ok := om.instanceMws[instanceKey(key, n.name)]; ok && n.fan != nil {
				n.fan.instanceMws = append([]*mwSpec{mw}, n.fan.instanceMws...)
			}
		}
	}
	for key, g := range gc.subgraphs {
		for _, n := range g.nodes {
			if mw, ok := om.instanceMws[instanceKey(key, n.name)]; ok && n.fan != nil {
				n.fan.instanceMws = append([]*mwSpec{mw}, n.fan.instanceMws...)
			}
		}
	}
	graphs := slices.Collect(maps.Keys(om.steps))
	for gk := range om.logMws {
		graphs = append(graphs, gk)
	}
	for _, gk := range graphs {
		g := gc.outer
		if gk != "" {
			g = gc.subgraphs[gk]
		}
		if g == nil {
			return schemaErrorf(gc.pos, "no graph %q", gk)
		}
		for _, n := range g.nodes {
			if steps, ok := om.steps[gk][n.name]; ok {
				if om.lead == nil {
					om.lead = map[*geNode]int{}
				}
				om.lead[n] = len(steps)
				n.steps = append(slices.Clone(steps), n.steps...)
				delete(om.steps[gk], n.name)
			}
			if mw, ok := om.logMws[gk][n.name]; ok {
				n.mws = append([]*mwSpec{mw}, n.mws...)
				delete(om.logMws[gk], n.name)
			}
		}
	}
	for gk, nodes := range om.steps {
		for name := range nodes {
			return schemaErrorf(gc.pos, "graph %q has no node %q", gk, name)
		}
	}
	return nil
}

// rejection runs a case whose invocation must be refused at the invoke
// boundary: Invoke returns no result and the categorized metadata error,
// and no observer (the OTel capture, a counting observer standing in for
// any other backend, and a Langfuse observer over a recorder) receives a
// single event or emits anything.
func (om *obsMeta) rejection(ctx context.Context, x *geExec, initial map[string]any) error {
	var events int
	var mu sync.Mutex
	count := func(context.Context, graph.Event) error {
		mu.Lock()
		events++
		mu.Unlock()
		return nil
	}
	from := x.otel.mark()
	rec := &langfusetest.Recorder{}
	lf, err := langfuse.New(langfuse.Config{Exporter: rec})
	if err != nil {
		return err
	}
	opts := append(om.invokeOptions(0), graph.WithObserver(count, graph.InvocationEvents()),
		graph.WithObserver(lf.Observe, graph.InvocationEvents()))
	res, err := x.outer.Invoke(ctx, graph.Update(initial), opts...)
	if _, derr := x.outer.Drain(ctx); derr != nil {
		return derr
	}
	var errs []error
	var me *graph.MetadataError
	rejected := res == nil && errors.As(err, &me) && errors.Is(err, graph.ErrReservedMetadataKey) &&
		errcat.Of(err) == errcat.InvalidInvocationMetadata
	errs = append(errs, compareBool(om.rejects, rejected, fmt.Sprintf("Invoke returned %v, %v", res, err)))
	spans := len(x.otel.since(from).allSpans())
	if om.noSpans != nil {
		errs = append(errs, compareBool(om.noSpans, spans == 0, fmt.Sprintf("%d spans emitted", spans)))
	}
	if om.noLangfuse != nil {
		lfEvents := len(rec.Events())
		errs = append(errs, compareBool(om.noLangfuse, events == 0 && lfEvents == 0,
			fmt.Sprintf("%d observer events delivered, %d Langfuse events emitted", events, lfEvents)))
	}
	return errors.Join(errs...)
}

// assertRun checks augment_rejects_at_call_site and final_state.
func (om *obsMeta) assertRun(m *matcher, x *geExec, run *obsRun) error {
	var errs []error
	if om.augmentRejects != nil {
		var me *graph.MetadataError
		got := run.Err != nil && errors.As(run.Err, &me) && errors.Is(run.Err, graph.ErrReservedMetadataKey)
		errs = append(errs, compareBool(om.augmentRejects, got, fmt.Sprintf("the invocation ended %s (%v)", run.Status, run.Err)))
	}
	if om.finalState != nil {
		final := run.FinalState
		if fm, ok := final.(map[string]any); ok && len(om.absorbed) > 0 {
			fm = maps.Clone(fm)
			for _, k := range om.absorbed {
				delete(fm, k)
			}
			final = fm
		}
		errs = append(errs, x.matchFinalState(m, "final_state", om.finalState, final))
	}
	errs = append(errs, om.assertTraces(m, run))
	if om.wantInvID != nil {
		errs = append(errs, invocationIDs(m, om.wantInvID, run))
	}
	if om.logRecords != nil {
		errs = append(errs, matchLogs(m, om.logRecords, run.otel.logs))
	}
	final, _ := run.FinalState.(map[string]any)
	if om.bounds != nil {
		errs = append(errs, finalStateBounds(om.bounds, final))
	}
	errs = append(errs, om.perInvocation(om.runIdx, final))
	om.runIdx++
	return errors.Join(errs...)
}

// --- direct_call -----------------------------------------------------------

// runDirectCall runs a direct_call case (046): the read primitive called
// outside any invocation returns an empty immutable mapping, without
// raising.
func runDirectCall(c *Case) (bool, error) {
	dc, ok := c.Body.Get("direct_call")
	if !ok {
		return false, nil
	}
	for _, f := range c.Body.Fields {
		switch f.Key {
		case "name", "description", "direct_call", "expected":
		default:
			return true, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	op, ok := dc.Get("operation")
	if !ok || op.Kind != KindString {
		return true, schemaErrorf(dc.Pos, "direct_call needs an operation")
	}
	if op.Str != "get_invocation_metadata" {
		return true, notImplemented(capObs + " direct_call " + op.Str)
	}
	md, panicked := directRead()
	exp, ok := c.Body.Get("expected")
	if !ok || exp.Kind != KindMap {
		return true, schemaErrorf(c.Body.Pos, "direct_call case needs expected:")
	}
	var errs []error
	for _, f := range exp.Fields {
		switch f.Key {
		case "direct_call_result":
			errs = append(errs, checkDirectResult(f.Value, md, panicked))
		case "invariants":
			for _, inv := range f.Value.Fields {
				var got bool
				switch inv.Key {
				case "outside_invocation_returns_empty_mapping":
					got = md.Len() == 0
				case "outside_invocation_does_not_raise":
					got = panicked == nil
				case "outside_invocation_return_is_immutable":
					got = immutable(md)
				default:
					return true, notImplemented(fmt.Sprintf("%s invariant %s", capObs, inv.Key))
				}
				if err := compareBool(inv.Value, got, "outside read "+fmt.Sprint(md.Map())); err != nil {
					errs = append(errs, fmt.Errorf("invariant %s: %w", inv.Key, err))
				}
			}
		default:
			return true, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	return true, errors.Join(errs...)
}

func directRead() (md graph.Metadata, panicked any) {
	defer func() { panicked = recover() }()
	return graph.InvocationMetadata(context.Background()), nil
}

func checkDirectResult(want *Value, md graph.Metadata, panicked any) error {
	for _, f := range want.Fields {
		switch f.Key {
		case "value":
			got := md.Map()
			if got == nil {
				got = map[string]any{}
			}
			if !deepEqual(normalize(got), normalize(f.Value.Native())) {
				return fmt.Errorf("direct_call_result.value: want %s, got %s", formatValue(f.Value.Native()), formatValue(got))
			}
		case "type":
			if f.Value.Str != "immutable_mapping" || !immutable(md) {
				return fmt.Errorf("direct_call_result.type: want %s", f.Value.Str)
			}
		case "exception":
			if !f.Value.IsNull() || panicked != nil {
				return fmt.Errorf("direct_call_result.exception: want %v, got %v", f.Value.Native(), panicked)
			}
		default:
			return &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	return nil
}

// immutable: changing what Map returns leaves the Metadata unchanged
// (graph.Metadata has no mutating method; Map returns a copy).
func immutable(md graph.Metadata) bool {
	before := md.Map()
	m := md.Map()
	if m == nil {
		return md.Len() == 0
	}
	for k := range m {
		m[k] = "mutated"
	}
	m["injected"] = true
	return maps.EqualFunc(before, md.Map(), func(a, b any) bool { return deepEqual(a, b) })
}

// --- invariants ------------------------------------------------------------

// obsMetaInvariant checks a metadata invariant over the case's reads.
type obsMetaInvariant func(om *obsMeta, reads []metaRead) (bool, string)

var obsMetaInvariants = map[string]obsMetaInvariant{
	"per_instance_reads_isolated_from_siblings": func(om *obsMeta, reads []metaRead) (bool, string) {
		seen := map[string]int{} // an instance addition -> its instance
		n := 0
		for _, r := range reads {
			if r.fanIdx == nil {
				continue
			}
			n++
			for k, v := range om.additions(r) {
				e := fmt.Sprintf("%s=%v", k, v)
				if i, dup := seen[e]; dup && i != *r.fanIdx {
					return false, fmt.Sprintf("instances %d and %d both read %s", i, *r.fanIdx, e)
				}
				seen[e] = *r.fanIdx
			}
		}
		return n > 1 && len(seen) > 0, "fewer than two instance reads with additions"
	},
	"outermost_read_sees_pre_fan_out_baseline_only": outermostSeesNoInstanceWrites,
	"no_global_aggregator_layered_across_join":      outermostSeesNoInstanceWrites,
	"read_returns_caller_baseline":                  readsHaveBaseline,
	"caller_baseline_stable_across_attempts":        readsHaveBaseline,
	"read_returns_in_node_write":                    readsSeeOwnWrites,
	"capture_after_augment_sees_write":              readsSeeOwnWrites,
	// 135: a capture before its node's augment does not see the write.
	"capture_before_augment_misses_write": func(om *obsMeta, reads []metaRead) (bool, string) {
		n := 0
		for _, r := range reads {
			for k := range om.reads.augmented[fmt.Sprintf("%s#%d", r.node, r.attempt)] {
				n++
				if v, ok := r.md.Get(k); ok {
					return false, fmt.Sprintf("%s read %s = %v before writing it", r.node, k, v)
				}
			}
		}
		return n > 0, "no node both read and wrote"
	},
	"read_returns_immutable_mapping": func(_ *obsMeta, reads []metaRead) (bool, string) {
		for _, r := range reads {
			if !immutable(r.md) {
				return false, "a read's mapping changed through its copy"
			}
		}
		return len(reads) > 0, "no reads"
	},
	"prior_failed_attempt_writes_discarded": func(om *obsMeta, reads []metaRead) (bool, string) {
		n := 0
		for _, r := range reads {
			for a := 0; a < r.attempt; a++ {
				for k, v := range om.reads.augmented[fmt.Sprintf("%s#%d", r.node, a)] {
					n++
					if got, ok := r.md.Get(k); ok && deepEqual(normalize(got), normalize(v)) {
						return false, fmt.Sprintf("%s attempt %d reads attempt %d's %s", r.node, r.attempt, a, k)
					}
				}
			}
		}
		return n > 0, "no read followed a failed attempt's write"
	},
	"successful_attempt_writes_visible_downstream": func(om *obsMeta, reads []metaRead) (bool, string) {
		// The last write of each node is visible to every read of a
		// later node.
		for i, r := range reads {
			for _, w := range reads[:i] {
				if w.node == r.node {
					continue
				}
				for k := range om.reads.augmented[fmt.Sprintf("%s#%d", w.node, w.attempt)] {
					if _, ok := r.md.Get(k); !ok {
						return false, fmt.Sprintf("%s does not read %s's %s", r.node, w.node, k)
					}
				}
			}
		}
		return len(reads) > 1, "fewer than two reads"
	},
}

// additions returns the entries of a read beyond the caller's metadata.
func (om *obsMeta) additions(r metaRead) map[string]any {
	out := map[string]any{}
	for k, v := range r.md.All() {
		if cv, ok := om.caller[k]; !ok || !deepEqual(normalize(cv), normalize(v)) {
			out[k] = v
		}
	}
	return out
}

// outermostSeesNoInstanceWrites: reads outside fan-out instances see
// none of the instances' additions.
func outermostSeesNoInstanceWrites(om *obsMeta, reads []metaRead) (bool, string) {
	inst := map[string]bool{}
	for _, r := range reads {
		if r.fanIdx != nil {
			for k := range om.additions(r) {
				inst[k] = true
			}
		}
	}
	n := 0
	for _, r := range reads {
		if r.fanIdx != nil {
			continue
		}
		n++
		for k := range om.additions(r) {
			if inst[k] {
				return false, fmt.Sprintf("%s reads the instances' %s", r.node, k)
			}
		}
	}
	return n > 0 && len(inst) > 0, "no outermost read after instance additions"
}

func readsHaveBaseline(om *obsMeta, reads []metaRead) (bool, string) {
	for _, r := range reads {
		for k, v := range om.caller {
			got, ok := r.md.Get(k)
			if !ok || !deepEqual(normalize(got), normalize(v)) {
				return false, fmt.Sprintf("%s (attempt %d) reads %s = %v", r.node, r.attempt, k, got)
			}
		}
	}
	return len(reads) > 0 && len(om.caller) > 0, "no reads or no caller metadata"
}

func readsSeeOwnWrites(om *obsMeta, reads []metaRead) (bool, string) {
	n := 0
	for _, r := range reads {
		for k, v := range om.reads.augmented[fmt.Sprintf("%s#%d", r.node, r.attempt)] {
			n++
			got, ok := r.md.Get(k)
			if !ok || !deepEqual(normalize(got), normalize(v)) {
				return false, fmt.Sprintf("%s reads %s = %v, wrote %v", r.node, k, got, v)
			}
		}
	}
	return n > 0, "no read after a write"
}

// isMetaInvariant reports whether name is a metadata or detached-mode
// invariant.
func isMetaInvariant(name string) bool {
	_, ok := obsMetaInvariants[name]
	_, log := obsLogInvariants[name]
	_, det := determinismInvariants[name]
	_, query := queryInvariants[name]
	_, acc := accumulatorInvariants[name]
	return ok || log || det || query || acc || isTraceInvariant(name)
}

// checkInvariant runs a metadata or detached-mode invariant, or reports
// it unknown.
func (om *obsMeta) checkInvariant(name string, want *Value, runs []*obsRun) (bool, error) {
	if isTraceInvariant(name) {
		return checkTraceInvariant(name, want, runs)
	}
	if ok, err := checkLogInvariant(name, want, runs); ok {
		return true, err
	}
	if ok, err := checkDeterminismInvariant(name, want, runs); ok {
		return true, err
	}
	if ok, err := om.checkQueryInvariant(name, want, runs); ok {
		return true, err
	}
	if inv, ok := accumulatorInvariants[name]; ok {
		got, why := inv(om, runs)
		if got {
			why = ""
		}
		return true, compareBool(want, got, why)
	}
	inv, ok := obsMetaInvariants[name]
	if !ok {
		return false, nil
	}
	got, why := inv(om, om.reads.snapshot())
	if got {
		why = ""
	}
	return true, compareBool(want, got, why)
}

// assertCase checks what spans the case's invocations: the determinism
// check.
func (om *obsMeta) assertCase(runs []*obsRun) error {
	if om.determinism == nil {
		return nil
	}
	return om.determinism.check(runs)
}
