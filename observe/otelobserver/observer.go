package otelobserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/observe/internal/openspans"
)

// Attribute keys (observability §5).
const (
	AttrInvocationID          = "openarmature.invocation_id"
	AttrCorrelationID         = "openarmature.correlation_id"
	AttrSessionID             = "openarmature.session_id"
	AttrEntryNode             = "openarmature.graph.entry_node"
	AttrSpecVersion           = "openarmature.graph.spec_version"
	AttrImplementationName    = "openarmature.implementation.name"
	AttrImplementationVersion = "openarmature.implementation.version"
	AttrOutcome               = "openarmature.outcome"
	AttrNodeName              = "openarmature.node.name"
	AttrNodeNamespace         = "openarmature.node.namespace"
	AttrNodeStep              = "openarmature.node.step"
	AttrNodeAttemptIndex      = "openarmature.node.attempt_index"
	AttrNodeFanOutIndex       = "openarmature.node.fan_out_index"
	AttrNodeBranchName        = "openarmature.node.branch_name"
	AttrErrorCategory         = "openarmature.error.category"
	AttrSubgraphName          = "openarmature.subgraph.name"
	// Fan-out node span (item count, concurrency, error policy) and
	// instance span (parent node name) attributes, §5.4.
	AttrFanOutItemCount      = "openarmature.fan_out.item_count"
	AttrFanOutConcurrency    = "openarmature.fan_out.concurrency"
	AttrFanOutErrorPolicy    = "openarmature.fan_out.error_policy"
	AttrFanOutParentNodeName = "openarmature.fan_out.parent_node_name"
	// Parallel-branches node span (branch count, error policy) and branch
	// dispatch span (parent node name) attributes, §5.7.
	AttrBranchesBranchCount    = "openarmature.parallel_branches.branch_count"
	AttrBranchesErrorPolicy    = "openarmature.parallel_branches.error_policy"
	AttrBranchesParentNodeName = "openarmature.parallel_branches.parent_node_name"
	AttrSuspensionSignalID     = "openarmature.suspension.signal_id"
	// AttrSuspensionMetadataPrefix prefixes each flattened descriptor
	// metadata key.
	AttrSuspensionMetadataPrefix = "openarmature.suspension.metadata."
	// AttrUserPrefix prefixes each caller-supplied invocation metadata
	// key (§5.6 openarmature.user.<key>).
	AttrUserPrefix = "openarmature.user."
)

// Span names and defaults (observability §4.5, §5.1).
const (
	InvocationSpanName = "openarmature.invocation"
	// ImplementationName is the openarmature.implementation.name value.
	ImplementationName = "armature-go"
	// DefaultSpecVersion is the openarmature-spec version Armature targets.
	DefaultSpecVersion = "0.109.0"
	// DefaultImplementationVersion is used when Config leaves it empty.
	DefaultImplementationVersion = "0.1.0-dev"
	// TracerName is the instrumentation scope name of the spans.
	TracerName = "github.com/armature-go/armature/observe/otelobserver"
)

// Outcome values of openarmature.outcome.
const (
	OutcomeCompleted = "completed"
	OutcomeErrored   = "errored"
	OutcomeSuspended = "suspended"
)

// ErrNoTracerProvider is returned by [New] when Config.TracerProvider is
// nil. The observer never falls back to the global provider
// (observability §6 TracerProvider isolation).
var ErrNoTracerProvider = errors.New("otelobserver: Config.TracerProvider is required")

// Config configures an [Observer].
type Config struct {
	// TracerProvider receives every span. Required; it should be a
	// private provider, not the one registered as the OTel global.
	TracerProvider trace.TracerProvider
	// SpecVersion and ImplementationVersion override the
	// openarmature.graph.spec_version and openarmature.implementation.version
	// invocation-span attributes (defaults DefaultSpecVersion and
	// DefaultImplementationVersion).
	SpecVersion           string
	ImplementationVersion string
	// DisableLLMSpans suppresses the LLM provider span (observability
	// §5.5 disable_llm_spans); node and tool spans still emit.
	DisableLLMSpans bool
	// CaptureProviderPayload emits the payload attributes (LLM messages,
	// output content and tool calls, request extras; tool arguments and
	// results) and the text of failures' errors. Off by default: the
	// zero value is observability §5.5.4 disable_provider_payload = true.
	// While it is off, a failed span's exception event carries its
	// error's type and a fixed exception.message ([MsgToolFailed] and
	// the like), never the error's text, which may quote the payload (a
	// tool's invalid arguments, an MCP tool's error result, a provider's
	// echo of the request, a node error wrapping any of these); the
	// status description is the error category (the error type for a
	// tool span) either way.
	CaptureProviderPayload bool
	// DisableGenAISemconv suppresses the gen_ai.* request and response
	// attributes and the cache attributes (§5.5.4).
	DisableGenAISemconv bool
	// GenAISystem, when set, overrides the provider's gen_ai.system
	// value on every LLM span (§5.5.3).
	GenAISystem string
	// EnableMetrics records the §11 metrics (token usage and operation
	// duration histograms of every provider call attempt) through
	// MeterProvider; off by default. With a nil MeterProvider recording
	// is a no-op.
	EnableMetrics bool
	// MeterProvider supplies the Meter of the §11 instruments.
	MeterProvider metric.MeterProvider
	// PayloadMaxBytes caps each payload attribute (§5.5.5); 0 means
	// [DefaultPayloadMaxBytes]. Values below [MinPayloadMaxBytes] are
	// rejected with [ErrInvalidConfig].
	PayloadMaxBytes int
	// DetachedSubgraphs names the subgraphs ([graph.WithName]) and
	// DetachedFanOuts the fan-out nodes traced in detached mode (§4.4):
	// each run of such a subgraph, and each instance of such a fan-out,
	// gets a trace of its own, rooted in an openarmature.invocation span
	// sharing the invocation id, and the dispatching span in the parent
	// trace links to it.
	DetachedSubgraphs []string
	DetachedFanOuts   []string
	// Logger receives a WARNING record for each LLM call whose usage
	// exceeds its active prompt's token budget (observability §5.5.15),
	// carrying the §7 correlation fields; nil means slog.Default().
	Logger *slog.Logger
}

// The exception.message of a failed span's exception event when
// Config.CaptureProviderPayload is off: fixed texts standing for the
// error's, which may quote the payload.
const (
	MsgToolFailed       = "the tool call failed"
	MsgCallFailed       = "the provider call failed"
	MsgNodeFailed       = "the node failed"
	MsgInvocationFailed = "the invocation failed"
)

// ErrInvalidConfig is matched by the error [New] returns for an invalid
// Config field other than the tracer provider.
var ErrInvalidConfig = errors.New("otelobserver: invalid config")

// Observer turns graph events into OTel spans. Register [Observer.Observe]
// with [graph.InvocationEvents] so it sees invocation boundaries. It is
// safe for concurrent use, though the engine delivers each invocation's
// events strictly serially.
type Observer struct {
	tracer      trace.Tracer
	specVersion string
	implVersion string
	// The §5.5.4 flags and §5.5.5 cap.
	disableLLMSpans bool
	payload         bool
	disableGenAI    bool
	genAISystem     string
	payloadMax      int
	// metrics is nil unless Config.EnableMetrics.
	metrics *llmMetrics
	// logger receives the token-budget warnings.
	logger *slog.Logger
	// spans is false when the TracerProvider is OpenTelemetry's no-op
	// one: see [Observer.Spans].
	spans bool
	// logs is set once LogHandler was called: its records need the
	// invocations' state even without spans.
	logs atomic.Bool
	// detachedSubs and detachedFans are Config's detached sets.
	detachedSubs, detachedFans map[string]bool

	// constAttrs are the invocation span's constant attributes (spec
	// version, implementation name and version); completed and suspended
	// the openarmature.outcome attribute of an OK span. Never modified.
	constAttrs, completed, suspended []attribute.KeyValue
	// finishReasons holds the gen_ai.response.finish_reasons attribute of
	// each known finish reason; never modified.
	finishReasons map[llm.FinishReason]attribute.KeyValue
	// namespaces caches the openarmature.node.namespace attribute of a
	// top-level node (a one-name namespace), by node name.
	namespaces sync.Map
	// internal and client are the span start options of the span kinds.
	internal, client trace.SpanStartOption
	// attrBufs pools the attribute slices spans start with (the tracer
	// copies them).
	attrBufs sync.Pool

	// shards hold the state of the invocations in flight, each
	// invocation in the shard its id hashes to (seed): the events of
	// different invocations render concurrently unless their ids share a
	// shard.
	seed   maphash.Seed
	shards [invShards]invShard
}

