package otelobserver

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"

	"github.com/armature-go/armature/graph"
)

// LogHandler wraps h so that every record handled with a context that
// belongs to an invocation (slog.InfoContext(ctx, ...) and friends, from a
// node, middleware or anything they call with their context) carries the
// observability §7 correlation fields: openarmature.invocation_id,
// openarmature.correlation_id and, for a session-bound invocation only,
// openarmature.session_id. Records without an invocation context pass
// through unchanged.
//
// The fields are appended to the record's own attributes; under [slog.Logger.WithGroup] the
// wrapped handler qualifies them with the group like any other record
// attribute, so wrap the handler before grouping if the keys must stay
// unqualified.
//
// The span's trace_id / span_id are not added: the observer's spans are
// driven by the asynchronous event queue, so the node's context carries no
// active OTel span; [Observer.LogHandler] adds them.
func LogHandler(h slog.Handler) slog.Handler {
	if h == nil {
		panic("otelobserver: LogHandler: nil handler")
	}
	return &logHandler{next: h}
}

type logHandler struct{ next slog.Handler }

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.next.Enabled(ctx, level)
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if attrs := CorrelationAttrs(ctx); len(attrs) > 0 {
			r = r.Clone()
			r.AddAttrs(attrs...)
		}
	}
	return l.next.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{next: l.next.WithAttrs(as)}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: l.next.WithGroup(name)}
}

// CorrelationAttrs returns the §7 correlation fields of the invocation ctx
// belongs to (none outside an invocation).
func CorrelationAttrs(ctx context.Context) []slog.Attr {
	id := graph.InvocationID(ctx)
	if id == "" {
		return nil
	}
	attrs := []slog.Attr{
		slog.String(AttrInvocationID, id),
		slog.String(AttrCorrelationID, graph.CorrelationID(ctx)),
	}
	if sid := graph.SessionID(ctx); sid != "" {
		attrs = append(attrs, slog.String(AttrSessionID, sid))
	}
	return append(attrs, userLogAttrs(graph.InvocationMetadata(ctx))...)
}

// userLogAttrs are the §7 openarmature.user.<key> log fields.
func userLogAttrs(md graph.Metadata) []slog.Attr {
	var attrs []slog.Attr
	for k, v := range md.All() {
		attrs = append(attrs, slog.Any(AttrUserPrefix+k, v))
	}
	return attrs
}

// Log record fields naming the active span (§7).
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps h like the package-level [LogHandler], and also gives
// every record handled within an invocation the observer sees the
// trace_id and span_id of the span active where it was logged (§7): the
// node attempt's span, in its detached trace when detached. So that the
// span is known, the record travels the invocation's observer queue
// ([graph.Emit]) and h handles it when the observer processes it, in
// order with the spans, on the delivery goroutine (as an OTel batch log
// processor would export it later); [graph.Graph.Drain] waits for it.
// The observer must be registered with [graph.InvocationEvents] on the
// graph logging. Records outside invocations, records of invocations
// without an observer taking invocation events, and records logged after
// their invocation ended (by a goroutine a node left running) are
// handled at once, without span ids; records of an invocation whose
// invocation events another observer takes, but not this one, are
// handled without span ids once that observer received them, and so are
// records whose delivery a [graph.DrainTimeout] abandoned. Attribute
// values are resolved (LogValuers) and copied when Handle is called (a
// map, slice, pointer or struct becomes its JSON encoding, which a JSON
// handler embeds as structure; an error, Stringer or TextMarshaler its
// text), so that the record renders what was logged.
// Without spans ([Observer.Spans] false) records carry no span ids but
// still the invocation's fields, for invocations that start after the
// first call of LogHandler (until then the observer keeps no state per
// invocation).
func (o *Observer) LogHandler(h slog.Handler) slog.Handler {
	if h == nil {
		panic("otelobserver: Observer.LogHandler: nil handler")
	}
	o.logs.Store(true)
	return &spanLogHandler{o: o, next: h}
}

type spanLogHandler struct {
	o    *Observer
	next slog.Handler
}

// logPayload is a record on its way through the observer queue.
type logPayload struct {
	o    *Observer
	ctx  context.Context
	next slog.Handler
	rec  slog.Record
	// handled is set once o handled the record.
	handled atomic.Bool
}

// EmitDelivered handles the record, without span ids, when its
// observer did not: it is not registered on the invocation (another
// observer took the invocation events), or the delivery was abandoned.
func (p *logPayload) EmitDelivered() {
	if p.handled.Load() {
		return
	}
	_ = p.next.Handle(p.ctx, p.rec)
}

