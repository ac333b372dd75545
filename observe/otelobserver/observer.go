package otelobserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/graph"
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
	AttrSuspensionSignalID    = "openarmature.suspension.signal_id"
	// AttrSuspensionMetadataPrefix prefixes each flattened descriptor
	// metadata key.
	AttrSuspensionMetadataPrefix = "openarmature.suspension.metadata."
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
}

// Observer turns graph events into OTel spans. Register [Observer.Observe]
// with [graph.InvocationEvents] so it sees invocation boundaries. It is
// safe for concurrent use, though the engine delivers each invocation's
// events strictly serially.
type Observer struct {
	tracer      trace.Tracer
	specVersion string
	implVersion string

	mu   sync.Mutex
	invs map[string]*invState
}

type invState struct {
	// span is the invocation span; nil when the observer did not see the
	// started InvocationEvent (registered without InvocationEvents).
	span      trace.Span
	ctx       context.Context
	sessionID string
	// open holds the open node spans, oldest first.
	open []*nodeSpan
}

type nodeSpan struct {
	key  string
	ns   []string
	fan  []*int
	br   []*string
	span trace.Span
	ctx  context.Context
}

// New returns an Observer emitting spans through cfg.TracerProvider.
func New(cfg Config) (*Observer, error) {
	if cfg.TracerProvider == nil {
		return nil, ErrNoTracerProvider
	}
	o := &Observer{
		tracer:      cfg.TracerProvider.Tracer(TracerName),
		specVersion: cfg.SpecVersion,
		implVersion: cfg.ImplementationVersion,
		invs:        map[string]*invState{},
	}
	if o.specVersion == "" {
		o.specVersion = DefaultSpecVersion
	}
	if o.implVersion == "" {
		o.implVersion = DefaultImplementationVersion
	}
	return o, nil
}

// Observe is a [graph.Observer]. It handles *graph.InvocationEvent and
// *graph.NodeEvent and ignores every other event type.
func (o *Observer) Observe(_ context.Context, ev graph.Event) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e := ev.(type) {
	case *graph.InvocationEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.invocationStarted(e)
		} else {
			o.invocationCompleted(e)
		}
	case *graph.NodeEvent:
		if e == nil {
			return nil
		}
		if e.Phase == graph.PhaseStarted {
			o.nodeStarted(e)
		} else {
			o.nodeEnded(e)
		}
	}
	return nil
}

func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func (o *Observer) invocationStarted(e *graph.InvocationEvent) {
	if old := o.invs[e.InvocationID]; old != nil {
		// A stale invocation with the same id (no completed event was
		// seen): close it rather than leak it.
		o.closeAll(old, stamp(e.Time), "")
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrInvocationID, e.InvocationID),
		attribute.String(AttrCorrelationID, e.CorrelationID),
		attribute.String(AttrEntryNode, e.EntryNode),
		attribute.String(AttrSpecVersion, o.specVersion),
		attribute.String(AttrImplementationName, ImplementationName),
		attribute.String(AttrImplementationVersion, o.implVersion),
	}
	if e.SessionID != "" {
		attrs = append(attrs, attribute.String(AttrSessionID, e.SessionID))
	}
	ctx, span := o.tracer.Start(context.Background(), InvocationSpanName,
		trace.WithTimestamp(stamp(e.Time)), trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindInternal))
	o.invs[e.InvocationID] = &invState{span: span, ctx: ctx, sessionID: e.SessionID}
}

func (o *Observer) invocationCompleted(e *graph.InvocationEvent) {
	st := o.invs[e.InvocationID]
	if st == nil {
		return
	}
	delete(o.invs, e.InvocationID)
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
	// Node spans still open (enclosing dispatches of a suspending node,
	// or nodes whose terminal event was lost) end with the invocation.
	o.closeAll(st, end, outcome)
	if st.span == nil {
		return
	}
	switch e.Status {
	case graph.Errored:
		cat := string(e.ErrorCategory)
		st.span.SetAttributes(attribute.String(AttrOutcome, outcome))
		if cat != "" {
			st.span.SetAttributes(attribute.String(AttrErrorCategory, cat))
		}
		if e.Err != nil {
			st.span.RecordError(e.Err)
		}
		st.span.SetStatus(codes.Error, cat)
	default:
		if outcome != "" {
			st.span.SetAttributes(attribute.String(AttrOutcome, outcome))
		}
		st.span.SetStatus(codes.Ok, "")
	}
	st.span.End(trace.WithTimestamp(end))
}

// closeAll ends st's open node spans, innermost first. A non-empty
// outcome other than errored marks them OK with that outcome.
func (o *Observer) closeAll(st *invState, end time.Time, outcome string) {
	for i := len(st.open) - 1; i >= 0; i-- {
		s := st.open[i].span
		if outcome == OutcomeSuspended || outcome == OutcomeCompleted {
			s.SetAttributes(attribute.String(AttrOutcome, outcome))
			s.SetStatus(codes.Ok, "")
		}
		s.End(trace.WithTimestamp(end))
	}
	st.open = nil
}