// invShards is the number of invocation-state shards of an Observer.
const invShards = 32

// invShard is a lock and the state of the invocations whose events it
// serializes, padded to a cache line of its own.
type invShard struct {
	mu   sync.Mutex
	invs map[invKey]*invState
	// cur is the delivery of the event Observe is rendering under mu
	// (see invKey).
	cur <-chan struct{}
	_   [64 - 24]byte
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

// shardOf returns the shard of invocation id.
func (o *Observer) shardOf(id string) *invShard {
	return &o.shards[maphash.String(o.seed, id)%invShards]
}

// inv returns the state of invocation id in the delivery of the event
// being rendered, nil when none; its shard is locked.
func (o *Observer) inv(id string) *invState {
	sh := o.shardOf(id)
	return sh.invs[invKey{id, sh.cur}]
}

// forget drops st from its shard (locked) and stops its abandonment
// watch.
func (o *Observer) forget(st *invState) {
	delete(o.shardOf(st.key.id).invs, st.key)
	if st.stop != nil {
		st.stop()
		st.stop = nil
	}
}

// watch arranges for the state of the event's invocation, if any, to be
// dropped when its delivery ends before its completed event is rendered:
// a [graph.Graph.Drain] whose [graph.DrainTimeout] abandoned it cancels
// ctx (an asynchronous observer's; a [graph.Synchronous] observer's is
// cancelled when the invocation ends), and the invocation's open spans are then ended (with no status)
// rather than kept, unexported, for the life of the process. The
// shard is locked.
func (o *Observer) watch(ctx context.Context, sh *invShard, id string) {
	if sh.cur == nil {
		return // never cancelled
	}
	st := sh.invs[invKey{id, sh.cur}]
	if st == nil || st.stop != nil {
		return
	}
	key := st.key
	st.stop = context.AfterFunc(ctx, func() { o.abandon(key) })
}

// abandon ends the spans of the invocation state key, whose delivery
// ended early, and drops it.
func (o *Observer) abandon(key invKey) {
	sh := o.shardOf(key.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.invs[key]
	if st == nil {
		return
	}
	delete(sh.invs, key)
	st.stop = nil
	end := time.Now()
	o.closeAll(st, end, "")
	if st.span != nil {
		st.opts.endSpan(st.span, end)
	}
}

// invocationOf returns the invocation id of an event of a type Observe
// handles; false for any other event and a nil one.
func invocationOf(ev graph.Event) (string, bool) {
	switch e := ev.(type) {
	case *graph.InvocationEvent:
		return idOf(e)
	case *graph.NodeEvent:
		return idOf(e)
	case *graph.MetadataEvent:
		return idOf(e)
	case *graph.EmittedEvent:
		return idOf(e)
	case *graph.SubgraphEvent:
		return idOf(e)
	case *graph.LLMCompletionEvent:
		return idOf(e)
	case *graph.LLMFailedEvent:
		return idOf(e)
	case *graph.ToolCallEvent:
		return idOf(e)
	case *graph.ToolCallFailedEvent:
		return idOf(e)
	case *graph.EmbeddingEvent:
		return idOf(e)
	case *graph.EmbeddingFailedEvent:
		return idOf(e)
	case *graph.RerankEvent:
		return idOf(e)
	case *graph.RerankFailedEvent:
		return idOf(e)
	}
	return "", false
}

// idOf returns a non-nil event's invocation id.
func idOf[E any, P interface {
	*E
	graph.Event
}](e P) (string, bool) {
	if e == nil {
		return "", false
	}
	return e.EventInvocationID(), true
}

type invState struct {
	// key is the state's key in its shard; stop cancels its abandonment
	// watch (see Observer.watch).
	key  invKey
	stop func() bool
	// span is the invocation span; nil when the observer did not see the
	// started InvocationEvent (registered without InvocationEvents).
	span      trace.Span
	ctx       context.Context
	sessionID string
	// open holds the open spans below the invocation span (node,
	// subgraph, fan-out instance and branch dispatch spans), oldest
	// first, indexed by lineage.
	open openspans.Set[*nodeSpan]
	// opts holds the options of the span starts and ends.
	opts spanOpts
	// openBuf backs open while it holds at most four spans.
	openBuf [4]*nodeSpan
	// user is the last rendering of the invocation metadata's §5.6
	// attributes, which every span below the invocation span carries.
	user userAttrs
}

// spanOpts holds the options of one span start or end, so that the
// option slice of a Start or End call (an interface method, whose
// variadic arguments escape) is not allocated per span. It is used under
// its invocation's lock and cleared after each call.
type spanOpts struct {
	start [3]trace.SpanStartOption
	end   [1]trace.SpanEndOption
}

// startSpan starts a span from ctx at t with attrs and the kind option.
func (p *spanOpts) startSpan(tr trace.Tracer, ctx context.Context, name string, t time.Time, attrs []attribute.KeyValue, kind trace.SpanStartOption) (context.Context, trace.Span) {
	p.start[0], p.start[1], p.start[2] = trace.WithTimestamp(t), trace.WithAttributes(attrs...), kind
	ctx, sp := tr.Start(ctx, name, p.start[:3]...)
	clear(p.start[:])
	return ctx, sp
}

// endSpan ends sp at t.
func (p *spanOpts) endSpan(sp trace.Span, t time.Time) {
	p.end[0] = trace.WithTimestamp(t)
	sp.End(p.end[:]...)
	p.end[0] = nil
}

// userAttrs is a rendering of invocation metadata as its §5.6
// attributes, kept while its entries are all scalars so that the next
// span's metadata, usually the same, is compared rather than rendered
// again.
type userAttrs struct {
	keys  []string
	vals  []any
	attrs []attribute.KeyValue
}

// matches reports whether md holds exactly the rendered scalar entries.
func (u *userAttrs) matches(md graph.Metadata) bool {
	if u.keys == nil || md.Len() != len(u.keys) {
		return false
	}
	for i, k := range u.keys {
		if v, ok := md.Get(k); !ok || !scalar(v) || v != u.vals[i] {
			return false
		}
	}
	return true
}

// scalar reports whether v is of a comparable scalar type.
func scalar(v any) bool {
	switch v.(type) {
	case string, bool, int, int32, int64, uint32, uint64, float32, float64:
		return true
	}
	return false
}

// appendUser appends the UserAttributes of md, reusing (and keeping)
// st's rendering.
func (st *invState) appendUser(attrs []attribute.KeyValue, md graph.Metadata) []attribute.KeyValue {
	if md.Len() == 0 {
		return attrs
	}
	u := &st.user
	if !u.matches(md) {
		*u = userAttrs{}
		keys, vals := make([]string, 0, md.Len()), make([]any, 0, md.Len())
		for k, v := range md.All() {
			if !scalar(v) {
				return appendUserAttributes(attrs, md)
			}
			keys, vals = append(keys, k), append(vals, v)
		}
		u.keys, u.vals = keys, vals
		u.attrs = make([]attribute.KeyValue, len(keys))
		for i, k := range keys {
			u.attrs[i] = attrValue(AttrUserPrefix+k, vals[i])
		}
	}
	return append(attrs, u.attrs...)
}

// spanKind tells the open spans apart.
type spanKind uint8

const (
	// kindNode is a node attempt's span (a NodeEvent pair), including
	// fan-out and parallel-branches nodes.
	kindNode spanKind = iota
	// kindSubgraph is a subgraph node's span (a SubgraphEvent pair).
	kindSubgraph
	// kindUnit is a synthesized fan-out instance or branch dispatch span
	// (§5.4, §5.7): the child of its dispatch node's span and the parent
	// of the unit's inner spans.
	kindUnit
)

type nodeSpan struct {
	openspans.Entry
	kind spanKind
	// attempt is a node or subgraph span's attempt index (0 for a unit):
	// with kind, ns and the chains, the span's §6 event-source identity.
	attempt int
	// ns and the chains are the span's lineage: a node or subgraph span
	// has its event's (chains one shorter than ns); a unit span has its
	// dispatch node's namespace and the chains of the events inside it
	// cut to len(ns), whose last entry is the unit's index or branch.
	ns     []string
	fan    []*int
	br     []*string
	span   trace.Span
	ctx    context.Context
	parent *nodeSpan
	// A node span is started lazily (see invState.open): until then span
	// and ctx are nil and name, at and attrs (built in buf) hold its
	// start.
	name  string
	at    time.Time
	attrs []attribute.KeyValue
	buf   *attrBuf
	// calls are the call spans that ended under the pending span, to
	// start and end under it once it starts.
	calls []callSpan
	// fanOut / branches are the cached configuration of a fan-out or
	// parallel-branches node span; units its open unit spans.
	fanOut   *graph.FanOutConfig
	branches *graph.ParallelBranchesConfig
	units    []*nodeSpan
	// failed and failErr are a unit's outcome so far: whether the last
	// of its direct children to end failed, and with what.
	failed  bool
	failCat string
	failErr error
	// lastEnd is a unit's latest direct child end so far: a detached
	// fan-out instance's window ends there (§4.1).
	lastEnd time.Time
	// also are spans ending with this one, with the same outcome: a
	// detached unit's invocation span (the root of its trace) and, for a
	// detached subgraph, the dispatch span left in the parent trace
	// (span is then the subgraph span in the detached trace).
	also []trace.Span
}

// Lineage returns the span's namespace and lineage chains.
func (s *nodeSpan) Lineage() ([]string, []*int, []*string) { return s.ns, s.fan, s.br }

// OpenEntry returns the span's membership in its invocation's open set.
func (s *nodeSpan) OpenEntry() *openspans.Entry { return &s.Entry }

// lineageIs reports whether s has the lineage.
func (s *nodeSpan) lineageIs(ns []string, fan []*int, br []*string) bool {
	return slices.Equal(s.ns, ns) && chainEq(s.fan, fan, intEq) && chainEq(s.br, br, strEq)
}

// New returns an Observer emitting spans through cfg.TracerProvider.
func New(cfg Config) (*Observer, error) {
	if cfg.TracerProvider == nil {
		return nil, ErrNoTracerProvider
	}
	if cfg.PayloadMaxBytes != 0 && cfg.PayloadMaxBytes < MinPayloadMaxBytes {
		return nil, fmt.Errorf("%w: PayloadMaxBytes %d is below the minimum %d", ErrInvalidConfig, cfg.PayloadMaxBytes, MinPayloadMaxBytes)
	}
	o := &Observer{
		tracer:          cfg.TracerProvider.Tracer(TracerName),
		spans:           !isNoop(cfg.TracerProvider),
		specVersion:     cfg.SpecVersion,
		implVersion:     cfg.ImplementationVersion,
		disableLLMSpans: cfg.DisableLLMSpans,
		payload:         cfg.CaptureProviderPayload,
		disableGenAI:    cfg.DisableGenAISemconv,
		genAISystem:     cfg.GenAISystem,
		payloadMax:      cfg.PayloadMaxBytes,
		logger:          cfg.Logger,
		seed:            maphash.MakeSeed(),
		detachedSubs:    map[string]bool{}, detachedFans: map[string]bool{},
	}
	for _, n := range cfg.DetachedSubgraphs {
		o.detachedSubs[n] = true
	}
	for _, n := range cfg.DetachedFanOuts {
		o.detachedFans[n] = true
	}
	for i := range o.shards {
		o.shards[i].invs = map[invKey]*invState{}
	}
	if o.payloadMax == 0 {
		o.payloadMax = DefaultPayloadMaxBytes
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if cfg.EnableMetrics {
		m, err := newLLMMetrics(cfg.MeterProvider)
		if err != nil {
			return nil, err
		}
		o.metrics = m
	}
	if o.specVersion == "" {
		o.specVersion = DefaultSpecVersion
	}
	if o.implVersion == "" {
		o.implVersion = DefaultImplementationVersion
	}
	o.constAttrs = []attribute.KeyValue{
		attribute.String(AttrSpecVersion, o.specVersion),
		attribute.String(AttrImplementationName, ImplementationName),
		attribute.String(AttrImplementationVersion, o.implVersion),
	}
	o.internal = trace.WithSpanKind(trace.SpanKindInternal)
	o.client = trace.WithSpanKind(trace.SpanKindClient)
	o.completed = []attribute.KeyValue{attribute.String(AttrOutcome, OutcomeCompleted)}
	o.suspended = []attribute.KeyValue{attribute.String(AttrOutcome, OutcomeSuspended)}
	o.finishReasons = map[llm.FinishReason]attribute.KeyValue{}
	for _, r := range []llm.FinishReason{llm.FinishStop, llm.FinishLength, llm.FinishToolCalls, llm.FinishContentFilter, llm.FinishError} {
		o.finishReasons[r] = attribute.StringSlice(AttrGenAIFinishReasons, []string{string(r)})
	}
	return o, nil
}

// attrBuf is a pooled attribute slice, to build the attributes of a
// span start in (trace.WithAttributes copies them).
type attrBuf struct{ kv []attribute.KeyValue }

// attrBuf returns an attrBuf with an empty slice; release returns it.
func (o *Observer) attrBuf() *attrBuf {
	if b, ok := o.attrBufs.Get().(*attrBuf); ok {
		return b
	}
	return &attrBuf{kv: make([]attribute.KeyValue, 0, 24)}
}

// release returns b to the pool with attrs, the slice built from it,
// once the span it built started; a slice grown past 64 entries is left
// to the collector.
func (o *Observer) release(b *attrBuf, attrs []attribute.KeyValue) {
	if cap(attrs) > 64 {
		return
	}
	clear(attrs)
	b.kv = attrs[:0]
	o.attrBufs.Put(b)
}

// outcomeAttrs returns the openarmature.outcome attribute of outcome.
func (o *Observer) outcomeAttrs(outcome string) []attribute.KeyValue {
	switch outcome {
	case OutcomeCompleted:
		return o.completed
	case OutcomeSuspended:
		return o.suspended
	}
	return []attribute.KeyValue{attribute.String(AttrOutcome, outcome)}
}

// setOK gives a span the OK status and outcome.
func (o *Observer) setOK(sp trace.Span, outcome string) {
	sp.SetAttributes(o.outcomeAttrs(outcome)...)
	sp.SetStatus(codes.Ok, "")
}

// namespaceAttr returns the openarmature.node.namespace attribute of ns.
func (o *Observer) namespaceAttr(ns []string) attribute.KeyValue {
	if len(ns) != 1 {
		return attribute.StringSlice(AttrNodeNamespace, ns)
	}
	if kv, ok := o.namespaces.Load(ns[0]); ok {
		return kv.(attribute.KeyValue)
	}
	kv := attribute.StringSlice(AttrNodeNamespace, ns)
	o.namespaces.Store(ns[0], kv)
	return kv
}

// Spans reports whether the observer renders spans. It does not when
// Config.TracerProvider is OpenTelemetry's no-op provider
// (noop.NewTracerProvider): then, until [Observer.LogHandler] is called,
// it keeps no state per invocation and handles only the typed call
// events, for their §11 metrics (Config.EnableMetrics) and token-budget
// warnings. That is quick and never blocks, so such an observer may be
// registered [graph.Synchronous]: a graph whose observers are all
// synchronous runs an invocation without a delivery goroutine.
func (o *Observer) Spans() bool { return o.spans }

// Observe is a [graph.Observer]. It handles *graph.InvocationEvent,
// *graph.SubgraphEvent, *graph.NodeEvent, *graph.MetadataEvent and the
// log records of its [Observer.LogHandler] (*graph.EmittedEvent), renders
// the LLM provider spans of *graph.LLMCompletionEvent and
// *graph.LLMFailedEvent and the tool spans of *graph.ToolCallEvent and
// *graph.ToolCallFailedEvent, and ignores every other event type (token
// events are not rendered). Its error is a log handler's.
//
// Its state per invocation is keyed by the invocation and its delivery
// (ctx: see [graph.Observer]), and dropped, its open spans ended, when
// ctx is cancelled before the invocation's completed event: a drain
// that timed out abandoned the delivery.
func (o *Observer) Observe(ctx context.Context, ev graph.Event) error {
	id, ok := invocationOf(ev)
	if !ok {
		return nil
	}
	if !o.spans && !o.logs.Load() {
		switch ev.(type) {
		case *graph.InvocationEvent, *graph.NodeEvent, *graph.MetadataEvent, *graph.EmittedEvent,
			*graph.SubgraphEvent:
			return nil // no spans, no logs: nothing to render
		}
	}
	sh := o.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.cur = ctx.Done()
	defer func() { sh.cur = nil }()
	switch e := ev.(type) {
	case *graph.InvocationEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.invocationStarted(e)
			o.watch(ctx, sh, id)
		} else {
			o.invocationCompleted(e)
		}
	case *graph.NodeEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.nodeStarted(e)
			o.watch(ctx, sh, id)
		} else {
			o.nodeEnded(e)
		}
	case *graph.MetadataEvent:
		if e != nil {
			o.metadataAdded(e)
		}
	case *graph.EmittedEvent:
		if p, ok := e.Payload.(*logPayload); ok && p.o == o {
			return o.log(e, p)
		}
	case *graph.SubgraphEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.subgraphStarted(e)
			o.watch(ctx, sh, id)
		} else {
			o.subgraphEnded(e)
		}
	default:
		o.observeCall(ev)
	}
	return nil
}

