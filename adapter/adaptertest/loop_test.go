package adaptertest_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// loop is a minimal non-native backend: its own tool loop over the
// agent's Provider and Tools, standing for an upstream framework. A call
// of a tool that needs approval suspends with the messages of the turn
// so far; the resumed Run runs (or refuses) the call and continues.
type loop struct{ ag *adapter.Agent }

func newLoop(_ context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
	var cfg struct{}
	if err := req.Agent.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	return &loop{ag: req.Agent}, nil
}

func (l *loop) Name() string { return "loop" }

func (l *loop) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	msgs := append([]llm.Message(nil), req.History...)
	var added []llm.Message
	if r := req.Resume; r != nil {
		res := "The user denied this call."
		if r.Approved {
			res = l.call(ctx, emit, r.ToolCall)
		}
		added = append(added, llm.ToolResult(r.ToolCall.ID, res))
	} else {
		added = append(added, req.Input)
	}
	var defs []llm.Tool
	for _, t := range l.ag.Tools {
		defs = append(defs, t.Definition)
	}
	for range 8 {
		resp, err := llm.Complete(ctx, l.ag.Provider, &llm.Request{System: l.ag.System, Messages: append(msgs, added...), Tools: defs})
		if err != nil {
			return nil, err
		}
		m := resp.Message
		m.Role = llm.RoleAssistant
		added = append(added, m)
		if len(m.ToolCalls) == 0 {
			emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: m.Text()})
			out := added
			if req.Resume == nil {
				out = added[1:] // the user's message is the runtime's
			}
			return &adapter.Result{Output: &adapter.Output{Text: m.Text(), Messages: out, Metadata: map[string]any{"steps": len(added)}}}, nil
		}
		for _, tc := range m.ToolCalls {
			if t, _ := l.ag.Tool(tc.Name); t.NeedsApproval {
				st, _ := json.Marshal(len(added))
				out := added
				if req.Resume == nil {
					out = added[1:]
				}
				return &adapter.Result{Suspension: &adapter.Suspension{ToolCall: tc, Messages: out, State: st}}, nil
			}
			added = append(added, llm.ToolResult(tc.ID, l.call(ctx, emit, tc)))
		}
	}
	return adapter.Text("too many steps"), nil
}

func (l *loop) call(ctx context.Context, emit adapter.Emitter, tc llm.ToolCall) string {
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &tc})
	t, ok := l.ag.Tool(tc.Name)
	if !ok {
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Error: "no such tool"})
		return "error: no such tool"
	}
	out, err := t.Call(ctx, tc.Arguments)
	if err != nil {
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Error: err.Error()})
		return "error: " + err.Error()
	}
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Output: out})
	emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{Name: tc.Name + " result", MediaType: "text/plain", Text: out}})
	return out
}

// TestWrappedAdapter runs the script against a non-native adapter, as a
// graph workflow.
func TestWrappedAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Config{Backend: "loop", Factory: newLoop, Section: json.RawMessage(`{}`), Workflow: "loop-workflow"})
}
