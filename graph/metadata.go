package graph

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/errcat"
)

// Caller-supplied invocation metadata (observability §3.4): a mapping of
// string keys to OpenTelemetry attribute values attached at Invoke
// ([WithMetadata]), readable anywhere in the invocation
// ([InvocationMetadata]) and augmented from a node, middleware or
// observer ([SetInvocationMetadata]).
//
// Scoping follows the spec's per-async-context copy-on-write rule. The
// outermost graph and the serial subgraphs below it share one view;
// each fan-out instance and parallel branch gets its own copy at
// dispatch, so an instance's additions never reach its siblings nor the
// parent after the join; each retry attempt ([Retry]) starts from the
// pre-attempt view, and only a successful attempt's additions carry on.

// ErrReservedMetadataKey is matched (errors.Is) by the *MetadataError of
// a key in a reserved namespace (openarmature.*, gen_ai.*) or equal to a
// reserved OA metadata name (observability §3.4).
var ErrReservedMetadataKey = errors.New("graph: reserved invocation metadata key")

// MetadataError reports an invalid invocation metadata entry. Its
// category is errcat.InvalidInvocationMetadata; it matches
// [ErrInvalidOption], and [ErrReservedMetadataKey] when the key is
// reserved.
type MetadataError struct {
	// Key is the offending key.
	Key string
	// Reason says what is wrong with it or its value.
	Reason   string
	reserved bool
}

// Error describes the entry.
func (e *MetadataError) Error() string {
	return fmt.Sprintf("graph: invocation metadata %q: %s", e.Key, e.Reason)
}

// Category returns errcat.InvalidInvocationMetadata.
func (e *MetadataError) Category() errcat.Category { return errcat.InvalidInvocationMetadata }

// Unwrap returns ErrInvalidOption.
func (e *MetadataError) Unwrap() error { return ErrInvalidOption }

// Is matches ErrReservedMetadataKey for a reserved key.
func (e *MetadataError) Is(target error) bool {
	return target == ErrReservedMetadataKey && e.reserved
}

// reservedMetadataNames are the OA-emitted top-level backend metadata
// names a caller key must not equal (observability §3.4).
var reservedMetadataNames = []string{
	"attempt_index", "branch_name", "correlation_id", "detached", "detached_child_trace_ids",
	"detached_from_invocation_id", "entry_node", "fan_out_concurrency", "fan_out_error_policy",
	"fan_out_index", "fan_out_item_count", "fan_out_parent_node_name", "finish_reason",
	"implementation_name", "implementation_version", "invocation_id", "namespace",
	"parallel_branches_branch_count", "parallel_branches_error_policy",
	"parallel_branches_parent_node_name", "prompt", "prompt_group_name", "request_extras",
	"response_id", "response_model", "spec_version", "step", "subgraph_name", "system",
}

// Metadata is an immutable invocation metadata mapping: string keys to
// OTel attribute values, each a string, bool, int64, float64 or a slice
// of one of those ([]string, []bool, []int64, []float64). The zero value
// is empty. Its values must not be modified (slices are shared).
type Metadata struct{ m map[string]any }

// Len returns the number of entries.
func (m Metadata) Len() int { return len(m.m) }

// Get returns the value of key.
func (m Metadata) Get(key string) (any, bool) {
	v, ok := m.m[key]
	return v, ok
}

// All yields the entries in key order.
func (m Metadata) All() iter.Seq2[string, any] {
	return func(yield func(string, any) bool) {
		for _, k := range slices.Sorted(maps.Keys(m.m)) {
			if !yield(k, m.m[k]) {
				return
			}
		}
	}
}

// Map returns a copy of the entries (nil when empty).
func (m Metadata) Map() map[string]any {
	if len(m.m) == 0 {
		return nil
	}
	return maps.Clone(m.m)
}

// With returns m with entries added (a key already present is
// overwritten); m itself is unchanged. Entries are validated as by
// [WithMetadata].
func (m Metadata) With(entries map[string]any) (Metadata, error) {
	add, err := NewMetadata(entries)
	if err != nil {
		return m, err
	}
	return m.merge(add), nil
}

