package bench

import (
	"context"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// ReplyAdapter is W2's backend adapter: it answers every turn with the
// W1 reply, standing for an upstream framework that costs nothing.
type ReplyAdapter struct{}

// Name returns "bench-reply".
func (ReplyAdapter) Name() string { return "bench-reply" }

// Run answers with the reply.
func (ReplyAdapter) Run(context.Context, *adapter.Request, adapter.Emitter) (*adapter.Result, error) {
	return &adapter.Result{Output: &adapter.Output{Text: reply, Messages: []llm.Message{replyMsg}}}, nil
}

// ToolAdapter is W3's backend adapter: an upstream tool loop over
// ToolModel and the get_weather tool, reporting the tool's progress
// through the emitter and returning the three messages of the turn.
type ToolAdapter struct {
	tool agent.Tool
}

// NewToolAdapter returns W3's adapter.
func NewToolAdapter() (*ToolAdapter, error) {
	weather, err := agent.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, a weatherArgs) (string, error) { return "Sunny, 22°C in " + a.City, nil })
	if err != nil {
		return nil, err
	}
	return &ToolAdapter{tool: weather}, nil
}

// Name returns "bench-tool".
func (*ToolAdapter) Name() string { return "bench-tool" }

// Run runs the tool loop.
func (t *ToolAdapter) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	msgs := append(append(make([]llm.Message, 0, len(req.History)+4), req.History...), req.Input)
	first := len(msgs)
	for {
		resp, err := ToolModel{}.Complete(ctx, &llm.Request{Messages: msgs, Tools: []llm.Tool{t.tool.Definition}})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			return &adapter.Result{Output: &adapter.Output{Text: resp.Message.Text(), Messages: msgs[first:]}}, nil
		}
		for _, tc := range resp.Message.ToolCalls {
			emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &tc})
			out, err := t.tool.Call(ctx, tc.Arguments)
			if err != nil {
				return nil, err
			}
			emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Output: out})
			msgs = append(msgs, llm.ToolResult(tc.ID, out))
		}
	}
}

// AdapterGraph returns a build function for newSessionTurns: a's turns
// served through the runtime (adapter.Compile on the backend).
func AdapterGraph(a adapter.Adapter) func(Backend) (*graph.Graph, error) {
	return func(be Backend) (*graph.Graph, error) {
		ag := &adapter.Agent{ID: "bench", Backend: a.Name()}
		return adapter.Compile(a, nil, ag, be.compileOptions()...)
	}
}

// AdapterW2 is W2 through a backend adapter: one Send to a new session
// whose turn ReplyAdapter answers, through the runtime (chat harness,
// session store, adapter graph). Its time minus ChatW2's is the adapter
// layer's overhead per turn; minus AdapterDirect's, the runtime's.
func AdapterW2(b *testing.B, be Backend) {
	b.Helper()
	newSessionTurns(b, be, AdapterGraph(ReplyAdapter{}), "aw2-", 1)
}

// AdapterW3 is W3 through a backend adapter (ToolAdapter): three new
// messages per turn.
func AdapterW3(b *testing.B, be Backend) {
	b.Helper()
	a, err := NewToolAdapter()
	if err != nil {
		b.Fatal(err)
	}
	newSessionTurns(b, be, AdapterGraph(a), "aw3-", 3)
}

// AdapterDirect times a's Run called directly on a new conversation,
// without the runtime: the baseline of AdapterW2 and AdapterW3.
func AdapterDirect(b *testing.B, a adapter.Adapter, replies int) {
	b.Helper()
	ctx := context.Background()
	emit := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	ag := &adapter.Agent{ID: "bench", Backend: a.Name()}
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Run(ctx, &adapter.Request{Agent: ag, Input: userMsg}, emit)
		if err != nil {
			b.Fatal(err)
		}
		if res.Output == nil || len(res.Output.Messages) != replies {
			b.Fatalf("direct turn: %#v", res)
		}
	}
}