// observeCall renders the typed call events.
func (o *Observer) observeCall(ev graph.Event) {
	switch e := ev.(type) {
	case *graph.LLMCompletionEvent:
		if e != nil {
			o.llmCall(&e.CallSource, &e.LLMRequest, &e.LLMResponse, e.Attempts, e.Start, e.End, nil)
		}
	case *graph.LLMFailedEvent:
		if e != nil {
			o.llmCall(&e.CallSource, &e.LLMRequest, e.Response, e.Attempts, e.Start, e.End, e)
		}
	case *graph.ToolCallEvent:
		if e != nil {
			o.toolCall(&e.CallSource, e.ToolName, e.ToolCallID, e.Arguments, e.Result, true, e.Start, e.End, nil, "")
		}
	case *graph.ToolCallFailedEvent:
		if e != nil {
			o.toolCall(&e.CallSource, e.ToolName, e.ToolCallID, e.Arguments, nil, false, e.Start, e.End, e.Err, e.ErrorType)
		}
	case *graph.EmbeddingEvent:
		if e != nil {
			o.embedding(&e.CallSource, &e.EmbeddingRequest, e, e.Start, e.End, nil)
		}
	case *graph.EmbeddingFailedEvent:
		if e != nil {
			o.embedding(&e.CallSource, &e.EmbeddingRequest, nil, e.Start, e.End, e.Err)
		}
	case *graph.RerankEvent:
		if e != nil {
			o.rerank(&e.CallSource, &e.RerankCall, e, e.Start, e.End, nil)
		}
	case *graph.RerankFailedEvent:
		if e != nil {
			o.rerank(&e.CallSource, &e.RerankCall, nil, e.Start, e.End, e.Err)
		}
	}
}