func (m Metadata) merge(add Metadata) Metadata {
	if add.Len() == 0 {
		return m
	}
	if m.Len() == 0 {
		return add
	}
	out := make(map[string]any, len(m.m)+len(add.m))
	maps.Copy(out, m.m)
	maps.Copy(out, add.m)
	return Metadata{m: out}
}

// NewMetadata validates entries and returns them as Metadata. Keys must
// be non-empty, outside the reserved namespaces openarmature.* and
// gen_ai.* and not equal to a reserved OA metadata name; values must be
// OTel attribute values: strings, bools, integers, finite or not floats,
// or non-nil homogeneous slices of one of those ([]any included). Errors
// are *MetadataError.
func NewMetadata(entries map[string]any) (Metadata, error) {
	if len(entries) == 0 {
		return Metadata{}, nil
	}
	out := make(map[string]any, len(entries))
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		if err := checkMetadataKey(k); err != nil {
			return Metadata{}, err
		}
		v, ok := metadataValue(entries[k])
		if !ok {
			return Metadata{}, &MetadataError{Key: k, Reason: fmt.Sprintf("value %T is not an OTel attribute value (string, bool, integer, float or a homogeneous slice of one)", entries[k])}
		}
		out[k] = v
	}
	return Metadata{m: out}, nil
}

func checkMetadataKey(k string) error {
	switch {
	case k == "":
		return &MetadataError{Key: k, Reason: "empty key"}
	case strings.HasPrefix(k, "openarmature.") || strings.HasPrefix(k, "gen_ai."):
		return &MetadataError{Key: k, Reason: "key is in a reserved namespace (openarmature.*, gen_ai.*)", reserved: true}
	case slices.Contains(reservedMetadataNames, k):
		return &MetadataError{Key: k, Reason: "key is a reserved OA metadata name", reserved: true}
	}
	return nil
}

// metadataValue normalizes v to one of the Metadata value types.
func metadataValue(v any) (any, bool) {
	switch x := v.(type) {
	case string, bool, int64, float64:
		return x, true
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint:
		if uint64(x) <= math.MaxInt64 {
			return int64(x), true
		}
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	case float32:
		return float64(x), true
	case []string:
		return slices.Clone(x), x != nil
	case []bool:
		return slices.Clone(x), x != nil
	case []int64:
		return slices.Clone(x), x != nil
	case []float64:
		return slices.Clone(x), x != nil
	case []int:
		if x == nil {
			return nil, false
		}
		out := make([]int64, len(x))
		for i, n := range x {
			out[i] = int64(n)
		}
		return out, true
	case []any:
		return homogeneousSlice(x)
	}
	return nil, false
}

func homogeneousSlice(xs []any) (any, bool) {
	if xs == nil {
		return nil, false
	}
	if len(xs) == 0 {
		return []string{}, true
	}
	first, ok := metadataValue(xs[0])
	if !ok {
		return nil, false
	}
	switch first.(type) {
	case string:
		return collectAs[string](xs)
	case bool:
		return collectAs[bool](xs)
	case int64:
		return collectAs[int64](xs)
	case float64:
		return collectAs[float64](xs)
	}
	return nil, false // nested slices
}

func collectAs[T any](xs []any) (any, bool) {
	out := make([]T, len(xs))
	for i, x := range xs {
		v, ok := metadataValue(x)
		if !ok {
			return nil, false
		}
		t, ok := v.(T)
		if !ok {
			return nil, false
		}
		out[i] = t
	}
	return out, true
}

// WithMetadata attaches caller-supplied invocation metadata
// (observability §3.4). Invalid entries (see [NewMetadata]) make Invoke
// return a nil Result and the *MetadataError before any work begins.
func WithMetadata(entries map[string]any) InvokeOption {
	return func(c *invokeConfig) error {
		md, err := NewMetadata(entries)
		if err != nil {
			return err
		}
		c.metadata = c.metadata.merge(md)
		return nil
	}
}

