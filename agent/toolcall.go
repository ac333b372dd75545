package agent

import (
	"context"

	"github.com/armature-go/armature/graph"
)

// ToolCallInfo identifies the tool call a Tool's Call runs for: the
// call's id (the model's, or the fresh one the history stores it under)
// and name, and the session's id (graph.SessionID; empty outside a
// sessioned turn).
type ToolCallInfo struct {
	ID, Name, SessionID string
}

// IdempotencyKey is a key that names this call of the tool in its
// session: the same every time the call runs. A call runs again when a
// resumed turn is retried after a crash (the resume that ran the
// approved call did not commit, so the approval is still pending and
// its next resume runs the call again): a tool whose effect must not
// happen twice (a refund, a payment, an email) passes the key to the
// system it acts on (an Idempotency-Key header) or records it, and
// skips a key it has seen.
func (c ToolCallInfo) IdempotencyKey() string {
	if c.SessionID == "" {
		return c.ID
	}
	return c.SessionID + "/" + c.ID
}

type toolCallKey struct{}

// WithToolCall returns ctx carrying the identity of the tool call a
// Tool's Call runs for; the agent sets it, and so do backend adapters
// bridging Armature tools to an upstream. ToolCallOf reads it.
func WithToolCall(ctx context.Context, id, name string) context.Context {
	return context.WithValue(ctx, toolCallKey{}, ToolCallInfo{ID: id, Name: name, SessionID: graph.SessionID(ctx)})
}

// ToolCallOf returns the identity of the tool call ctx runs a Tool's
// Call for (see WithToolCall), and whether ctx carries one.
func ToolCallOf(ctx context.Context) (ToolCallInfo, bool) {
	c, ok := ctx.Value(toolCallKey{}).(ToolCallInfo)
	return c, ok
}
