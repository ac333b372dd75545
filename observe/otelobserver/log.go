package otelobserver

import (
	"context"
	"log/slog"

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
// graph logging; records of invocations without such an observer, and
// records outside invocations, are handled at once without span ids.
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
}

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
	r = r.Clone()
	r.AddAttrs(attrs...)
	if graph.Emit(ctx, &logPayload{o: l.o, ctx: ctx, next: l.next, rec: r}) {
		return nil
	}
	return l.next.Handle(ctx, r)
}

func (l *spanLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &spanLogHandler{o: l.o, next: l.next.WithAttrs(as)}
}

func (l *spanLogHandler) WithGroup(name string) slog.Handler {
	return &spanLogHandler{o: l.o, next: l.next.WithGroup(name)}
}
