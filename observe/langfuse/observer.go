package langfuse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/observe/internal/openspans"
)

// Defaults of the trace attribution rows (observability §5.1, §8.4.1).
const (
	// ImplementationName is trace.metadata.implementation_name.
	ImplementationName = "armature-go"
	// DefaultSpecVersion is the openarmature-spec version Armature
	// targets (trace.metadata.spec_version).
	DefaultSpecVersion = "0.109.0"
	// DefaultImplementationVersion is used when Config leaves it empty.
	DefaultImplementationVersion = "0.1.0-dev"
)

// Trace output status values of the minimal stub (observability §8.4.1).
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	// StatusSuspended reports an invocation that suspended awaiting a
	// signal (an Armature extension of the closed {completed, failed}
	// enum: a suspension is neither).
	StatusSuspended = "suspended"
)

// Exporter receives the ingestion events of the observer. Export is
// called on the invocation's observer-delivery goroutine, never on a
// node's, and must not block: a [Client] queues the events and sends them
// in the background. An Exporter that also implements
// Flush(context.Context) error is flushed by [Observer.Flush].
type Exporter interface {
	Export(events []Event)
}

// Errors of [New].
var (
	// ErrNoExporter: Config names neither an Exporter nor a Langfuse
	// host to build a client for.
	ErrNoExporter = errors.New("langfuse: Config needs an Exporter or Client credentials")
	// ErrInvalidConfig is matched by the error for an invalid Config
	// field.
	ErrInvalidConfig = errors.New("langfuse: invalid config")
)

