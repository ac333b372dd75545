package conformance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// puState is what the pipeline-utilities harness pieces of one execution
// record: failure-mock counters, middleware side channels (trace
// recorders, timing records, on_caught calls, degraded-callable inputs),
// the fan-out concurrency probe, which outer node bodies ran, and every
// event the outermost graph delivered (node and failure-isolation
// events, in delivery order).
type puState struct {
	mu sync.Mutex
	// failure mocks
	calls     map[*flakySpec]int            // total body calls
	perKey    map[*flakySpec]map[string]int // calls per fan-out instance
	firstInv  map[*flakySpec]string         // first invocation id seen
	traces    map[string][]*traceRec
	timings   []*timingRec
	caught    []*caughtRec
	degradeIn []any
	// concurrency probe
	inFlight, maxInFlight int
	// bodyRan[invocation id][node] is set when an outer node body ran.
	bodyRan map[string]map[string]bool
	events  []*puEvent
	now     func() time.Time
}

func newPUState(gc *geCase) *puState {
	st := &puState{
		calls:    map[*flakySpec]int{},
		perKey:   map[*flakySpec]map[string]int{},
		firstInv: map[*flakySpec]string{},
		traces:   map[string][]*traceRec{},
		bodyRan:  map[string]map[string]bool{},
	}
	if gc.clock != nil {
		st.now = gc.clock.clockNow()
	}
	return st
}

// traceRec is one trace_recorder dispatch.
type traceRec struct {
	InvocationID  string
	StateIn       any
	StatePost     any
	PartialUpdate any
	PreSeen       bool
	PostSeen      bool
}

func (r *traceRec) view() map[string]any {
	m := map[string]any{"state_in": r.StateIn, "pre_seen": r.PreSeen, "post_seen": r.PostSeen}
	if r.PostSeen {
		m["state_seen_in_post_phase"] = r.StatePost
		m["partial_update_returned"] = r.PartialUpdate
	}
	return m
}

type timingRec struct {
	InvocationID string
	Rec          graph.TimingRecord
}

func (r *timingRec) view() map[string]any {
	var cat any
	if r.Rec.ExceptionCategory != "" {
		cat = string(r.Rec.ExceptionCategory)
	}
	return map[string]any{
		"node_name": r.Rec.NodeName, "duration_ms": r.Rec.DurationMS(),
		"outcome": r.Rec.Outcome, "exception_category": cat,
	}
}

// caughtRec is one on_caught call.
type caughtRec struct {
	InvocationID string
	EventName    string
	Err          error
}

// puEvent is one event delivered to the harness's recording observer on
// the outermost graph: a node event or a failure-isolation event.
type puEvent struct {
	InvocationID string
	Node         *eventRec
	FI           *graph.FailureIsolationEvent
}

func (st *puState) record(ctx context.Context, ev graph.Event) error {
	pe := &puEvent{InvocationID: ev.EventInvocationID()}
	switch e := ev.(type) {
	case *graph.NodeEvent:
		pe.Node = eventRecOf(e)
	case *graph.FailureIsolationEvent:
		pe.FI = e
	default:
		return nil
	}
	st.mu.Lock()
	st.events = append(st.events, pe)
	st.mu.Unlock()
	return nil
}

// eventsFor returns the recorded events of one invocation ("" = all).
func (st *puState) eventsFor(invocationID string) []*puEvent {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*puEvent
	for _, e := range st.events {
		if invocationID == "" || e.InvocationID == invocationID {
			out = append(out, e)
		}
	}
	return out
}

func (st *puState) nodeEvents(invocationID string) []*eventRec {
	var out []*eventRec
	for _, e := range st.eventsFor(invocationID) {
		if e.Node != nil {
			out = append(out, e.Node)
		}
	}
	return out
}

func (st *puState) fiEvents(invocationID string) []*graph.FailureIsolationEvent {
	var out []*graph.FailureIsolationEvent
	for _, e := range st.eventsFor(invocationID) {
		if e.FI != nil {
			out = append(out, e.FI)
		}
	}
	return out
}