// metaCell holds one async context's view of the metadata (the outermost
// serial flow, a fan-out instance, a branch, a retry attempt). Its value
// is replaced, never mutated.
type metaCell struct{ p atomic.Pointer[Metadata] }

// load returns the cell's value (empty for a nil cell).
func (c *metaCell) load() Metadata {
	if c == nil {
		return Metadata{}
	}
	if p := c.p.Load(); p != nil {
		return *p
	}
	return Metadata{}
}

func (c *metaCell) store(md Metadata) {
	if md.Len() > 0 || c.p.Load() != nil {
		v := md // allocated only here
		c.p.Store(&v)
	}
}

// add merges entries into the cell and returns the new value.
func (c *metaCell) add(add Metadata) Metadata {
	for {
		old := c.p.Load()
		var cur Metadata
		if old != nil {
			cur = *old
		}
		md := cur.merge(add)
		if c.p.CompareAndSwap(old, &md) {
			return md
		}
	}
}

type metaKey struct{}

// metaCtx carries a retry attempt's cell.
type metaCtx struct {
	context.Context
	cell *metaCell
}

func (c *metaCtx) Value(key any) any {
	if key == (metaKey{}) {
		return c.cell
	}
	return c.Context.Value(key)
}

func cellOf(ctx context.Context) *metaCell {
	c, _ := ctx.Value(metaKey{}).(*metaCell)
	return c
}

// ownMeta gives a fan-out instance's or branch's unit scope its own copy
// of the metadata visible in ctx (the dispatching node's view). The cell
// is never empty, which marks the scope as its owner.
func (c *scopeCtx) ownMeta(ctx context.Context) {
	v := cellOf(ctx).load()
	c.meta.p.Store(&v)
}

// InvocationMetadata returns the invocation metadata visible in ctx: the
// caller's mapping plus the additions made in this context and the
// contexts it descends from. Outside an invocation it is empty.
func InvocationMetadata(ctx context.Context) Metadata {
	if scopeFrom(ctx) == nil {
		return Metadata{}
	}
	return cellOf(ctx).load()
}

// SetInvocationMetadata adds entries to the invocation metadata of ctx's
// context (observability §3.4 mid-invocation augmentation): later reads
// and events in this context and the ones it dispatches see them; sibling
// fan-out instances and branches do not. Invalid entries return a
// *MetadataError and change nothing. Outside an invocation it does
// nothing. Observers registered with [InvocationEvents] receive a
// [MetadataEvent], after the calling node's started event, so they can
// update the spans still open.
func SetInvocationMetadata(ctx context.Context, entries map[string]any) error {
	add, err := NewMetadata(entries)
	if err != nil {
		return err
	}
	s := scopeFrom(ctx)
	c := cellOf(ctx)
	if s == nil || c == nil || add.Len() == 0 {
		return nil
	}
	inv := s.inv
	md := c.add(add)
	if inv.invEvents {
		ev := &MetadataEvent{
			Added: add, Metadata: md, EventSource: s.eventSource(ctx),
			InvocationID: inv.id, CorrelationID: inv.corrID, Time: inv.g.now(),
		}
		inv.w.emit(queued{ev: ev, invocation: true, graphs: s.fr.obs, invoked: inv.invObs})
	}
	return nil
}

// attemptMeta returns ctx with a retry attempt's own copy of the
// metadata visible in ctx, and a commit func that makes the attempt's
// additions the enclosing context's (called when the attempt succeeded).
// Outside an invocation it returns ctx unchanged.
func attemptMeta(ctx context.Context) (context.Context, func()) {
	s := scopeFrom(ctx)
	parent := cellOf(ctx)
	if s == nil || parent == nil {
		return ctx, func() {}
	}
	c := &metaCell{}
	c.store(parent.load())
	return &metaCtx{Context: ctx, cell: c}, func() { parent.store(c.load()) }
}