// Config configures an [Observer].
//
// The client is supplied in one of two forms (observability §8.9 client
// ownership): Exporter, a caller-constructed client (a [*Client] or any
// Exporter), which the observer uses as it is and never reconfigures or
// shuts down; or, when Exporter is nil, Client's credentials, from which
// the observer builds and owns a [*Client] ([Observer.Shutdown] shuts it
// down). Either way the observations go only to that client: the
// observer does not use OpenTelemetry, so nothing it emits reaches an
// OTel TracerProvider, the global one or any other (§6 provider
// isolation holds by construction).
type Config struct {
	// Exporter is a caller-constructed client (mode a).
	Exporter Exporter
	// Client configures the client the observer builds when Exporter is
	// nil (mode b): Host, PublicKey and SecretKey at least.
	Client ClientConfig
	// DisableLLMSpans suppresses the Generation observations (§8.9
	// disable_llm_spans); node, tool and provider observations still
	// emit.
	DisableLLMSpans bool
	// CaptureProviderPayload renders the provider payloads: generation
	// input/output and request extras, tool arguments and results,
	// embedding input strings and vectors, rerank query, documents and
	// results. Off by default: the zero value is §8.7
	// disable_provider_payload = true.
	CaptureProviderPayload bool
	// CaptureStatePayload serializes the initial and final states onto
	// trace.input / trace.output. Off by default: the zero value is
	// §8.4.1 disable_state_payload = true (the privacy-safe stub).
	CaptureStatePayload bool
	// TraceInputFromState and TraceOutputFromState are the §8.4.1 caller
	// hooks: called once per invocation with the initial (on the first
	// node event) and the final state, their non-nil result becomes
	// trace.input / trace.output (capped). A nil result falls through to
	// the raw state (CaptureStatePayload) or the stub.
	TraceInputFromState  func(graph.State) any
	TraceOutputFromState func(graph.State) any
	// TraceName, when set, names each invocation's trace (§8.6 MAY); an
	// empty result falls back to the entry node's name. A per-invocation
	// label is [Observer.Labeled].
	TraceName func(*graph.InvocationEvent) string
	// PayloadMaxBytes caps each payload field (§5.5.5); 0 means
	// [DefaultPayloadMaxBytes]. Values below [MinPayloadMaxBytes] are
	// rejected with [ErrInvalidConfig].
	PayloadMaxBytes int
	// DetachedSubgraphs names the subgraphs ([graph.WithName]) and
	// DetachedFanOuts the fan-out nodes traced in detached mode (§4.4,
	// §8.5): each run of such a subgraph and each instance of such a
	// fan-out gets a Langfuse trace of its own, referenced from the
	// dispatching observation's metadata.detached_child_trace_ids.
	DetachedSubgraphs []string
	DetachedFanOuts   []string
	// SpecVersion and ImplementationVersion override the trace metadata
	// rows (defaults DefaultSpecVersion and DefaultImplementationVersion).
	SpecVersion           string
	ImplementationVersion string
	// Environment, Release and Version set the traces' Langfuse fields of
	// those names; empty leaves them unset.
	Environment, Release, Version string
	// Now stamps the event envelopes (observation times are the graph
	// events' own); nil means time.Now. NewID mints observation, event
	// and detached trace ids; nil means random UUIDs.
	Now   func() time.Time
	NewID func() string
	// Logger receives the observer's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Observer maps graph events onto Langfuse traces and observations
// (OpenArmature observability §8). Register [Observer.Observe] with
// [graph.InvocationEvents]. It is safe for concurrent use, though the
// engine delivers each invocation's events strictly serially.
type Observer struct {
	exp   Exporter
	owned *Client

	disableLLM, payload, statePayload bool
	inputHook, outputHook             func(graph.State) any
	traceName                         func(*graph.InvocationEvent) string
	payloadMax                        int
	detachedSubs, detachedFans        map[string]bool
	specVersion, implVersion          string
	env, release, version             string
	now                               func() time.Time
	newID                             func() string
	logger                            *slog.Logger

	mu   sync.Mutex
	invs map[invKey]*invState
	// cur is the delivery of the event Observe is rendering under mu
	// (see invKey).
	cur <-chan struct{}
	// firstToken is the time of each streamed call's first token, by
	// call id, for its generation's completionStartTime.
	firstToken map[string]time.Time
}

// New returns an Observer exporting through cfg.Exporter, or through a
// client built from cfg.Client.
func New(cfg Config) (*Observer, error) {
	if cfg.PayloadMaxBytes != 0 && cfg.PayloadMaxBytes < MinPayloadMaxBytes {
		return nil, fmt.Errorf("%w: PayloadMaxBytes %d is below the minimum %d", ErrInvalidConfig, cfg.PayloadMaxBytes, MinPayloadMaxBytes)
	}
	o := &Observer{
		exp: cfg.Exporter, disableLLM: cfg.DisableLLMSpans, payload: cfg.CaptureProviderPayload,
		statePayload: cfg.CaptureStatePayload, inputHook: cfg.TraceInputFromState, outputHook: cfg.TraceOutputFromState,
		traceName: cfg.TraceName, payloadMax: cfg.PayloadMaxBytes,
		detachedSubs: map[string]bool{}, detachedFans: map[string]bool{},
		specVersion: cfg.SpecVersion, implVersion: cfg.ImplementationVersion,
		env: cfg.Environment, release: cfg.Release, version: cfg.Version,
		now: cfg.Now, newID: cfg.NewID, logger: cfg.Logger,
		invs: map[invKey]*invState{}, firstToken: map[string]time.Time{},
	}
	if o.exp == nil {
		if cfg.Client.Host == "" {
			return nil, ErrNoExporter
		}
		c, err := NewClient(cfg.Client)
		if err != nil {
			return nil, err
		}
		o.exp, o.owned = c, c
	}
	for _, n := range cfg.DetachedSubgraphs {
		o.detachedSubs[n] = true
	}
	for _, n := range cfg.DetachedFanOuts {
		o.detachedFans[n] = true
	}
	if o.payloadMax == 0 {
		o.payloadMax = DefaultPayloadMaxBytes
	}
	if o.specVersion == "" {
		o.specVersion = DefaultSpecVersion
	}
	if o.implVersion == "" {
		o.implVersion = DefaultImplementationVersion
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.newID == nil {
		o.newID = uuid.New
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o, nil
}

// Exporter returns the exporter the observer emits to: the one Config
// supplied, or the client it built.
func (o *Observer) Exporter() Exporter { return o.exp }

// Flush waits until the exporter has sent every event emitted so far,
// when it can be flushed (a [*Client] can), or ctx ends.
func (o *Observer) Flush(ctx context.Context) error {
	if f, ok := o.exp.(interface{ Flush(context.Context) error }); ok {
		return f.Flush(ctx)
	}
	return nil
}

// Shutdown flushes the exporter and, when the observer built the client
// (Config.Client), shuts the client down. A supplied Exporter is only
// flushed: its owner shuts it down.
func (o *Observer) Shutdown(ctx context.Context) error {
	if o.owned != nil {
		return o.owned.Shutdown(ctx)
	}
	return o.Flush(ctx)
}

// Labeled returns an observer for invocations labeled label (the §8.6
// caller-supplied invocation label, which names their traces). Register
// it for one invocation, in place of attaching o to the graph:
//
//	g.Invoke(ctx, in, graph.WithObserver(o.Labeled("nightly-import"), graph.InvocationEvents()))
func (o *Observer) Labeled(label string) graph.Observer {
	return func(ctx context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.InvocationEvent); ok && e != nil && e.Phase == graph.PhaseStarted {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.cur = ctx.Done()
			defer func() { o.cur = nil }()
			o.invocationStarted(e, label)
			o.watch(ctx, e.InvocationID)
			return nil
		}
		return o.Observe(ctx, ev)
	}
}

// spanKind tells the open span observations apart.
type spanKind uint8

const (
	// kindNode is a node attempt's span (a NodeEvent pair).
	kindNode spanKind = iota
	// kindSubgraph is a subgraph node's span (a SubgraphEvent pair).
	kindSubgraph
	// kindUnit is a synthesized fan-out instance or branch dispatch span.
	kindUnit
)

// traceState is one Langfuse trace of an invocation: its own, or a
// detached unit's.
type traceState struct {
	id    string
	name  string
	entry string
	// depth is the namespace length of the nodes directly in the trace
	// (their last one is the trace output's final_node).
	depth    int
	lastNode string
	failed   bool
	meta     map[string]any
}

// invKey identifies one invocation's state: its id and its delivery,
// the Done channel of the context Observe receives its events with
// (each invocation's own, cancelled when its delivery ends). Two
// invocations running at once with the same caller-supplied id
// ([graph.WithInvocationID]) thus keep separate states; an observer
// called with contexts that are never cancelled (all the invocation's
// observers [graph.Synchronous], or events replayed by hand) tells
// same-id invocations apart only when they do not overlap.
type invKey struct {
	id   string
	done <-chan struct{}
}

// inv returns the state of invocation id in the delivery of the event
// being rendered, nil when none; o.mu is held.
func (o *Observer) inv(id string) *invState { return o.invs[invKey{id, o.cur}] }

// forget drops st (o.mu held) and stops its abandonment watch.
func (o *Observer) forget(st *invState) {
	delete(o.invs, st.key)
	if st.stop != nil {
		st.stop()
		st.stop = nil
	}
}

// watch arranges for the state of the event's invocation, if any, to be
// dropped when its delivery ends before its completed event is rendered:
// a [graph.Graph.Drain] whose [graph.DrainTimeout] abandoned it cancels
// ctx (an asynchronous observer's; a [graph.Synchronous] observer's is
// cancelled when the invocation ends), and the invocation's open observations are then ended (their
// span-updates exported) rather than kept for the life of the process.
// o.mu is held.
func (o *Observer) watch(ctx context.Context, id string) {
	if o.cur == nil {
		return // never cancelled
	}
	st := o.invs[invKey{id, o.cur}]
	if st == nil || st.stop != nil {
		return
	}
	key := st.key
	st.stop = context.AfterFunc(ctx, func() { o.abandon(key) })
}

// abandon ends the open observations of the invocation state key, whose
// delivery ended early, and drops it.
func (o *Observer) abandon(key invKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.invs[key]
	if st == nil {
		return
	}
	delete(o.invs, key)
	st.stop = nil
	o.closeAll(st, o.now().UTC())
}

type invState struct {
	// key is the state's key in o.invs; stop cancels its abandonment
	// watch (see Observer.watch).
	key                      invKey
	stop                     func() bool
	invID, corrID, sessionID string
	// trace is the invocation's trace; nil when the observer did not see
	// the started InvocationEvent (its observations then go to a trace it
	// creates on first use).
	trace *traceState
	// traces are the invocation's traces by id (its own and the detached
	// ones).
	traces map[string]*traceState
	// md is the outermost context's metadata, as last seen.
	md graph.Metadata
	// open holds the open span observations, oldest first, indexed by
	// lineage.
	open openspans.Set[*span]
	// initial is the initial state, from the first node event.
	initial    graph.State
	hasInitial bool
	input      any
}

// span is an open span observation.
type span struct {
	openspans.Entry
	kind spanKind
	// attempt is a node or subgraph span's attempt index (0 for a unit):
	// with kind, ns and the chains, its §6 event-source identity.
	attempt  int
	ns       []string
	fan      []*int
	br       []*string
	id       string
	traceID  string
	parentID string
	parent   *span
	name     string
	start    time.Time
	meta     map[string]any
	fanOut   *graph.FanOutConfig
	branches *graph.ParallelBranchesConfig
	units    []*span
	// failed, failCat: a unit's outcome so far (its last direct child's).
	failed  bool
	failCat string
	// lastEnd is a unit's latest direct child end so far: a detached
	// fan-out instance's window ends there (§4.1).
	lastEnd time.Time
	// also are companion observations ending with this one: for a
	// detached subgraph, the dispatch observation left in the parent
	// trace.
	also []*span
	// detached is the trace this span roots (a detached unit or
	// subgraph), finalized when it ends.
	detached *traceState
	// childTraces are the detached traces this dispatch observation
	// references, by unit order.
	childTraces map[int]string
}

// Lineage returns the span's namespace and lineage chains.
func (s *span) Lineage() ([]string, []*int, []*string) { return s.ns, s.fan, s.br }

// OpenEntry returns the span's membership in its invocation's open set.
func (s *span) OpenEntry() *openspans.Entry { return &s.Entry }

// lineageIs reports whether s has the lineage.
func (s *span) lineageIs(ns []string, fan []*int, br []*string) bool {
	return slices.Equal(s.ns, ns) && chainEq(s.fan, fan, intEq) && chainEq(s.br, br, strEq)
}

// is reports whether s has the §6 event-source identity and kind.
func (s *span) is(kind spanKind, ns []string, attempt int, fan []*int, br []*string) bool {
	return s.kind == kind && s.attempt == attempt && s.lineageIs(ns, fan, br)
}

// Observe is a [graph.Observer]. It handles *graph.InvocationEvent,
// *graph.SubgraphEvent, *graph.NodeEvent and *graph.MetadataEvent, renders
// *graph.LLMCompletionEvent / *graph.LLMFailedEvent as Generation
// observations and *graph.ToolCallEvent / *graph.ToolCallFailedEvent as
// Tool observations, records the first *graph.LLMTokenEvent of a streamed
// call (its generation's completionStartTime; token events are not
// rendered) and ignores every other event. It never returns an error.
//
// Its state per invocation is keyed by the invocation and its delivery
// (ctx: see [graph.Observer]), and dropped, its open observations ended,
// when ctx is cancelled before the invocation's completed event: a drain
// that timed out abandoned the delivery.
func (o *Observer) Observe(ctx context.Context, ev graph.Event) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cur = ctx.Done()
	defer func() { o.cur = nil }()
	switch e := ev.(type) {
	case *graph.InvocationEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.invocationStarted(e, "")
			o.watch(ctx, e.InvocationID)
		} else {
			o.invocationCompleted(e)
		}
	case *graph.NodeEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.nodeStarted(e)
			o.watch(ctx, e.InvocationID)
		} else {
			o.nodeEnded(e)
		}
	case *graph.SubgraphEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.subgraphStarted(e)
			o.watch(ctx, e.InvocationID)
		} else {
			o.subgraphEnded(e)
		}
	case *graph.MetadataEvent:
		if e != nil {
			o.metadataAdded(e)
		}
	default:
		o.observeCall(ev)
	}
	return nil
}