// markBody records that an outer node body ran, under the run's tag
// (runTag: a resume reuses its invocation id).
func (st *puState) markBody(ctx context.Context, node string) {
	id := runTag(ctx)
	st.mu.Lock()
	defer st.mu.Unlock()
	m := st.bodyRan[id]
	if m == nil {
		m = map[string]bool{}
		st.bodyRan[id] = m
	}
	m[node] = true
}

func (st *puState) ran(tag, node string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.bodyRan[tag][node]
}

// eventCount is how many events the recording observer has received.
func (st *puState) eventCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.events)
}

// nodeEventsOf returns one run's node events: those of its invocation id
// received in [from, to).
func (st *puState) nodeEventsOf(invocationID string, from, to int) []*eventRec {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*eventRec
	for _, e := range st.events[from:min(to, len(st.events))] {
		if e.Node != nil && e.InvocationID == invocationID {
			out = append(out, e.Node)
		}
	}
	return out
}

func (st *puState) totalFlakyCalls() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for _, c := range st.calls {
		n += c
	}
	return n
}

// --- failure mocks ---------------------------------------------------------

// mockError is an error a failure mock raises (conformance-adapter §5.1):
// its own message, an optional chained cause, and a transient flag the
// default retry classifier reads. catMockError adds a category.
type mockError struct {
	msg       string
	transient bool
	cause     error
}

// Error returns the mock's message.
func (e *mockError) Error() string { return e.msg }

// Message returns the mock's own message (errcat.Messager).
func (e *mockError) Message() string { return e.msg }

// Transient reports the fixture's transient flag.
func (e *mockError) Transient() bool { return e.transient }

// Unwrap returns the chained cause.
func (e *mockError) Unwrap() error { return e.cause }

type catMockError struct {
	mockError
	cat errcat.Category
}

// Category returns the fixture's category.
func (e *catMockError) Category() errcat.Category { return e.cat }

// Is matches the category.
func (e *catMockError) Is(target error) bool { return errcat.Matches(e.cat, target) }

func buildMockError(fe *failEntry) error {
	var cause error
	if fe.cause != nil {
		cause = buildMockError(fe.cause)
	}
	base := mockError{msg: fe.message, transient: fe.transient, cause: cause}
	if fe.category == "" {
		return &base
	}
	return &catMockError{mockError: base, cat: errcat.Category(fe.category)}
}

// itemFieldFor returns the item_field the fan-outs of the case assign in
// subgraph g ("" when g is not a fan-out items subgraph).
func (x *geExec) itemFieldFor(g *geGraph) string {
	for _, pg := range append([]*geGraph{x.gc.outer}, sortedGraphs(x.gc.subgraphs)...) {
		for _, n := range pg.nodes {
			if n.fan != nil && n.fan.sub == g.name && n.fan.itemField != "" {
				return n.fan.itemField
			}
		}
	}
	return ""
}

// instanceKey identifies the fan-out instance a mock runs in: its item
// value when the subgraph is an items-mode fan-out subgraph, else its
// fan_out_index.
func (x *geExec) instanceKey(ctx context.Context, g *geGraph, s graph.State) (key string, item any, hasItem bool) {
	if g != nil {
		if f := x.itemFieldFor(g); f != "" {
			if v, ok := s.Get(f); ok {
				return "item:" + formatValue(v), v, true
			}
		}
	}
	if info, ok := graph.CurrentNode(ctx); ok && info.FanOutIndex != nil {
		return "index:" + strconv.Itoa(*info.FanOutIndex), nil, false
	}
	return "", nil, false
}