func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func (o *Observer) invocationStarted(e *graph.InvocationEvent) {
	sh := o.shardOf(e.InvocationID)
	key := invKey{e.InvocationID, sh.cur}
	if old := sh.invs[key]; old != nil {
		// A stale invocation with the same id and delivery (no
		// completed event was seen): close it rather than leak it.
		o.closeAll(old, stamp(e.Time), "")
		o.forget(old)
	}
	st := &invState{key: key, sessionID: e.SessionID}
	// The span starts with the outcome its invocation usually ends with,
	// completed, which invocationCompleted overrides for any other (the
	// SDK keeps the last value of a key): setting it only at the end
	// would have the SDK copy the span's attributes again, into a slice
	// doubled for the one more.
	st.ctx, st.span = o.startInvocation(st, e.InvocationID, e.CorrelationID, e.EntryNode, e.Metadata, stamp(e.Time), o.completed...)
	sh.invs[key] = st
}

// startInvocation starts an openarmature.invocation span as the root of
// a new trace, with extra last among its attributes: the invocation's
// own, or a detached unit's (§4.4), whose
// entry node is the unit's.
func (o *Observer) startInvocation(st *invState, invID, corrID, entry string, md graph.Metadata, t time.Time, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	buf := o.attrBuf()
	attrs := append(buf.kv,
		attribute.String(AttrInvocationID, validUTF8(invID)),
		attribute.String(AttrCorrelationID, validUTF8(corrID)),
		attribute.String(AttrEntryNode, entry))
	attrs = append(attrs, o.constAttrs...)
	if st.sessionID != "" {
		attrs = append(attrs, attribute.String(AttrSessionID, validUTF8(st.sessionID)))
	}
	attrs = appendUserAttributes(attrs, md)
	attrs = append(attrs, extra...)
	// A new trace's root: context.Background() holds no parent span, so
	// no trace.WithNewRoot (whose parent-hiding context costs two
	// allocations per span) is needed.
	ctx, sp := st.opts.startSpan(o.tracer, context.Background(), InvocationSpanName, t, attrs, o.internal)
	o.release(buf, attrs)
	return ctx, sp
}

// detach starts a detached unit's trace and links the dispatching span
// in the parent trace to it (§4.4). It returns the context to start the
// unit's own span from.
func (o *Observer) detach(st *invState, dispatch trace.Span, invID, corrID, entry string, md graph.Metadata, t time.Time) (context.Context, trace.Span) {
	ctx, root := o.startInvocation(st, invID, corrID, entry, md, t)
	dispatch.AddLink(trace.Link{SpanContext: root.SpanContext()})
	return ctx, root
}

// endAlso ends s's companion spans (see nodeSpan.also) with s's outcome.
func (o *Observer) endAlso(st *invState, s *nodeSpan, failed bool, err error, cat string, outcome string, end time.Time) {
	for _, sp := range s.also {
		switch {
		case failed:
			o.setFailed(sp, cat, err, MsgNodeFailed)
		case outcome != "":
			o.setOK(sp, outcome)
		}
		st.opts.endSpan(sp, end)
	}
}

func (o *Observer) invocationCompleted(e *graph.InvocationEvent) {
	st := o.inv(e.InvocationID)
	if st == nil {
		return
	}
	o.forget(st)
	end := stamp(e.Time)
	outcome := ""
	switch e.Status {
	case graph.Completed:
		outcome = OutcomeCompleted
	case graph.Errored:
		outcome = OutcomeErrored
	case graph.Suspended:
		outcome = OutcomeSuspended
	}
	// Spans still open (enclosing dispatches of a suspending node, or
	// spans whose terminal event was lost) end with the invocation.
	o.closeAll(st, end, outcome)
	if st.span == nil {
		return
	}
	// The outermost context's additions (applied as they came, and again
	// here for an observer that missed them).
	if e.Metadata.Len() > 0 {
		st.span.SetAttributes(UserAttributes(e.Metadata)...)
	}
	switch e.Status {
	case graph.Errored:
		cat := string(e.ErrorCategory)
		st.span.SetAttributes(o.outcomeAttrs(outcome)...)
		if cat != "" {
			st.span.SetAttributes(attribute.String(AttrErrorCategory, cat))
		}
		if e.Err != nil {
			o.recordError(st.span, e.Err, "", MsgInvocationFailed)
		}
		st.span.SetStatus(codes.Error, cat)
	default:
		// Completed is the outcome the span started with; Status is
		// never other than the three.
		if outcome != OutcomeCompleted && outcome != "" {
			st.span.SetAttributes(o.outcomeAttrs(outcome)...)
		}
		st.span.SetStatus(codes.Ok, "")
	}
	st.opts.endSpan(st.span, end)
}