func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t.UTC()
}

func ptr[T any](v T) *T { return &v }

// emit hands events to the exporter.
func (o *Observer) emit(evs ...Event) {
	if len(evs) > 0 {
		o.exp.Export(evs)
	}
}

func (o *Observer) event(t EventType, body any) Event {
	return Event{ID: o.newID(), Type: t, Timestamp: o.now().UTC(), Body: body}
}

// traceMeta returns a trace's metadata: the caller's entries, then the
// OA rows (§8.4.1).
func (o *Observer) traceMeta(md graph.Metadata, invID, corrID, entry string) map[string]any {
	m := map[string]any{}
	copyMeta(m, md)
	m["correlation_id"] = corrID
	m["entry_node"] = entry
	m["spec_version"] = o.specVersion
	m["implementation_name"] = ImplementationName
	m["implementation_version"] = o.implVersion
	if !IsUUID(invID) {
		m["invocation_id"] = invID
	}
	return m
}

// copyMeta copies the caller metadata md into m, each value made
// encodable (metaValue).
func copyMeta(m map[string]any, md graph.Metadata) {
	for k, v := range md.All() {
		m[k] = metaValue(v)
	}
}

// metaValue returns a caller metadata value as JSON can encode it: a
// non-finite float (graph metadata accepts NaN and ±Inf, JSON has no
// such numbers, and one would make the client drop every event carrying
// it, the whole trace) becomes its string form ("NaN", "+Inf", "-Inf"),
// in a slice too.
func metaValue(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	case float32:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case []float64:
		if slices.ContainsFunc(x, func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }) {
			out := make([]any, len(x))
			for i, f := range x {
				out[i] = metaValue(f)
			}
			return out
		}
	}
	return v
}

