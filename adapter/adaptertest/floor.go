package adaptertest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// Scripted is an adapter that does no work of its own: each turn emits
// the events and returns the messages of the workload it was built for,
// as an upstream agent would, and nothing else. Through the runtime it
// measures what the runtime itself costs per turn ([Floor]): an
// upstream adds its own work on top, never less.
type Scripted struct {
	// Tool makes each turn a W3 tool turn: a tool call, its result and
	// the answer (agent.tool.start, agent.tool.result, the answer's
	// text, agent.node.completed). Otherwise a turn is a W2 reply: its
	// text and agent.node.completed.
	Tool bool
}

// Name implements adapter.Adapter.
func (Scripted) Name() string { return "scripted" }

// Run implements adapter.Adapter.
func (s Scripted) Run(ctx context.Context, _ *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	if !s.Tool {
		const text = "Hello! How can I help?"
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: text})
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseNodeCompleted, Node: "agent"})
		return adapter.Completed(text, nil), nil
	}
	const text = "Order 7 shipped yesterday."
	tc := llm.ToolCall{ID: "call-1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &tc})
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Output: `{"status":"shipped"}`})
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: text})
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseNodeCompleted, Node: "agent"})
	return adapter.Completed(text, []llm.Message{llm.AssistantToolCalls(tc), llm.ToolResult(tc.ID, `{"status":"shipped"}`),
		llm.AssistantText(text)}), nil
}

// Floor pairs a turn of s run directly (its Run, events dropped) with
// the same turn through the runtime (server.Submit over the adapter's
// chat graph, on in-memory stores), in one loop as [Paired] does:
// overhead-ns/turn is the runtime's own cost per turn, with no upstream
// work for its allocations and caches to interact with.
func Floor(b *testing.B, s Scripted) {
	b.Helper()
	ctx := context.Background()
	ag := &adapter.Agent{ID: "bench", Backend: s.Name()}
	replies := 1
	if s.Tool {
		replies = 3
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	submit := MemoryServer(b, &server.Agent{ID: "bench", Chat: Harness(b, s, ag, sessions), Backend: s.Name()}, sessions, replies)
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	msg := llm.UserText("hello")
	Paired(b, func(id string) {
		if _, err := s.Run(ctx, &adapter.Request{Agent: ag, SessionID: id, Input: msg}, drop); err != nil {
			b.Fatal(err)
		}
	}, func(id string) { submit(id, msg) })
}