// closeAll ends st's open spans, innermost first. A non-empty outcome
// other than errored marks them OK with that outcome.
func (o *Observer) closeAll(st *invState, end time.Time, outcome string) {
	st.open.Backward(func(n *nodeSpan) bool {
		s := st.spanOf(o, n)
		ok := outcome == OutcomeSuspended || outcome == OutcomeCompleted
		if ok {
			o.setOK(s, outcome)
		}
		st.opts.endSpan(s, end)
		if !ok {
			outcome = ""
		}
		o.endAlso(st, n, false, nil, "", outcome, end)
		return true
	})
	st.open.Clear()
}

// is reports whether s has the §6 event-source identity (namespace,
// attempt_index, fan_out_index_chain, branch_name_chain) and kind.
func (s *nodeSpan) is(kind spanKind, ns []string, attempt int, fan []*int, br []*string) bool {
	return s.kind == kind && s.attempt == attempt && s.lineageIs(ns, fan, br)
}

// state returns the invocation's state, creating a parentless one for an
// observer that did not see the invocation start (registered without
// InvocationEvents): its spans become roots, tracked so they still pair
// and end.
func (o *Observer) state(id string) *invState {
	st := o.inv(id)
	if st == nil {
		sh := o.shardOf(id)
		st = &invState{key: invKey{id, sh.cur}, ctx: context.Background()}
		sh.invs[st.key] = st
	}
	return st
}

// lineageAttrs are the attributes every span below the invocation span
// carries: the innermost fan-out index and branch name of its lineage and
// the §5.6 cross-cutting ids.
func (st *invState) lineageAttrs(attrs []attribute.KeyValue, invocationID, correlationID string, fan []*int, br []*string, md graph.Metadata) []attribute.KeyValue {
	if i := innermost(fan); i != nil {
		attrs = append(attrs, attribute.Int(AttrNodeFanOutIndex, *i))
	}
	if b := innermost(br); b != nil {
		attrs = append(attrs, attribute.String(AttrNodeBranchName, *b))
	}
	attrs = append(attrs,
		attribute.String(AttrInvocationID, validUTF8(invocationID)),
		attribute.String(AttrCorrelationID, validUTF8(correlationID)))
	if st.sessionID != "" {
		attrs = append(attrs, attribute.String(AttrSessionID, validUTF8(st.sessionID)))
	}
	return st.appendUser(attrs, md)
}

// UserAttributes returns the §5.6 openarmature.user.<key> attributes of
// caller-supplied invocation metadata, in key order.
func UserAttributes(md graph.Metadata) []attribute.KeyValue {
	if md.Len() == 0 {
		return nil
	}
	return appendUserAttributes(make([]attribute.KeyValue, 0, md.Len()), md)
}

// appendUserAttributes appends the UserAttributes of md to attrs.
func appendUserAttributes(attrs []attribute.KeyValue, md graph.Metadata) []attribute.KeyValue {
	if md.Len() == 0 {
		return attrs
	}
	for k, v := range md.All() {
		attrs = append(attrs, attrValue(AttrUserPrefix+k, v))
	}
	return attrs
}

func innermost[T any](chain []*T) *T {
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i] != nil {
			return chain[i]
		}
	}
	return nil
}

// start starts a span under parent (nil: the invocation span) and tracks
// it.
func (st *invState) start(o *Observer, s *nodeSpan, parent *nodeSpan, name string, t time.Time, attrs []attribute.KeyValue) {
	st.startFrom(o, s, parent, st.ctxOf(o, parent), name, t, attrs)
}

// ctxOf returns the context to start a child of s from (s nil: the
// invocation span's), starting s if it is still pending.
func (st *invState) ctxOf(o *Observer, s *nodeSpan) context.Context {
	if s == nil {
		return st.ctx
	}
	st.open1(o, s)
	return s.ctx
}

// spanOf returns s's span, starting it if it is still pending.
func (st *invState) spanOf(o *Observer, s *nodeSpan) trace.Span {
	st.open1(o, s)
	return s.span
}

// deferStart holds the start of node span s (name at t with attrs, built
// from buf, which s now owns) until it is needed and tracks s.
//
// A node span that nothing needs while it runs (no child span, log
// record or link) starts only as it ends, with its outcome among the
// attributes it starts with: the span exports the same, but the SDK
// copies its attributes once, rather than again into a slice grown
// (doubled) for the outcome set later. A span that is needed earlier
// starts then (open1), with the attributes it started with before.
func (st *invState) deferStart(s *nodeSpan, parent *nodeSpan, name string, t time.Time, buf *attrBuf, attrs []attribute.KeyValue) {
	s.parent, s.name, s.at, s.buf, s.attrs = parent, name, t, buf, attrs
	st.track(s)
}

// open1 starts s if it is still pending (its parents first), with its
// start attributes and then extra.
func (st *invState) open1(o *Observer, s *nodeSpan, extra ...attribute.KeyValue) {
	if s.span != nil {
		return
	}
	pctx := st.ctxOf(o, s.parent)
	attrs := append(s.attrs, extra...)
	s.ctx, s.span = st.opts.startSpan(o.tracer, pctx, s.name, s.at, attrs, o.internal)
	o.release(s.buf, attrs)
	s.buf, s.attrs, s.name = nil, nil, ""
	for i := range s.calls {
		st.emitCall(o, s.ctx, &s.calls[i])
	}
	s.calls = nil
}

// callSpan is a finished call span (an LLM attempt's, a tool's, an
// embedding's or a rerank's) to emit.
type callSpan struct {
	name       string
	kind       trace.SpanStartOption
	start, end time.Time
	// attrs were built from buf, which the callSpan owns until emitted.
	buf   *attrBuf
	attrs []attribute.KeyValue
	// err is the call's failure: with tool, a tool error of type cat
	// (an exception event of that type, status ERROR cat); else a
	// failure of category cat (§4.2).
	err  error
	cat  string
	tool bool
}

// endCall emits the finished call span d under parent (nil: the
// invocation span). Under a node span still pending, d waits for it
// (the node's span then usually starts as it ends, with its outcome, see
// deferStart) and is emitted as it starts, before it ends.
func (st *invState) endCall(o *Observer, parent *nodeSpan, d callSpan) {
	if parent != nil && parent.kind == kindUnit && d.end.After(parent.lastEnd) {
		parent.lastEnd = d.end
	}
	if parent != nil && parent.span == nil {
		parent.calls = append(parent.calls, d)
		return
	}
	st.emitCall(o, st.ctxOf(o, parent), &d)
}

// emitCall starts d from pctx and ends it, with its status.
func (st *invState) emitCall(o *Observer, pctx context.Context, d *callSpan) {
	_, sp := st.opts.startSpan(o.tracer, pctx, d.name, d.start, d.attrs, d.kind)
	o.release(d.buf, d.attrs)
	d.buf, d.attrs = nil, nil
	switch {
	case d.err != nil && d.tool:
		o.recordError(sp, d.err, d.cat, MsgToolFailed)
		sp.SetStatus(codes.Error, d.cat)
	case d.err != nil:
		o.setFailed(sp, d.cat, d.err, MsgCallFailed)
	default:
		sp.SetStatus(codes.Ok, "")
	}
	st.opts.endSpan(sp, d.end)
}

// track adds s to st's open spans.
func (st *invState) track(s *nodeSpan) {
	st.open.UseBuffer(st.openBuf[:])
	st.open.Add(s)
}

// startFrom starts s from pctx, with parent as its logical parent.
func (st *invState) startFrom(o *Observer, s *nodeSpan, parent *nodeSpan, pctx context.Context, name string, t time.Time, attrs []attribute.KeyValue) {
	s.parent = parent
	s.ctx, s.span = st.opts.startSpan(o.tracer, pctx, name, t, attrs, o.internal)
	st.track(s)
}