var _ graph.DeliveryNotifier = (*logPayload)(nil)

func (l *spanLogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.next.Enabled(ctx, level)
}

func (l *spanLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return l.next.Handle(ctx, r)
	}
	attrs := CorrelationAttrs(ctx)
	if len(attrs) == 0 {
		return l.next.Handle(ctx, r)
	}
	// The record is handled later, on the delivery goroutine: its
	// values are resolved and copied now, as the OTel slog bridge
	// converts them when Handle is called, so that it renders what was
	// logged and never reads the caller's maps or slices while the
	// caller goes on with them.
	r = snapshot(r)
	r.AddAttrs(attrs...)
	if graph.Emit(ctx, &logPayload{o: l.o, ctx: ctx, next: l.next, rec: r}) {
		return nil
	}
	return l.next.Handle(ctx, r)
}

// snapshot returns a copy of r whose attribute values no longer refer to
// the caller's data: LogValuers are resolved, groups copied, and a value
// of kind Any made safe to read later by [snapshotAny].
func snapshot(r slog.Record) slog.Record {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(snapshotAttr(a))
		return true
	})
	return out
}

// snapshotAttr is snapshot's copy of one attribute.
func snapshotAttr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindGroup:
		g := a.Value.Group()
		cp := make([]slog.Attr, len(g))
		for i, ga := range g {
			cp[i] = snapshotAttr(ga)
		}
		a.Value = slog.GroupValue(cp...)
	case slog.KindAny:
		a.Value = snapshotAny(a.Value.Any())
	}
	return a
}

// snapshotAny is the value of an attribute of kind Any that is safe to
// read later: an error becomes its Error text; a scalar is kept (it is a
// copy); a byte slice (also a named one, such as [json.RawMessage]) is
// copied, keeping its type; a [fmt.Stringer] or [encoding.TextMarshaler]
// becomes its text; anything else (a map, slice, array, pointer, struct)
// becomes its JSON encoding, kept as a jsonText so that a JSON handler
// embeds it as structure and a text handler renders the JSON text (encoding/json reports cycles; a nil
// pointer is null). A method that panics renders "!PANIC: ..." and a
// value JSON cannot encode "!ERROR: ..." (as slog renders them).
func snapshotAny(v any) slog.Value {
	if v == nil {
		return slog.AnyValue(nil)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		if _, ok := v.(error); !ok {
			return slog.AnyValue(v) // a copied scalar
		}
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		if rv.IsNil() {
			return slog.AnyValue(nil)
		}
	}
	if err, ok := v.(error); ok {
		return slog.StringValue(callText(func() (string, error) { return err.Error(), nil }))
	}
	if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		if bt := reflect.TypeFor[[]byte](); bt.ConvertibleTo(rv.Type()) {
			return slog.AnyValue(reflect.ValueOf(b).Convert(rv.Type()).Interface())
		}
		return slog.AnyValue(b)
	}
	if tm, ok := v.(encoding.TextMarshaler); ok {
		return slog.StringValue(callText(func() (string, error) {
			b, err := tm.MarshalText()
			return string(b), err
		}))
	}
	if s, ok := v.(fmt.Stringer); ok {
		return slog.StringValue(callText(func() (string, error) { return s.String(), nil }))
	}
	var b []byte
	text := callText(func() (string, error) {
		var err error
		b, err = json.Marshal(v)
		return "", err
	})
	if text != "" {
		return slog.StringValue(text)
	}
	return slog.AnyValue(jsonText(b))
}

// jsonText is a value's JSON encoding in a snapshot record: a JSON
// handler embeds it as structure, a text handler (and [slog.Value.String])
// renders its text.
type jsonText []byte

// MarshalJSON returns the encoding.
func (j jsonText) MarshalJSON() ([]byte, error) { return j, nil }

// String returns the encoding as text.
func (j jsonText) String() string { return string(j) }

// callText calls f, rendering a panic as "!PANIC: ..." and an error as
// "!ERROR: ...".
func callText(f func() (string, error)) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("!PANIC: %v", r)
		}
	}()
	s, err := f()
	if err != nil {
		return "!ERROR: " + err.Error()
	}
	return s
}

func (l *spanLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &spanLogHandler{o: l.o, next: l.next.WithAttrs(as)}
}

func (l *spanLogHandler) WithGroup(name string) slog.Handler {
	return &spanLogHandler{o: l.o, next: l.next.WithGroup(name)}
}
