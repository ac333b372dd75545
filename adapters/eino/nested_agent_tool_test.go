package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// fnModel answers by fn.
type fnModel struct {
	mu   sync.Mutex
	reqs [][]llm.Message
	fn   func(n int, last llm.Message) (*llm.Response, error)
}

func (*fnModel) Ready(context.Context) error { return nil }
func (m *fnModel) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, slices.Clone(req.Messages))
	n := len(m.reqs)
	m.mu.Unlock()
	return m.fn(n, req.Messages[len(req.Messages)-1])
}

func namedHarness(t *testing.T, id string, m llm.Provider, tools []agent.Tool, st stores) *chat.Harness {
	t.Helper()
	reg := &adapter.Registry{}
	if err := eino.Register(reg); err != nil {
		t.Fatal(err)
	}
	section := `{"checkpoint":{"driver":"file","dir":` + strconvQuote(filepath.Join(t.TempDir(), "ckpt")) + `}}`
	ag := &adapter.Agent{ID: id, Backend: eino.Name, Tools: tools, Provider: m, Model: "m", Config: json.RawMessage(section)}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*eino.Adapter).Close() })
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps), OnDelete: adapter.OnDelete(a)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestNestedAgentToolResultStaysInItsTurn: an approval-gated
// tool of an Eino agent runs another Eino agent (an agent as a tool).
// The inner agent's tool call has the id the outer approved call has
// ("call_0": a provider numbering calls per response). The outer turn
// then fails at its next model call: the history it keeps must hold the
// delegate's own result for call_0, not the inner agent's lookup's.
func TestNestedAgentToolResultStaysInItsTurn(t *testing.T) {
	ctx := context.Background()
	type args struct {
		Q string `json:"q"`
	}
	inner := &fnModel{fn: func(n int, last llm.Message) (*llm.Response, error) {
		if last.Role == llm.RoleUser {
			return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: "call_0", Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}), FinishReason: llm.FinishToolCalls}, nil
		}
		return &llm.Response{Message: llm.AssistantText("inner answer"), FinishReason: llm.FinishStop}, nil
	}}
	lookup := agent.MustTool("lookup", "Look up", func(ctx context.Context, a args) (string, error) {
		return "INNER LOOKUP RESULT", nil
	})
	ist := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	ih := namedHarness(t, "inner", inner, []agent.Tool{lookup}, ist)
	delegate := agent.MustTool("delegate", "Ask the specialist (needs approval)", func(ctx context.Context, a args) (string, error) {
		out, err := ih.Send(ctx, "inner/s", llm.UserText(a.Q))
		if err != nil {
			return "", err
		}
		c, ok := out.(*chat.Completed)
		if !ok {
			return "", errors.New("inner turn did not complete")
		}
		return "specialist said: " + c.Replies[len(c.Replies)-1].Text(), nil
	}).WithApproval()
	outer := &fnModel{fn: func(n int, last llm.Message) (*llm.Response, error) {
		if last.Role == llm.RoleUser {
			return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: "call_0", Name: "delegate", Arguments: json.RawMessage(`{"q":"help"}`)}), FinishReason: llm.FinishToolCalls}, nil
		}
		return nil, errors.New("upstream unavailable")
	}}
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	h := namedHarness(t, "outer", outer, []agent.Tool{delegate}, st)
	out, err := h.Send(ctx, "acme/s", llm.UserText("please delegate"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("send: %#v %v", out, err)
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	t.Logf("resume: %T %v", out, err)
	rec, _ := st.sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"})
	raw, _ := json.Marshal(rec.State["messages"])
	t.Logf("outer history: %s", raw)
	var msgs []llm.Message
	_ = json.Unmarshal(raw, &msgs)
	for _, msg := range msgs {
		if msg.Role == llm.RoleTool && msg.ToolCallID == "call_0" && msg.Text() != "specialist said: inner answer" {
			t.Errorf("the outer approved call's result is recorded as %q (the inner agent's tool result), want %q", msg.Text(), "specialist said: inner answer")
		}
	}
}