// userID returns the promoted trace.userId: the caller metadata's userId
// entry as a string (§8.4.1).
func userID(md graph.Metadata) string {
	v, ok := md.Get("userId")
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func (o *Observer) invocationStarted(e *graph.InvocationEvent, label string) {
	if old := o.inv(e.InvocationID); old != nil {
		// A stale invocation with the same id and delivery (no completed
		// event seen): close its observations rather than leak them.
		o.closeAll(old, stamp(e.Time))
		o.forget(old)
	}
	name := label
	if name == "" && o.traceName != nil {
		name = o.resolveName(e)
	}
	if name == "" {
		name = e.EntryNode
	}
	st := &invState{key: invKey{e.InvocationID, o.cur}, invID: e.InvocationID, corrID: e.CorrelationID, sessionID: e.SessionID, md: e.Metadata,
		traces: map[string]*traceState{}}
	st.trace = &traceState{id: TraceID(e.InvocationID), name: name, entry: e.EntryNode, depth: 1,
		meta: o.traceMeta(e.Metadata, e.InvocationID, e.CorrelationID, e.EntryNode)}
	st.traces[st.trace.id] = st.trace
	o.invs[st.key] = st
	body := o.traceBody(st, st.trace)
	body.Timestamp = ptr(stamp(e.Time))
	if o.inputHook == nil && !o.statePayload {
		st.input = o.stubInput(st.trace, e.CorrelationID)
		body.Input = st.input
	}
	o.emit(o.event(TraceCreate, body))
}

// resolveName runs Config.TraceName, isolating a panic.
func (o *Observer) resolveName(e *graph.InvocationEvent) (name string) {
	defer func() {
		if p := recover(); p != nil {
			o.logger.Warn("langfuse: trace name resolver panicked", "panic", fmt.Sprint(p))
			name = ""
		}
	}()
	return o.traceName(e)
}

// traceBody returns the trace-create body of t with its identity fields.
func (o *Observer) traceBody(st *invState, t *traceState) *TraceBody {
	return &TraceBody{ID: t.id, Name: t.name, SessionID: st.sessionID, UserID: userID(st.md),
		Metadata: maps.Clone(t.meta), Environment: o.env, Release: o.release, Version: o.version}
}

func (o *Observer) stubInput(t *traceState, corrID string) any {
	return map[string]any{"entry_node": t.entry, "correlation_id": corrID}
}

// captureInitial records the invocation's initial state from the first
// node event and resolves trace.input (§8.4.1: hook, raw state, stub).
func (o *Observer) captureInitial(st *invState, e *graph.NodeEvent) {
	if st.hasInitial {
		return
	}
	st.hasInitial = true
	switch {
	case len(e.Namespace) <= 1:
		st.initial = e.PreState
	case len(e.ParentStates) > 0:
		st.initial = e.ParentStates[0]
	}
	if st.trace != nil && st.input == nil {
		st.input = o.stateIO(st, st.initial, o.inputHook, func() any { return o.stubInput(st.trace, st.corrID) })
	}
}

// stateIO resolves one of trace.input / trace.output by the §8.4.1
// decision tree.
func (o *Observer) stateIO(st *invState, s graph.State, hook func(graph.State) any, stub func() any) (out any) {
	if hook != nil && !s.IsZero() {
		v := o.callHook(hook, s)
		if v != nil {
			return structured(v, o.payloadMax)
		}
	}
	if o.statePayload && !s.IsZero() {
		return structured(s, o.payloadMax)
	}
	return stub()
}

// callHook runs a caller hook, isolating a panic.
func (o *Observer) callHook(hook func(graph.State) any, s graph.State) (v any) {
	defer func() {
		if p := recover(); p != nil {
			o.logger.Warn("langfuse: trace state hook panicked", "panic", fmt.Sprint(p))
			v = nil
		}
	}()
	return hook(s)
}

func (o *Observer) invocationCompleted(e *graph.InvocationEvent) {
	st := o.inv(e.InvocationID)
	if st == nil {
		return
	}
	o.forget(st)
	end := stamp(e.Time)
	o.closeAll(st, end)
	if st.trace == nil {
		return
	}
	st.md = e.Metadata
	t := st.trace
	copyMeta(t.meta, e.Metadata)
	status := StatusCompleted
	switch e.Status {
	case graph.Errored:
		status = StatusFailed
	case graph.Suspended:
		status = StatusSuspended
	}
	if st.input == nil {
		st.input = o.stateIO(st, st.initial, o.inputHook, func() any { return o.stubInput(t, st.corrID) })
	}
	body := o.traceBody(st, t)
	body.Input = st.input
	body.Output = o.stateIO(st, e.State, o.outputHook, func() any {
		return map[string]any{"final_node": t.lastNode, "status": status}
	})
	o.emit(o.event(TraceCreate, body))
}

// closeAll ends st's open observations, innermost first.
func (o *Observer) closeAll(st *invState, end time.Time) {
	st.open.Backward(func(s *span) bool {
		o.endSpan(st, s, end, LevelDefault, "", nil)
		return true
	})
	st.open.Clear()
}

// state returns the invocation's state, creating one for an observer
// that did not see the invocation start (registered without
// InvocationEvents): its observations go to the invocation's trace id,
// which it never creates.
func (o *Observer) state(invID, corrID string) *invState {
	st := o.inv(invID)
	if st == nil {
		st = &invState{key: invKey{invID, o.cur}, invID: invID, corrID: corrID, traces: map[string]*traceState{}}
		o.invs[st.key] = st
	}
	return st
}

func (st *invState) traceID() string {
	if st.trace != nil {
		return st.trace.id
	}
	return TraceID(st.invID)
}

// baseMeta returns the metadata every observation carries: the caller's
// entries in scope, the innermost fan-out index and branch name of its
// lineage and the correlation id (§8.4.2, §8.5).
func (st *invState) baseMeta(md graph.Metadata, fan []*int, br []*string) map[string]any {
	m := map[string]any{}
	copyMeta(m, md)
	if i := innermost(fan); i != nil {
		m["fan_out_index"] = *i
	}
	if b := innermost(br); b != nil {
		m["branch_name"] = *b
	}
	m["correlation_id"] = st.corrID
	return m
}

func innermost[T any](chain []*T) *T {
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i] != nil {
			return chain[i]
		}
	}
	return nil
}

