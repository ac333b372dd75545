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
// active OTel span.
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
	return attrs
}