// runFlaky is the body of a failure mock.
func (x *geExec) runFlaky(ctx context.Context, fs *flakySpec, node string, g *geGraph, s graph.State) (graph.Update, error) {
	st := x.pu
	st.mu.Lock()
	call := st.calls[fs]
	st.calls[fs] = call + 1
	st.mu.Unlock()
	cat := fs.category
	switch fs.kind {
	case "flaky":
		if fs.compact {
			id := graph.InvocationID(ctx)
			st.mu.Lock()
			if _, seen := st.firstInv[fs]; !seen {
				st.firstInv[fs] = id
			}
			first := st.firstInv[fs] == id
			st.mu.Unlock()
			if fs.firstInvocationOnly && first {
				return nil, &mockError{msg: fmt.Sprintf("flaky node %s fails its first invocation", node)}
			}
			break
		}
		if call < len(fs.seq) && fs.seq[call] != nil {
			return nil, buildMockError(fs.seq[call])
		}
	case "flaky_per_index", "flaky_resume_aware":
		// Invocation-keyed: the first invocation id the mock sees is the
		// first run; any other is a resume.
		id := graph.InvocationID(ctx)
		st.mu.Lock()
		if _, seen := st.firstInv[fs]; !seen {
			st.firstInv[fs] = id
		}
		first := st.firstInv[fs] == id
		n := st.bumpLocked(fs, id)
		st.mu.Unlock()
		fail := false
		if fs.kind == "flaky_resume_aware" {
			fail = first && n < fs.failCount || !first && n < fs.resumedCount
		} else if info, ok := graph.CurrentNode(ctx); ok && info.FanOutIndex != nil {
			fail = (fs.alwaysFail || first) && slices.Contains(fs.perIndex, int64(*info.FanOutIndex))
		}
		if fail {
			c := errcat.Category(cat)
			if c == "" {
				return nil, &mockError{msg: fmt.Sprintf("%s: node %s fails (call %d of invocation %s)", fs.kind, node, n, id)}
			}
			return nil, &catMockError{mockError: mockError{msg: fmt.Sprintf("%s: node %s fails", fs.kind, node), transient: c.Transient()}, cat: c}
		}
	case "flaky_by_index", "flaky_instance_only":
		if cat == "" {
			cat = string(errcat.ProviderUnavailable)
		}
		key, item, hasItem := x.instanceKey(ctx, g, s)
		fail := false
		if fs.failWhenIdx != nil {
			if hasItem {
				fail = scalarEqual(item, *fs.failWhenIdx)
			} else if info, ok := graph.CurrentNode(ctx); ok && info.FanOutIndex != nil {
				fail = int64(*info.FanOutIndex) == *fs.failWhenIdx
			}
		} else {
			st.mu.Lock()
			n := st.bumpLocked(fs, key)
			st.mu.Unlock()
			fail = n < fs.failCount
		}
		if fail {
			c := errcat.Category(cat)
			return nil, &catMockError{
				mockError: mockError{msg: fmt.Sprintf("%s: node %s fails for instance %s", fs.kind, node, key), transient: c.Transient()},
				cat:       c,
			}
		}
	}
	return x.successUpdate(fs.success, g, s), nil
}

// bumpLocked counts a call of the mock under key and returns the count
// before it; st.mu is held.
func (st *puState) bumpLocked(fs *flakySpec, key string) int {
	m := st.perKey[fs]
	if m == nil {
		m = map[string]int{}
		st.perKey[fs] = m
	}
	n := m[key]
	m[key] = n + 1
	return n
}

// successUpdate resolves a success mapping: a string value naming a
// declared state field is read from that field; anything else is literal
// (conformance-adapter §5.1).
func (x *geExec) successUpdate(v *Value, g *geGraph, s graph.State) graph.Update {
	upd := graph.Update{}
	if v == nil || v.IsNull() {
		return upd
	}
	for _, f := range v.Fields {
		if f.Value.Kind == KindString && g != nil && g.field(f.Value.Str) != nil {
			upd[f.Key], _ = s.Get(f.Value.Str)
			continue
		}
		upd[f.Key] = f.Value.Native()
	}
	return upd
}

// --- middleware ------------------------------------------------------------

type onCaughtKey struct{}

// middleware builds a middleware chain from its specs. g is the graph
// whose nodes it wraps (nil for instance / branch middleware).
func (x *geExec) middleware(specs []*mwSpec) ([]graph.Middleware, error) {
	var out []graph.Middleware
	for _, m := range specs {
		built, err := x.buildMiddleware(m)
		if err != nil {
			return nil, err
		}
		out = append(out, built...)
	}
	return out, nil
}