func (o *Observer) nodeStarted(e *graph.NodeEvent) {
	st := o.state(e.InvocationID)
	t := stamp(e.Time)
	parent := st.parentOf(o, e.Namespace, e.FanOutIndexChain, e.BranchNameChain, e.InvocationID, e.CorrelationID, t, e.Metadata)
	if e.CallableBranch {
		// §5.7: an inline-callable branch renders its dispatch span only
		// (synthesized by parentOf), carrying the attempt it runs in.
		if parent != nil && parent.kind == kindUnit {
			st.spanOf(o, parent).SetAttributes(attribute.Int(AttrNodeAttemptIndex, e.AttemptIndex))
		}
		return
	}
	buf := o.attrBuf()
	attrs := append(buf.kv,
		attribute.String(AttrNodeName, e.NodeName),
		o.namespaceAttr(e.Namespace),
		attribute.Int(AttrNodeStep, e.Step),
		attribute.Int(AttrNodeAttemptIndex, e.AttemptIndex))
	if c := e.FanOutConfig; c != nil {
		concurrency := 0 // unbounded (§5.4 sentinel)
		if c.Concurrency != nil {
			concurrency = *c.Concurrency
		}
		attrs = append(attrs,
			attribute.Int(AttrFanOutItemCount, c.ItemCount),
			attribute.Int(AttrFanOutConcurrency, concurrency),
			attribute.String(AttrFanOutErrorPolicy, c.ErrorPolicy))
	}
	if c := e.ParallelBranchesConfig; c != nil {
		attrs = append(attrs,
			attribute.Int(AttrBranchesBranchCount, c.BranchCount),
			attribute.String(AttrBranchesErrorPolicy, c.ErrorPolicy))
	}
	attrs = st.lineageAttrs(attrs, e.InvocationID, e.CorrelationID, e.FanOutIndexChain, e.BranchNameChain, e.Metadata)
	s := &nodeSpan{
		kind: kindNode, attempt: e.AttemptIndex,
		ns: e.Namespace, fan: e.FanOutIndexChain, br: e.BranchNameChain,
		fanOut: e.FanOutConfig, branches: e.ParallelBranchesConfig,
	}
	st.deferStart(s, parent, e.NodeName, t, buf, attrs)
}

func (o *Observer) subgraphStarted(e *graph.SubgraphEvent) {
	st := o.state(e.InvocationID)
	t := stamp(e.Time)
	parent := st.parentOf(o, e.Namespace, e.FanOutIndexChain, e.BranchNameChain, e.InvocationID, e.CorrelationID, t, e.Metadata)
	buf := o.attrBuf()
	attrs := append(buf.kv,
		attribute.String(AttrNodeName, e.NodeName),
		// §5.3: the empty string for an unnamed graph.
		attribute.String(AttrSubgraphName, e.SubgraphName),
		o.namespaceAttr(e.Namespace),
		attribute.Int(AttrNodeAttemptIndex, e.AttemptIndex))
	attrs = st.lineageAttrs(attrs, e.InvocationID, e.CorrelationID, e.FanOutIndexChain, e.BranchNameChain, e.Metadata)
	s := &nodeSpan{
		kind: kindSubgraph, attempt: e.AttemptIndex,
		ns: e.Namespace, fan: e.FanOutIndexChain, br: e.BranchNameChain,
	}
	st.start(o, s, parent, e.NodeName, t, attrs)
	if e.SubgraphName != "" && o.detachedSubs[e.SubgraphName] {
		// The dispatch span stays in the parent trace, linked to the
		// detached trace, where the subgraph span (named after the
		// subgraph) parents the inner spans.
		ctx, root := o.detach(st, s.span, e.InvocationID, e.CorrelationID, e.EntryNode, e.Metadata, t)
		s.also = []trace.Span{s.span, root}
		s.ctx, s.span = st.opts.startSpan(o.tracer, ctx, e.SubgraphName, t, attrs, o.internal)
	}
	o.release(buf, attrs)
}