// startSpan opens s under parent (nil: the trace root) and emits its
// span-create.
func (o *Observer) startSpan(st *invState, s *span, parent *span, t time.Time) {
	s.parent = parent
	s.start = t
	if s.id == "" {
		s.id = o.newID()
	}
	if s.traceID == "" {
		s.traceID = st.traceID()
		if parent != nil {
			s.traceID, s.parentID = parent.traceID, parent.id
		}
	}
	st.open.Add(s)
	o.emit(o.event(SpanCreate, &ObservationBody{ID: s.id, TraceID: s.traceID, ParentObservationID: s.parentID,
		Name: s.name, StartTime: ptr(t), Metadata: maps.Clone(s.meta), Environment: o.env}))
}

// endSpan emits s's span-update (and its companions') with the level.
func (o *Observer) endSpan(st *invState, s *span, end time.Time, level, status string, extra map[string]any) {
	if s.childTraces != nil {
		idx := slices.Sorted(maps.Keys(s.childTraces))
		ids := make([]string, len(idx))
		for i, k := range idx {
			ids[i] = s.childTraces[k]
		}
		s.meta["detached_child_trace_ids"] = ids
	}
	for _, x := range append([]*span{s}, s.also...) {
		maps.Copy(x.meta, extra)
		o.emit(o.event(SpanUpdate, &ObservationBody{ID: x.id, TraceID: x.traceID, ParentObservationID: x.parentID,
			Name: x.name, EndTime: ptr(end), Level: level, StatusMessage: status, Metadata: maps.Clone(x.meta),
			Environment: o.env}))
	}
	if d := s.detached; d != nil {
		d.failed = level == LevelError
		o.finishDetached(st, d)
	}
}