func (x *geExec) buildMiddleware(m *mwSpec) ([]graph.Middleware, error) {
	if m.custom != nil {
		return []graph.Middleware{m.custom}, nil
	}
	st := x.pu
	switch m.typ {
	case "trace_recorder":
		return []graph.Middleware{graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
			rec := &traceRec{InvocationID: graph.InvocationID(ctx), StateIn: normalize(s), PreSeen: true}
			st.mu.Lock()
			st.traces[m.name] = append(st.traces[m.name], rec)
			st.mu.Unlock()
			u, err := next(ctx, s)
			if err != nil {
				return nil, err
			}
			if m.hasMarkers {
				out := make(graph.Update, len(u)+1)
				for k, v := range u {
					out[k] = v
				}
				var trace []any
				if m.preMarker != "" {
					trace = append(trace, m.preMarker)
				}
				if inner, ok := normalize(u["trace"]).([]any); ok {
					trace = append(trace, inner...)
				}
				if m.postMarker != "" {
					trace = append(trace, m.postMarker)
				}
				out["trace"] = trace
				u = out
			}
			st.mu.Lock()
			rec.PostSeen, rec.StatePost, rec.PartialUpdate = true, normalize(s), normalize(u)
			st.mu.Unlock()
			return u, nil
		})}, nil
	case "short_circuit":
		return []graph.Middleware{graph.MiddlewareFunc(func(context.Context, graph.State, graph.Next) (graph.Update, error) {
			return updateOf(m.partial), nil
		})}, nil
	case "error_recovery":
		return []graph.Middleware{graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
			u, err := next(ctx, s)
			if err != nil && ctx.Err() == nil {
				return updateOf(m.partial), nil
			}
			return u, err
		})}, nil
	case "error_raiser":
		return []graph.Middleware{graph.MiddlewareFunc(func(context.Context, graph.State, graph.Next) (graph.Update, error) {
			return nil, errors.New(m.message)
		})}, nil
	case mwFunc:
		return []graph.Middleware{m.fn}, nil
	case mwEmitsLog:
		return []graph.Middleware{graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
			x.logStep(ctx, m.logStep)
			return next(ctx, s)
		})}, nil
	case "retry":
		cfg := graph.RetryConfig{MaxAttempts: m.maxAttempts}
		backoff := m.backoff
		cfg.Backoff = func(int) time.Duration { return backoff }
		if m.classifier == "state_aware_max_retries_remaining" {
			cfg.Classifier = func(_ error, s graph.State) bool {
				v, _ := s.Get("max_retries_remaining")
				f, ok := toFloat(normalize(v))
				return ok && f > 0
			}
		}
		if cats := m.transientCats; cats != nil {
			// The surface category, or the derived one through carriers:
			// a branch failure (parallel_branches_branch_failed) inherits
			// its cause's transient classification (pipeline-utilities
			// §11.9), which the node-level classifier matches (119).
			cfg.Classifier = func(err error, _ graph.State) bool {
				derived, _ := errcat.Derived(err)
				return slices.Contains(cats, string(errcat.Of(err))) || slices.Contains(cats, string(derived))
			}
		}
		r, err := graph.NewRetry(cfg)
		if err != nil {
			return nil, schemaErrorf(m.pos, "retry: %v", err)
		}
		return []graph.Middleware{r}, nil
	case "timing":
		cfg := graph.TimingConfig{
			NodeName: m.nodeName,
			Now:      st.now,
			OnComplete: func(ctx context.Context, r graph.TimingRecord) error {
				st.mu.Lock()
				st.timings = append(st.timings, &timingRec{InvocationID: graph.InvocationID(ctx), Rec: r})
				st.mu.Unlock()
				return nil
			},
		}
		t, err := graph.NewTiming(cfg)
		if err != nil {
			return nil, schemaErrorf(m.pos, "timing: %v", err)
		}
		return []graph.Middleware{t}, nil
	case "failure_isolation":
		return x.buildFailureIsolation(m)
	case mwWrap:
		return []graph.Middleware{x.wrapMiddleware(m)}, nil
	}
	return nil, &DirectiveUnknownError{Name: m.typ, Pos: m.pos}
}