// parentOf returns the span an event at ns with the given lineage nests
// under, nil for the invocation span. The immediate dispatch boundary
// decides: inside a fan-out instance or branch it is the unit span
// (synthesized on the unit's first event, §4.3 / §6), inside a plain
// subgraph the subgraph span. An enclosing dispatch whose span is not
// open (not observed) falls back to the next one out.
func (st *invState) parentOf(o *Observer, ns []string, fan []*int, br []*string, invID, corrID string, t time.Time, md graph.Metadata) *nodeSpan {
	var parent *nodeSpan
	for n := 1; n < len(ns) && n <= len(fan) && n <= len(br); n++ {
		if fan[n-1] != nil || br[n-1] != nil {
			if u := st.unit(o, ns[:n], fan[:n], br[:n], invID, corrID, t, md, entryOf(ns, n)); u != nil {
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
// given lineage (the dispatch node of a deeper event).
func (st *invState) dispatch(ns []string, fan []*int, br []*string) *nodeSpan {
	c := st.open.Candidates(ns, fan, br)
	for i := len(c) - 1; i >= 0; i-- {
		if s := c[i]; s.kind != kindUnit && s.lineageIs(ns, fan, br) {
			return s
		}
	}
	return nil
}

// unit returns the open unit span of the fan-out instance or branch
// identified by ns and the chains (their last entries the unit's index or
// branch), synthesizing it under its dispatch node's span on first use.
// It is nil when that span is not open.
func (st *invState) unit(o *Observer, ns []string, fan []*int, br []*string, invID, corrID string, t time.Time, md graph.Metadata, entry string) *nodeSpan {
	n := len(ns)
	if s := st.find(kindUnit, ns, 0, fan, br); s != nil {
		return s
	}
	d := st.dispatch(ns, fan[:n-1], br[:n-1])
	if d == nil {
		return nil
	}
	name := ns[n-1]
	buf := o.attrBuf()
	attrs := buf.kv
	switch {
	case fan[n-1] != nil:
		attrs = append(attrs, attribute.String(AttrFanOutParentNodeName, name))
	case d.branches != nil:
		name = *br[n-1]
		attrs = append(attrs, attribute.String(AttrBranchesParentNodeName, ns[n-1]))
	default:
		name = *br[n-1]
	}
	attrs = st.lineageAttrs(attrs, invID, corrID, fan, br, md)
	u := &nodeSpan{
		kind: kindUnit,
		ns:   slices.Clone(ns), fan: slices.Clone(fan), br: slices.Clone(br),
	}
	if fan[n-1] != nil && o.detachedFans[name] {
		// A detached fan-out instance: its own trace, rooted in an
		// invocation span, linked from the fan-out node span.
		ctx, root := o.detach(st, st.spanOf(o, d), invID, corrID, entry, md, t)
		u.also = []trace.Span{root}
		st.startFrom(o, u, d, ctx, name, t, attrs)
	} else {
		st.start(o, u, d, name, t, attrs)
	}
	o.release(buf, attrs)
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

func chainEq[T any](a, b []*T, eq func(a, b *T) bool) bool {
	return slices.EqualFunc(a, b, eq)
}

func (o *Observer) nodeEnded(e *graph.NodeEvent) {
	st := o.inv(e.InvocationID)
	if st == nil {
		return
	}
	if e.CallableBranch {
		st.callableEnded(e)
		return
	}
	s := st.take(kindNode, e.Namespace, e.AttemptIndex, e.FanOutIndexChain, e.BranchNameChain)
	if s == nil {
		return
	}
	t := stamp(e.Time)
	o.endUnits(st, s, t)
	// The outcome attributes: set on a started span, or started with.
	var fixed [2]attribute.KeyValue
	var end []attribute.KeyValue
	cat := spanCategory(e.Err, e.ErrorCategory)
	switch {
	case e.Phase == graph.PhaseSuspended:
		end = append(fixed[:0], o.suspended...)
		if e.Descriptor != nil {
			end = append(end, SuspensionAttributes(*e.Descriptor)...)
		}
	case e.Err != nil:
		end = failedAttrs(fixed[:0], cat)
	default:
		end = append(fixed[:0], o.completed...)
	}
	if s.span == nil {
		st.open1(o, s, end...)
	} else {
		s.span.SetAttributes(end...)
	}
	sp := s.span
	if e.Phase != graph.PhaseSuspended && e.Err != nil {
		o.recordError(sp, e.Err, "", MsgNodeFailed)
		sp.SetStatus(codes.Error, cat)
	} else {
		sp.SetStatus(codes.Ok, "")
	}
	st.opts.endSpan(sp, t)
	st.ended(o, s, t, e.Err, cat)
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
	if e.Err != nil {
		o.setFailed(s.span, spanCategory(e.Err, e.ErrorCategory), e.Err, MsgNodeFailed)
	} else {
		o.setOK(s.span, OutcomeCompleted)
	}
	st.opts.endSpan(s.span, stamp(e.Time))
	o.endAlso(st, s, e.Err != nil, e.Err, spanCategory(e.Err, e.ErrorCategory), OutcomeCompleted, stamp(e.Time))
	st.ended(o, s, stamp(e.Time), e.Err, spanCategory(e.Err, e.ErrorCategory))
}

// spanCategory is the openarmature.error.category of a failed node or
// subgraph span: the derived category of the error's cause chain
// (pipeline-utilities §6.3, looking through the engine's node_exception
// carriers), so a node that raised a categorized error (a provider's
// provider_rate_limit, say) reports that category; an uncategorized
// raise falls back to the event's §4 category (node_exception).
//
// A parallel-branches node failed by one of its branches is the
// exception: its failure is the engine's parallel_branches_branch_failed
// carrier (pipeline-utilities §11.9), a node_exception subtype, and its
// span (with the failed callable branch's dispatch span) reports that §4
// category, node_exception, rather than the branch's cause (fixture 119).
func spanCategory(err error, eventCat errcat.Category) string {
	if err == nil {
		return string(eventCat)
	}
	if ne := (*graph.NodeError)(nil); errors.As(err, &ne) && ne.Category() == errcat.ParallelBranchesBranchFailed {
		return string(errcat.NodeException)
	}
	if cat, _ := errcat.Derived(err); cat != "" {
		return string(cat)
	}
	return string(eventCat)
}

// setFailed gives a span the §4.2 failure status: ERROR with the category
// as description, openarmature.error.category and an exception event
// (recordError, msg its message without payload capture).
func (o *Observer) setFailed(sp trace.Span, cat string, err error, msg string) {
	var fixed [2]attribute.KeyValue
	sp.SetAttributes(failedAttrs(fixed[:0], cat)...)
	o.recordError(sp, err, "", msg)
	sp.SetStatus(codes.Error, cat)
}

// recordError adds err's exception event to sp (as trace.Span's
// RecordError would), of exception.type typ (err's Go type when empty,
// as the SDK names it). With payload capture its exception.message is
// err's text; without, msg, a fixed text: an error's text may quote the
// payload the spans otherwise withhold (a tool's arguments in its
// ArgumentsError, an MCP tool's error result, a provider's echo of the
// request, and any node or invocation error wrapping one of these).
func (o *Observer) recordError(sp trace.Span, err error, typ, msg string) {
	if err == nil || !sp.IsRecording() {
		return
	}
	if typ == "" {
		typ = errorTypeName(err)
	}
	if o.payload {
		// Capped like a payload (§5.5.5): the text may quote one.
		msg = Truncate(validUTF8(err.Error()), o.payloadMax)
	}
	sp.AddEvent(exceptionEvent, trace.WithAttributes(attribute.String(attrExceptionType, typ),
		attribute.String(attrExceptionMessage, msg)))
}

// The OpenTelemetry exception event and its attributes (semantic
// conventions).
const (
	exceptionEvent       = "exception"
	attrExceptionType    = "exception.type"
	attrExceptionMessage = "exception.message"
)

// errorTypeName is the exception.type of err as the OpenTelemetry SDK's
// RecordError names it: its package path and type name, or the type's
// literal (*pkg.T) for an unnamed one.
func errorTypeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// failedAttrs appends the §4.2 failure attributes of category cat.
func failedAttrs(attrs []attribute.KeyValue, cat string) []attribute.KeyValue {
	return append(attrs, attribute.String(AttrOutcome, OutcomeErrored), attribute.String(AttrErrorCategory, cat))
}

// take removes the oldest open span with the identity from st.
func (st *invState) take(kind spanKind, ns []string, attempt int, fan []*int, br []*string) *nodeSpan {
	for _, s := range st.open.Candidates(ns, fan, br) {
		if s.is(kind, ns, attempt, fan, br) {
			st.open.Remove(s)
			return s
		}
	}
	return nil
}

// drop removes s from st's open spans, reporting whether it was open.
func (st *invState) drop(s *nodeSpan) bool {
	return st.open.Remove(s)
}

// callableEnded records an inline-callable branch's outcome on its
// dispatch span, which its parallel-branches node span ends.
func (st *invState) callableEnded(e *graph.NodeEvent) {
	n := len(e.Namespace) - 1
	if n < 1 || len(e.FanOutIndexChain) < n || len(e.BranchNameChain) < n {
		return
	}
	u := st.find(kindUnit, e.Namespace[:n], 0, e.FanOutIndexChain[:n], e.BranchNameChain[:n])
	if u == nil {
		return
	}
	if e.Phase == graph.PhaseSuspended {
		return
	}
	u.failed, u.failErr = e.Err != nil, e.Err
	u.failCat = callableCategory(e.Err)
}

// callableCategory is the openarmature.error.category of a failed
// inline-callable branch's dispatch span: the category of the carrier
// the engine raises for a branch failure, node_exception (its subtype
// parallel_branches_branch_failed, pipeline-utilities §11.9), unless the
// callable failed with a framework category, which the engine keeps
// (graph-engine §4; fixture 119).
func callableCategory(err error) string {
	if err == nil {
		return ""
	}
	if c := errcat.Of(err); c.Framework() {
		return string(c)
	}
	return string(errcat.NodeException)
}

// ended records an ended span's outcome and end time t on its unit
// parent and drops the state of an invocation the observer tracks
// without its span.
func (st *invState) ended(o *Observer, s *nodeSpan, t time.Time, err error, cat string) {
	if p := s.parent; p != nil && p.kind == kindUnit {
		p.failed, p.failCat, p.failErr = err != nil, cat, err
		if t.After(p.lastEnd) {
			p.lastEnd = t
		}
	}
	if st.span == nil && st.open.Len() == 0 {
		o.forget(st)
	}
}

// endUnits ends the unit spans of a fan-out or parallel-branches node
// span as the node ends (§6 step 5): instances by index, branches in
// declaration order. A unit whose last child failed is ERROR. A
// detached fan-out instance's spans end at its last child's end time.
func (o *Observer) endUnits(st *invState, d *nodeSpan, t time.Time) {
	if len(d.units) == 0 {
		return
	}
	units := d.units
	d.units = nil
	order := func(u *nodeSpan) int {
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
	slices.SortStableFunc(units, func(a, b *nodeSpan) int { return order(a) - order(b) })
	for _, u := range units {
		if !st.drop(u) {
			continue
		}
		if u.failed {
			o.setFailed(u.span, u.failCat, u.failErr, MsgNodeFailed)
		} else {
			o.setOK(u.span, OutcomeCompleted)
		}
		// A detached instance's spans (its unit span and the invocation
		// span rooting its trace) match its own window (§4.1), which
		// ends with its last span, not the fan-out node's.
		end := t
		if len(u.also) > 0 && !u.lastEnd.IsZero() && u.lastEnd.Before(t) {
			end = u.lastEnd
		}
		st.opts.endSpan(u.span, end)
		o.endAlso(st, u, u.failed, u.failErr, u.failCat, OutcomeCompleted, end)
	}
}

// SuspensionAttributes returns the §5.8 attribute set of a descriptor:
// openarmature.suspension.signal_id and one
// openarmature.suspension.metadata.<key> per metadata entry, sorted by key.
// Flattening policy: strings, bools, integers and floats map to the
// matching attribute type; homogeneous slices of those map to array
// attributes; nested maps flatten with dotted keys (<key>.<subkey>);
// anything else (mixed slices, structs, nil) is JSON-encoded into a string.
func SuspensionAttributes(d graph.SignalDescriptor) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(AttrSuspensionSignalID, d.SignalID)}
	return flatten(attrs, AttrSuspensionMetadataPrefix, d.Metadata)
}

func flatten(attrs []attribute.KeyValue, prefix string, m map[string]any) []attribute.KeyValue {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		if sub, ok := v.(map[string]any); ok {
			attrs = flatten(attrs, prefix+k+".", sub)
			continue
		}
		attrs = append(attrs, attrValue(prefix+k, v))
	}
	return attrs
}

func attrValue(key string, v any) attribute.KeyValue {
	switch x := v.(type) {
	case string:
		return attribute.String(key, validUTF8(x))
	case bool:
		return attribute.Bool(key, x)
	case int:
		return attribute.Int(key, x)
	case int32:
		return attribute.Int64(key, int64(x))
	case int64:
		return attribute.Int64(key, x)
	case uint32:
		return attribute.Int64(key, int64(x))
	case uint64:
		if x <= math.MaxInt64 {
			return attribute.Int64(key, int64(x))
		}
	case float32:
		return attribute.Float64(key, float64(x))
	case float64:
		return attribute.Float64(key, x)
	case []string:
		return attribute.StringSlice(key, validUTF8s(x))
	case []bool:
		return attribute.BoolSlice(key, x)
	case []int:
		return attribute.IntSlice(key, x)
	case []int64:
		return attribute.Int64Slice(key, x)
	case []float64:
		return attribute.Float64Slice(key, x)
	case []any:
		if kv, ok := homogeneous(key, x); ok {
			return kv
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return attribute.String(key, validUTF8(fmt.Sprint(v)))
	}
	return attribute.String(key, string(b))
}

// validUTF8 returns s with each run of invalid UTF-8 bytes replaced by
// U+FFFD (§5.5.5 step 4): an OTLP exporter rejects a batch holding a
// string attribute that is not valid UTF-8, losing every span in it.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// validUTF8s applies validUTF8 to each string of xs, copying xs only
// when one changes.
func validUTF8s(xs []string) []string {
	i := slices.IndexFunc(xs, func(s string) bool { return !utf8.ValidString(s) })
	if i < 0 {
		return xs
	}
	out := slices.Clone(xs)
	for ; i < len(out); i++ {
		out[i] = validUTF8(out[i])
	}
	return out
}

// homogeneous converts a []any whose elements all share one scalar type.
func homogeneous(key string, xs []any) (attribute.KeyValue, bool) {
	if len(xs) == 0 {
		return attribute.KeyValue{}, false
	}
	switch xs[0].(type) {
	case string:
		return collect(xs, func(v []string) attribute.KeyValue { return attribute.StringSlice(key, validUTF8s(v)) })
	case bool:
		return collect(xs, func(v []bool) attribute.KeyValue { return attribute.BoolSlice(key, v) })
	case int:
		return collect(xs, func(v []int) attribute.KeyValue { return attribute.IntSlice(key, v) })
	case int64:
		return collect(xs, func(v []int64) attribute.KeyValue { return attribute.Int64Slice(key, v) })
	case float64:
		return collect(xs, func(v []float64) attribute.KeyValue { return attribute.Float64Slice(key, v) })
	}
	return attribute.KeyValue{}, false
}

func collect[T any](xs []any, mk func([]T) attribute.KeyValue) (attribute.KeyValue, bool) {
	out := make([]T, len(xs))
	for i, x := range xs {
		v, ok := x.(T)
		if !ok {
			return attribute.KeyValue{}, false
		}
		out[i] = v
	}
	return mk(out), true
}

// OpenSpans reports how many spans the observer holds open (invocation
// and node spans), for leak checks.
func (o *Observer) OpenSpans() int {
	n := 0
	for i := range o.shards {
		sh := &o.shards[i]
		sh.mu.Lock()
		for _, st := range sh.invs {
			n += st.open.Len()
			if st.span != nil {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// metadataAdded applies a mid-invocation augmentation to the spans still
// open in the augmenting context and its call-stack ancestors (§3.4,
// §6): the augmenting node's span (or fan-out instance / branch dispatch
// span), then each enclosing span up the parent chain, skipping the
// shared fan-out and parallel-branches node spans; the invocation span
// only when no fan-out instance or branch lies on the path. Sibling
// lineages are never on the chain, so they are never touched.
func (o *Observer) metadataAdded(e *graph.MetadataEvent) {
	st := o.inv(e.InvocationID)
	if st == nil {
		return
	}
	attrs := UserAttributes(e.Added)
	if len(attrs) == 0 {
		return
	}
	ns, fan, br := e.Namespace, e.FanOutIndexChain, e.BranchNameChain
	var s *nodeSpan
	forked := slices.ContainsFunc(fan, func(i *int) bool { return i != nil }) ||
		slices.ContainsFunc(br, func(b *string) bool { return b != nil })
	if e.NodeName != "" {
		s = st.find(kindNode, ns, e.AttemptIndex, fan, br)
	} else if n := len(ns); n > 0 && n == len(fan) && n == len(br) {
		// A fan-out instance's or branch's own context: its dispatch span
		// when already synthesized, otherwise (no inner event yet) the
		// enclosing spans beyond its shared dispatch node.
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
		if s.span == nil {
			// Pending: the span starts with them.
			s.attrs = append(s.attrs, attrs...)
		} else {
			s.span.SetAttributes(attrs...)
		}
		for _, a := range s.also {
			a.SetAttributes(attrs...)
		}
	}
	if !forked && st.span != nil {
		st.span.SetAttributes(attrs...)
	}
}

// sourceSpan returns the open span of an event source: the node
// attempt's (or subgraph node's) span, a unit's dispatch span; nil when
// none is open.
func (st *invState) sourceSpan(src graph.EventSource) *nodeSpan {
	ns, fan, br := src.Namespace, src.FanOutIndexChain, src.BranchNameChain
	if src.NodeName == "" {
		return st.find(kindUnit, ns, 0, fan, br)
	}
	if s := st.find(kindNode, ns, src.AttemptIndex, fan, br); s != nil {
		return s
	}
	return st.find(kindSubgraph, ns, src.AttemptIndex, fan, br)
}

// log hands a record emitted from a node to its handler with the ids of
// the span active there (the invocation span when no node span is open).
// A detached subgraph's dispatch span is a parent-trace span
// (nodeSpan.also); a record logged by the subgraph node itself names it.
func (o *Observer) log(e *graph.EmittedEvent, p *logPayload) error {
	var sp trace.Span
	if st := o.inv(e.InvocationID); st != nil {
		if s := st.sourceSpan(e.EventSource); s != nil {
			sp = st.spanOf(o, s)
			if s.kind == kindSubgraph && len(s.also) > 0 {
				sp = s.also[0]
			}
		} else {
			sp = st.span
		}
	}
	p.handled.Store(true)
	r, ctx := p.rec, p.ctx
	if sp != nil && sp.SpanContext().IsValid() { // a no-op tracer's spans have no ids
		sc := sp.SpanContext()
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
		// The span in the context too, for a handler bridging to the
		// OTel logs API (it reads the trace context from there).
		ctx = trace.ContextWithSpan(ctx, sp)
	}
	return p.next.Handle(ctx, r)
}

// find returns the latest open span with the identity.
func (st *invState) find(kind spanKind, ns []string, attempt int, fan []*int, br []*string) *nodeSpan {
	c := st.open.Candidates(ns, fan, br)
	for i := len(c) - 1; i >= 0; i-- {
		if s := c[i]; s.is(kind, ns, attempt, fan, br) {
			return s
		}
	}
	return nil
}

// isNoop reports whether tp is OpenTelemetry's no-op TracerProvider.
func isNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	return false
}