// finishDetached emits the final trace-create of a detached trace.
func (o *Observer) finishDetached(st *invState, d *traceState) {
	status := StatusCompleted
	if d.failed {
		status = StatusFailed
	}
	body := o.traceBody(st, d)
	body.Input = o.stubInput(d, st.corrID)
	body.Output = map[string]any{"final_node": d.lastNode, "status": status}
	o.emit(o.event(TraceCreate, body))
}

// startDetached creates a detached trace (§4.4, §8.5) for a unit whose
// entry is entry, named name.
func (o *Observer) startDetached(st *invState, name, entry string, depth int, md graph.Metadata, t time.Time) *traceState {
	d := &traceState{id: TraceID(o.newID()), name: name, entry: entry, depth: depth,
		meta: o.traceMeta(md, st.invID, st.corrID, entry)}
	d.meta["detached_from_invocation_id"] = st.invID
	st.traces[d.id] = d
	body := o.traceBody(st, d)
	body.Timestamp = ptr(t)
	body.Input = o.stubInput(d, st.corrID)
	o.emit(o.event(TraceCreate, body))
	return d
}

func (o *Observer) nodeStarted(e *graph.NodeEvent) {
	st := o.state(e.InvocationID, e.CorrelationID)
	o.captureInitial(st, e)
	t := stamp(e.Time)
	parent := o.parentOf(st, e.Namespace, e.FanOutIndexChain, e.BranchNameChain, t, e.Metadata)
	meta := st.baseMeta(e.Metadata, e.FanOutIndexChain, e.BranchNameChain)
	meta["namespace"] = slices.Clone(e.Namespace)
	meta["step"] = e.Step
	meta["attempt_index"] = e.AttemptIndex
	if c := e.FanOutConfig; c != nil {
		concurrency := 0 // unbounded (§5.4 sentinel)
		if c.Concurrency != nil {
			concurrency = *c.Concurrency
		}
		meta["fan_out_item_count"] = c.ItemCount
		meta["fan_out_concurrency"] = concurrency
		meta["fan_out_error_policy"] = c.ErrorPolicy
		if o.detachedFans[e.NodeName] && c.ItemCount > 0 {
			meta["detached"] = true
		}
	}
	if c := e.ParallelBranchesConfig; c != nil {
		meta["parallel_branches_branch_count"] = c.BranchCount
		meta["parallel_branches_error_policy"] = c.ErrorPolicy
	}
	// A subgraph wrapper takes no step of its own: its observation's step
	// is its first inner node's.
	if p := parent; p != nil && p.kind == kindSubgraph {
		if _, ok := p.meta["step"]; !ok {
			p.meta["step"] = e.Step
			for _, a := range p.also {
				a.meta["step"] = e.Step
			}
		}
	}
	s := &span{
		kind: kindNode, attempt: e.AttemptIndex,
		ns: e.Namespace, fan: e.FanOutIndexChain, br: e.BranchNameChain, name: e.NodeName, meta: meta,
		fanOut: e.FanOutConfig, branches: e.ParallelBranchesConfig,
	}
	o.startSpan(st, s, parent, t)
}

func (o *Observer) subgraphStarted(e *graph.SubgraphEvent) {
	st := o.state(e.InvocationID, e.CorrelationID)
	t := stamp(e.Time)
	parent := o.parentOf(st, e.Namespace, e.FanOutIndexChain, e.BranchNameChain, t, e.Metadata)
	meta := st.baseMeta(e.Metadata, e.FanOutIndexChain, e.BranchNameChain)
	meta["namespace"] = slices.Clone(e.Namespace)
	meta["attempt_index"] = e.AttemptIndex
	if e.SubgraphName != "" {
		meta["subgraph_name"] = e.SubgraphName
	}
	s := &span{
		kind: kindSubgraph, attempt: e.AttemptIndex,
		ns: e.Namespace, fan: e.FanOutIndexChain, br: e.BranchNameChain, name: e.NodeName, meta: meta,
	}
	if e.SubgraphName == "" || !o.detachedSubs[e.SubgraphName] {
		o.startSpan(st, s, parent, t)
		return
	}
	// Detached: the dispatch observation stays in the parent trace, marked
	// and pointing at the detached trace, where an observation named
	// after the subgraph parents the inner nodes' (§8.5).
	d := o.startDetached(st, e.SubgraphName, e.EntryNode, len(e.Namespace)+1, e.Metadata, t)
	dispatch := &span{kind: kindSubgraph, ns: e.Namespace, name: e.NodeName, meta: maps.Clone(meta)}
	dispatch.meta["detached"] = true
	dispatch.meta["detached_child_trace_ids"] = []string{d.id}
	o.startSpan(st, dispatch, parent, t)
	st.open.Remove(dispatch) // tracked through s.also
	s.name, s.traceID, s.detached, s.also = e.SubgraphName, d.id, d, []*span{dispatch}
	o.startSpan(st, s, nil, t)
}