// spanKey is the §6 event-source identity (namespace, attempt_index,
// fan_out_index_chain, branch_name_chain).
func spanKey(e *graph.NodeEvent) string {
	b, _ := json.Marshal([]any{e.Namespace, e.AttemptIndex, e.FanOutIndexChain, e.BranchNameChain})
	return string(b)
}

func (o *Observer) nodeStarted(e *graph.NodeEvent) {
	st := o.invs[e.InvocationID]
	if st == nil {
		// No invocation span (InvocationEvents not requested): node spans
		// become roots, tracked so they still pair and end.
		st = &invState{ctx: context.Background()}
		o.invs[e.InvocationID] = st
	}
	parent := st.ctx
	if p := st.parentOf(e); p != nil {
		parent = p.ctx
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrNodeName, e.NodeName),
		attribute.StringSlice(AttrNodeNamespace, e.Namespace),
		attribute.Int(AttrNodeStep, e.Step),
		attribute.Int(AttrNodeAttemptIndex, e.AttemptIndex),
		attribute.String(AttrInvocationID, e.InvocationID),
		attribute.String(AttrCorrelationID, e.CorrelationID),
	}
	if e.FanOutIndex != nil {
		attrs = append(attrs, attribute.Int(AttrNodeFanOutIndex, *e.FanOutIndex))
	}
	if e.BranchName != nil {
		attrs = append(attrs, attribute.String(AttrNodeBranchName, *e.BranchName))
	}
	if st.sessionID != "" {
		attrs = append(attrs, attribute.String(AttrSessionID, st.sessionID))
	}
	ctx, span := o.tracer.Start(parent, e.NodeName, trace.WithTimestamp(stamp(e.Time)),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	st.open = append(st.open, &nodeSpan{
		key: spanKey(e), ns: e.Namespace, fan: e.FanOutIndexChain, br: e.BranchNameChain,
		span: span, ctx: ctx,
	})
}

// parentOf returns the open span of the nearest enclosing dispatch of e:
// the latest opened span whose namespace is a proper prefix of e's (the
// longest one first) and whose lineage chains are a prefix of e's. It is
// nil for an outermost node, whose parent is the invocation span. The
// engine emits no events for a subgraph node itself, so nodes inside a
// plain subgraph attach to the next enclosing span (fan-out or
// parallel-branches node, or the invocation).
func (st *invState) parentOf(e *graph.NodeEvent) *nodeSpan {
	for n := len(e.Namespace) - 1; n >= 1; n-- {
		for i := len(st.open) - 1; i >= 0; i-- {
			s := st.open[i]
			if !slices.Equal(s.ns, e.Namespace[:n]) {
				continue
			}
			if chainPrefix(s.fan, e.FanOutIndexChain, intEq) && chainPrefix(s.br, e.BranchNameChain, strEq) {
				return s
			}
		}
	}
	return nil
}

func intEq(a, b *int) bool    { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func strEq(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func chainPrefix[T any](p, full []*T, eq func(a, b *T) bool) bool {
	if len(p) > len(full) {
		return false
	}
	for i := range p {
		if !eq(p[i], full[i]) {
			return false
		}
	}
	return true
}

func (o *Observer) nodeEnded(e *graph.NodeEvent) {
	st := o.invs[e.InvocationID]
	if st == nil {
		return
	}
	key := spanKey(e)
	i := slices.IndexFunc(st.open, func(s *nodeSpan) bool { return s.key == key })
	if i < 0 {
		return
	}
	s := st.open[i].span
	st.open = slices.Delete(st.open, i, i+1)
	switch {
	case e.Phase == graph.PhaseSuspended:
		s.SetAttributes(attribute.String(AttrOutcome, OutcomeSuspended))
		if e.Descriptor != nil {
			s.SetAttributes(SuspensionAttributes(*e.Descriptor)...)
		}
		s.SetStatus(codes.Ok, "")
	case e.Err != nil:
		cat := string(e.ErrorCategory)
		s.SetAttributes(attribute.String(AttrOutcome, OutcomeErrored), attribute.String(AttrErrorCategory, cat))
		s.RecordError(e.Err)
		s.SetStatus(codes.Error, cat)
	default:
		s.SetAttributes(attribute.String(AttrOutcome, OutcomeCompleted))
		s.SetStatus(codes.Ok, "")
	}
	s.End(trace.WithTimestamp(stamp(e.Time)))
	if st.span == nil && len(st.open) == 0 {
		delete(o.invs, e.InvocationID)
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
		return attribute.String(key, x)
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
		return attribute.StringSlice(key, x)
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
		return attribute.String(key, fmt.Sprint(v))
	}
	return attribute.String(key, string(b))
}

// homogeneous converts a []any whose elements all share one scalar type.
func homogeneous(key string, xs []any) (attribute.KeyValue, bool) {
	if len(xs) == 0 {
		return attribute.KeyValue{}, false
	}
	switch xs[0].(type) {
	case string:
		return collect(xs, func(v []string) attribute.KeyValue { return attribute.StringSlice(key, v) })
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
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, st := range o.invs {
		n += len(st.open)
		if st.span != nil {
			n++
		}
	}
	return n
}