// EventSource locates the code that emitted a [MetadataEvent] or an
// [EmittedEvent]: a node attempt, or a fan-out instance's or branch's own
// middleware.
type EventSource struct {
	// NodeName is the node's name; empty for a fan-out instance or
	// branch, in which case Namespace ends with the dispatch node and the
	// chains with the unit's index or branch name.
	NodeName     string
	Namespace    []string
	AttemptIndex int
	// FanOutIndexChain and BranchNameChain are the lineage, as on the
	// node's events (the innermost non-nil entries are its fan-out index
	// and branch name).
	FanOutIndexChain []*int
	BranchNameChain  []*string
}

// eventSource returns the event source of code running in s with ctx.
func (s *scope) eventSource(ctx context.Context) EventSource {
	src := EventSource{AttemptIndex: AttemptIndex(ctx)}
	if s.node != nil {
		src.NodeName = s.node.name
	}
	src.Namespace, _, _, src.FanOutIndexChain, src.BranchNameChain = s.lineage()
	if s.node == nil && len(src.Namespace) > 0 {
		src.FanOutIndexChain, src.BranchNameChain = s.fr.fanChain, s.fr.branchChain
	}
	return src
}

// MetadataEvent reports a mid-invocation metadata augmentation
// (observability §6 metadata-augmentation event, an Armature extension
// of the event union): the entries added and where. It is delivered in
// order with the node events, so it arrives after the augmenting node's
// started event and before its completed event. Only observers
// registered with [InvocationEvents] receive it.
type MetadataEvent struct {
	// Added are the entries added; Metadata is the augmenting context's
	// whole view after the addition.
	Added    Metadata
	Metadata Metadata
	// EventSource is where the entries were added.
	EventSource
	// InvocationID and CorrelationID identify the invocation; Time is
	// when the entries were added.
	InvocationID, CorrelationID string
	Time                        time.Time
}

// EventInvocationID returns the invocation id.
func (e *MetadataEvent) EventInvocationID() string { return e.InvocationID }

// EmittedEvent carries a payload from code running in an invocation (a
// node, its middleware, anything they call with their context) through
// the invocation's observer queue, in order with the node events: an
// observer processing it sees the spans of the emitting node open. Only
// observers registered with [InvocationEvents] receive it; each ignores
// payloads it does not know. See [Emit].
type EmittedEvent struct {
	// Payload is what the caller emitted.
	Payload any
	// EventSource is where it was emitted from.
	EventSource
	// Metadata is the invocation metadata in scope there.
	Metadata                    Metadata
	InvocationID, CorrelationID string
	Time                        time.Time
}

// EventInvocationID returns the invocation id.
func (e *EmittedEvent) EventInvocationID() string { return e.InvocationID }

// Emit queues payload as an [EmittedEvent] for the observers of the
// invocation ctx belongs to that take invocation events. It reports
// whether it queued anything: false outside an invocation, when no such
// observer is registered, and once the invocation has ended (its
// completed event was emitted: a goroutine a node left running logs
// after Invoke returned) or its delivery was abandoned
// ([DrainTimeout]); the caller then handles the payload itself.
//
// A payload implementing [DeliveryNotifier] learns when the delivery of
// its queued event is over.
func Emit(ctx context.Context, payload any) bool {
	s := scopeFrom(ctx)
	if s == nil || !s.inv.invEvents {
		return false
	}
	inv := s.inv
	ev := &EmittedEvent{
		Payload: payload, EventSource: s.eventSource(ctx), Metadata: cellOf(ctx).load(),
		InvocationID: inv.id, CorrelationID: inv.corrID, Time: inv.g.now(),
	}
	n, _ := payload.(DeliveryNotifier)
	return inv.w.emit(queued{ev: ev, invocation: true, graphs: s.fr.obs, invoked: inv.invObs, notify: n})
}

// DeliveryNotifier is implemented by an [Emit] payload that needs to know
// when the delivery of its event is over, for instance to handle the
// payload itself when no observer took it. EmitDelivered is called once
// for each event Emit queued, after every observer received it, or when
// its delivery was abandoned before ([DrainTimeout]): on the delivery
// goroutine, or on the emitting one when all the invocation's observers
// are [Synchronous]. It must not block.
type DeliveryNotifier interface {
	EmitDelivered()
}