// parentOf returns the span an event at ns with the given lineage nests
// under, nil for the trace root. The immediate dispatch boundary decides:
// inside a fan-out instance or branch it is the unit span (synthesized on
// the unit's first event), inside a plain subgraph the subgraph span. An
// enclosing dispatch whose span is not open falls back to the next one
// out.
func (o *Observer) parentOf(st *invState, ns []string, fan []*int, br []*string, t time.Time, md graph.Metadata) *span {
	var parent *span
	for n := 1; n < len(ns) && n <= len(fan) && n <= len(br); n++ {
		if fan[n-1] != nil || br[n-1] != nil {
			if u := o.unit(st, ns[:n], fan[:n], br[:n], t, md, entryOf(ns, n)); u != nil {
				parent = u
				continue
			}
		}
		if d := st.dispatch(ns[:n], fan[:n-1], br[:n-1]); d != nil {
			parent = d
		}
	}
	return parent
}

// dispatch returns the latest open node or subgraph span at ns with the
// given lineage.
func (st *invState) dispatch(ns []string, fan []*int, br []*string) *span {
	c := st.open.Candidates(ns, fan, br)
	for i := len(c) - 1; i >= 0; i-- {
		if s := c[i]; s.kind != kindUnit && s.lineageIs(ns, fan, br) {
			return s
		}
	}
	return nil
}

// unit returns the open unit span of the fan-out instance or branch
// identified by ns and the chains, synthesizing it under its dispatch
// node's span on first use (§6, §8.4.8); nil when that span is not open.
func (o *Observer) unit(st *invState, ns []string, fan []*int, br []*string, t time.Time, md graph.Metadata, entry string) *span {
	n := len(ns)
	if u := st.find(kindUnit, ns, 0, fan, br); u != nil {
		return u
	}
	d := st.dispatch(ns, fan[:n-1], br[:n-1])
	if d == nil {
		return nil
	}
	name := ns[n-1]
	meta := st.baseMeta(md, fan, br)
	switch {
	case fan[n-1] != nil:
		meta["fan_out_parent_node_name"] = name
		if d.fanOut != nil && d.fanOut.SubgraphName != "" {
			meta["subgraph_name"] = d.fanOut.SubgraphName
		}
	case d.branches != nil:
		name = *br[n-1]
		meta["parallel_branches_parent_node_name"] = ns[n-1]
	default:
		name = *br[n-1]
	}
	u := &span{kind: kindUnit, ns: slices.Clone(ns), fan: slices.Clone(fan), br: slices.Clone(br), name: name, meta: meta}
	if i := fan[n-1]; i != nil && o.detachedFans[ns[n-1]] {
		// A detached fan-out instance roots a trace of its own, referenced
		// from the fan-out node's observation.
		dt := o.startDetached(st, name, entry, n+1, md, t)
		u.traceID, u.detached = dt.id, dt
		if d.childTraces == nil {
			d.childTraces = map[int]string{}
		}
		d.childTraces[*i] = dt.id
		d.meta["detached"] = true
		o.startSpan(st, u, nil, t)
		u.parent = d
	} else {
		o.startSpan(st, u, d, t)
	}
	d.units = append(d.units, u)
	return u
}

// entryOf returns the name below ns[:n] in the namespace of the event
// that opens a unit: the unit's first node, its entry.
func entryOf(ns []string, n int) string {
	if n < len(ns) {
		return ns[n]
	}
	return ""
}

