package adapter

import (
	"context"
	"strings"

	"github.com/armature-go/armature/graph"
)

// RequestInfo is the runtime's identity of a turn, which the runtime
// attaches to the turn's context (WithRequestInfo) so that an adapter's
// Request carries the runtime's ids.
type RequestInfo struct {
	// RequestID is the turn's run id.
	RequestID string
	// Tenant and SessionID name the session as the API does.
	Tenant    string
	SessionID string
	// Metadata is the request's metadata (correlation, conversation).
	Metadata map[string]any
}

type requestInfoKey struct{}

// WithRequestInfo returns ctx carrying the turn's identity; the server
// calls it for every turn it runs.
func WithRequestInfo(ctx context.Context, info RequestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, info)
}

// RequestInfoFrom returns the identity WithRequestInfo attached to ctx.
func RequestInfoFrom(ctx context.Context) (RequestInfo, bool) {
	info, ok := ctx.Value(requestInfoKey{}).(RequestInfo)
	return info, ok
}

// fillIdentity sets req's ids from the turn's context: the runtime's
// RequestInfo when present, else the invocation id and the session key
// ("<tenant>/<session>", as the server stores sessions).
func fillIdentity(ctx context.Context, req *Request) {
	if info, ok := RequestInfoFrom(ctx); ok {
		req.RequestID, req.Tenant, req.SessionID, req.Metadata = info.RequestID, info.Tenant, info.SessionID, info.Metadata
		return
	}
	req.RequestID = graph.InvocationID(ctx)
	req.Tenant, req.SessionID = splitKey(graph.SessionID(ctx))
}

// splitKey splits a session key as the runtime forms it: the tenant,
// a slash and the session id, or a session id alone.
func splitKey(key string) (tenant, sessionID string) {
	if t, id, ok := strings.Cut(key, "/"); ok {
		return t, id
	}
	return "", key
}