var templateRe = regexp.MustCompile(`\{\{\s*state\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// renderTemplate expands {{ state.<field> }} placeholders (the
// state_derived degraded_update of fixtures 059, 065, 069, 071).
func renderTemplate(tmpl string, s graph.State) string {
	return templateRe.ReplaceAllStringFunc(tmpl, func(match string) string {
		field := templateRe.FindStringSubmatch(match)[1]
		v, _ := s.Get(field)
		if str, ok := v.(string); ok {
			return str
		}
		return formatValue(v)
	})
}

func (x *geExec) buildFailureIsolation(m *mwSpec) ([]graph.Middleware, error) {
	st := x.pu
	cfg := graph.FailureIsolationConfig{EventName: m.eventName}
	if m.degraded != nil {
		cfg.Degraded = updateOf(m.degraded)
	} else {
		tmpl, target := m.degradedTmpl, m.degradedTarget
		cfg.DegradedFunc = func(_ context.Context, s graph.State) (graph.Update, error) {
			st.mu.Lock()
			st.degradeIn = append(st.degradeIn, normalize(s))
			st.mu.Unlock()
			return graph.Update{target: renderTemplate(tmpl, s)}, nil
		}
	}
	for _, c := range m.catch {
		cfg.Catch = append(cfg.Catch, errcat.Category(c))
	}
	if m.hasPredicate {
		want := errcat.Category(m.predicateCat)
		// The predicate sees the surface (caught) exception's own
		// category (pipeline-utilities §6.3).
		cfg.Predicate = func(err error) bool {
			c, ok := err.(errcat.Categorized)
			return ok && c.Category() == want
		}
	}
	cfg.OnCaught = func(ctx context.Context, err error) {
		rec := &caughtRec{InvocationID: graph.InvocationID(ctx), EventName: m.eventName, Err: err}
		st.mu.Lock()
		st.caught = append(st.caught, rec)
		st.mu.Unlock()
		if ch, ok := ctx.Value(onCaughtKey{}).(*sideChannel); ok {
			ch.mu.Lock()
			ch.caught = append(ch.caught, err)
			ch.mu.Unlock()
		}
	}
	fi, err := graph.NewFailureIsolation(cfg)
	if err != nil {
		return nil, schemaErrorf(m.pos, "failure_isolation: %v", err)
	}
	if m.onCaught == nil {
		return []graph.Middleware{fi}, nil
	}
	// record_to_state_side_channel (fixture 062): the on_caught callback
	// records into a per-dispatch side channel; a harness layer just
	// outside the isolation middleware folds it into the returned update
	// (increment_field += calls, capture_message_field = the message).
	spec := m.onCaught
	inject := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		ch := &sideChannel{}
		u, err := next(context.WithValue(ctx, onCaughtKey{}, ch), s)
		ch.mu.Lock()
		caught := slices.Clone(ch.caught)
		ch.mu.Unlock()
		if err != nil || len(caught) == 0 {
			return u, err
		}
		out := make(graph.Update, len(u)+2)
		for k, v := range u {
			out[k] = v
		}
		prev, _ := s.Get(spec.incrementField)
		n, _ := normalize(prev).(int64)
		out[spec.incrementField] = n + int64(len(caught))
		_, msg := errcat.Derived(caught[len(caught)-1])
		out[spec.messageField] = msg
		return out, nil
	})
	return []graph.Middleware{inject, fi}, nil
}

type sideChannel struct {
	mu     sync.Mutex
	caught []error
}

func updateOf(v *Value) graph.Update {
	upd := graph.Update{}
	if v == nil {
		return upd
	}
	for _, f := range v.Fields {
		upd[f.Key] = f.Value.Native()
	}
	return upd
}

// --- fan-out and parallel branches -----------------------------------------

func (x *geExec) intSource(src *intSource) graph.IntSource {
	if src.callable == "" {
		return graph.Fixed(src.literal)
	}
	field, chunk, callable := src.field, src.chunk, src.callable
	return func(s graph.State) (int, error) {
		v, ok := s.Get(field)
		if !ok {
			return 0, fmt.Errorf("conformance: %s: state has no field %q", callable, field)
		}
		if callable == "queue_chunk" {
			l, ok := normalize(v).([]any)
			if !ok {
				return 0, fmt.Errorf("conformance: queue_chunk: field %q is not a list", field)
			}
			return max(1, len(l)/chunk), nil
		}
		n, ok := normalize(v).(int64)
		if !ok {
			return 0, fmt.Errorf("conformance: state_field_read: field %q is not an int", field)
		}
		return int(n), nil
	}
}

func (x *geExec) fanOutConfig(fo *geFanOut) (graph.FanOut, error) {
	cfg := graph.FanOut{
		Subgraph:     x.graphs[fo.sub],
		ItemsField:   fo.itemsField,
		ItemField:    fo.itemField,
		CollectField: fo.collect,
		TargetField:  fo.target,
		ErrorPolicy:  graph.ErrorPolicy(fo.errorPolicy),
		ErrorsField:  fo.errorsField,
		OnEmpty:      graph.OnEmpty(fo.onEmpty),
		CountField:   fo.countField,
		Inputs:       fo.inputs,
		ExtraOutputs: fo.extraOutputs,
	}
	if fo.count != nil {
		cfg.Count = x.intSource(fo.count)
	}
	switch {
	case fo.concurrentMode == "serial":
		cfg.Concurrency = graph.Fixed(1)
	case fo.concurrency == nil:
	case fo.concurrency.null:
		cfg.Unbounded = true
	default:
		cfg.Concurrency = x.intSource(fo.concurrency)
	}
	mws, err := x.middleware(fo.instanceMws)
	if err != nil {
		return cfg, err
	}
	if x.gc.probeConcurrency {
		// The concurrency probe (fixture 022 concurrency_invariant): an
		// outermost instance layer counting instances in flight.
		st := x.pu
		probe := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
			st.mu.Lock()
			st.inFlight++
			st.maxInFlight = max(st.maxInFlight, st.inFlight)
			st.mu.Unlock()
			defer func() {
				st.mu.Lock()
				st.inFlight--
				st.mu.Unlock()
			}()
			return next(ctx, s)
		})
		mws = append([]graph.Middleware{probe}, mws...)
	}
	cfg.InstanceMiddleware = mws
	return cfg, nil
}

func (x *geExec) branchesConfig(g *geGraph, pb *geBranches) (graph.ParallelBranches, error) {
	cfg := graph.ParallelBranches{ErrorPolicy: graph.ErrorPolicy(pb.errorPolicy), ErrorsField: pb.errorsField}
	for _, b := range pb.branches {
		br := graph.Branch{Name: b.name, Inputs: b.inputs, Outputs: b.outputs}
		if b.sub != "" {
			br.Subgraph = x.graphs[b.sub]
		}
		if b.call != nil {
			br.Call = x.nodeFunc(b.call, g, false)
		}
		mws, err := x.middleware(b.mws)
		if err != nil {
			return cfg, err
		}
		br.Middleware = mws
		if b.whenField != "" {
			field := b.whenField
			br.When = func(_ context.Context, s graph.State) (bool, error) {
				v, _ := s.Get(field)
				return truthy(v), nil
			}
		}
		cfg.Branches = append(cfg.Branches, br)
	}
	return cfg, nil
}

// truthy is the when: {field} check of fixture 074.
func truthy(v any) bool {
	switch n := normalize(v).(type) {
	case nil:
		return false
	case bool:
		return n
	case int64:
		return n != 0
	case float64:
		return n != 0
	case string:
		return n != ""
	case []any:
		return len(n) > 0
	case map[string]any:
		return len(n) > 0
	}
	return true
}