func intEq(a, b *int) bool    { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func strEq(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func chainEq[T any](a, b []*T, eq func(a, b *T) bool) bool { return slices.EqualFunc(a, b, eq) }

// find returns the latest open span with the identity.
func (st *invState) find(kind spanKind, ns []string, attempt int, fan []*int, br []*string) *span {
	c := st.open.Candidates(ns, fan, br)
	for i := len(c) - 1; i >= 0; i-- {
		if s := c[i]; s.is(kind, ns, attempt, fan, br) {
			return s
		}
	}
	return nil
}

// take removes the oldest open span with the identity from st.
func (st *invState) take(kind spanKind, ns []string, attempt int, fan []*int, br []*string) *span {
	for _, s := range st.open.Candidates(ns, fan, br) {
		if s.is(kind, ns, attempt, fan, br) {
			st.open.Remove(s)
			return s
		}
	}
	return nil
}

// spanCategory is the error category of a failed node or subgraph: the
// derived category of the error's cause chain (pipeline-utilities §6.3),
// so a node that raised a categorized error reports that category; an
// uncategorized raise falls back to the event's (node_exception).
func spanCategory(err error, eventCat errcat.Category) string {
	if cat, _ := errcat.Derived(err); cat != "" {
		return string(cat)
	}
	return string(eventCat)
}

func (o *Observer) nodeEnded(e *graph.NodeEvent) {
	st := o.inv(e.InvocationID)
	if st == nil {
		return
	}
	s := st.take(kindNode, e.Namespace, e.AttemptIndex, e.FanOutIndexChain, e.BranchNameChain)
	if s == nil {
		return
	}
	t := stamp(e.Time)
	o.endUnits(st, s, t)
	level, status, extra := LevelDefault, "", map[string]any{}
	switch {
	case e.Phase == graph.PhaseSuspended:
		extra["outcome"] = StatusSuspended
		if e.Descriptor != nil {
			extra["suspension_signal_id"] = e.Descriptor.SignalID
		}
	case e.Err != nil:
		level, status = LevelError, spanCategory(e.Err, e.ErrorCategory)
	}
	o.endSpan(st, s, t, level, status, extra)
	o.ended(st, s, e.NodeName, e.Err != nil, status, t)
}

func (o *Observer) subgraphEnded(e *graph.SubgraphEvent) {
	st := o.inv(e.InvocationID)
	if st == nil {
		return
	}
	s := st.take(kindSubgraph, e.Namespace, e.AttemptIndex, e.FanOutIndexChain, e.BranchNameChain)
	if s == nil {
		return
	}
	level, status := LevelDefault, ""
	if e.Err != nil {
		level, status = LevelError, spanCategory(e.Err, e.ErrorCategory)
	}
	o.endSpan(st, s, stamp(e.Time), level, status, nil)
	o.ended(st, s, e.NodeName, e.Err != nil, status, stamp(e.Time))
}

// ended records an ended span's outcome on its unit parent and on the
// trace whose last node it may be, and drops the state of an invocation
// the observer tracks without its trace.
func (o *Observer) ended(st *invState, s *span, node string, failed bool, cat string, t time.Time) {
	if p := s.parent; p != nil && p.kind == kindUnit {
		p.failed, p.failCat = failed, cat
		if t.After(p.lastEnd) {
			p.lastEnd = t
		}
	}
	for _, x := range append([]*span{s}, s.also...) {
		if t := st.traces[x.traceID]; t != nil && len(x.ns) == t.depth {
			t.lastNode = node
		}
	}
	if st.trace == nil && st.open.Len() == 0 {
		o.forget(st)
	}
}

// endUnits ends the unit spans of a fan-out or parallel-branches node
// span as the node ends (instances by index, branches in declaration
// order). A unit whose last child failed is ERROR.
func (o *Observer) endUnits(st *invState, d *span, t time.Time) {
	if len(d.units) == 0 {
		return
	}
	units := d.units
	d.units = nil
	order := func(u *span) int {
		n := len(u.ns)
		if i := u.fan[n-1]; i != nil {
			return *i
		}
		if d.branches != nil {
			if k := slices.Index(d.branches.BranchNames, *u.br[n-1]); k >= 0 {
				return k
			}
		}
		return math.MaxInt
	}
	slices.SortStableFunc(units, func(a, b *span) int { return order(a) - order(b) })
	for _, u := range units {
		if !st.open.Remove(u) {
			continue
		}
		level, status := LevelDefault, ""
		if u.failed {
			level, status = LevelError, u.failCat
		}
		// A detached instance's observation, the root of its trace,
		// matches its own window (§4.1): it ends with its last child.
		end := t
		if u.detached != nil && !u.lastEnd.IsZero() && u.lastEnd.Before(t) {
			end = u.lastEnd
		}
		o.endSpan(st, u, end, level, status, nil)
	}
}

// metadataAdded applies a mid-invocation augmentation (§3.4) to the
// observations still open in the augmenting context and its call-stack
// ancestors — never a shared fan-out / parallel-branches node's, nor a
// sibling's — and to the trace when no fan-out instance or branch lies
// on the path. The entries reach Langfuse with each one's span-update
// (and the trace's final trace-create).
func (o *Observer) metadataAdded(e *graph.MetadataEvent) {
	st := o.inv(e.InvocationID)
	if st == nil || e.Added.Len() == 0 {
		return
	}
	add := map[string]any{}
	copyMeta(add, e.Added)
	ns, fan, br := e.Namespace, e.FanOutIndexChain, e.BranchNameChain
	var s *span
	forked := slices.ContainsFunc(fan, func(i *int) bool { return i != nil }) ||
		slices.ContainsFunc(br, func(b *string) bool { return b != nil })
	if e.NodeName != "" {
		s = st.find(kindNode, ns, e.AttemptIndex, fan, br)
	} else if n := len(ns); n > 0 && n == len(fan) && n == len(br) {
		forked = true
		if s = st.find(kindUnit, ns, 0, fan, br); s == nil {
			if d := st.dispatch(ns, fan[:n-1], br[:n-1]); d != nil {
				s = d.parent
			} else {
				return
			}
		}
	}
	for ; s != nil; s = s.parent {
		if s.kind == kindUnit {
			forked = true
		}
		if s.fanOut != nil || s.branches != nil {
			continue // a shared parent
		}
		maps.Copy(s.meta, add)
		for _, a := range s.also {
			maps.Copy(a.meta, add)
		}
	}
	if !forked && st.trace != nil {
		maps.Copy(st.trace.meta, add)
		st.md = e.Metadata
	}
}

// OpenObservations reports how many span observations the observer holds
// open, for leak checks.
func (o *Observer) OpenObservations() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, st := range o.invs {
		n += st.open.Len()
	}
	return n
}
