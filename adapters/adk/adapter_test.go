package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// stores are Armature's session and checkpoint stores, shared across a
// simulated restart (a new adapter and harness over the same stores and
// the same ADK session file).
type stores struct {
	sessions *session.MemoryStore
	cps      checkpoint.Store
}

func newHarness(t *testing.T, st stores, section string) *chat.Harness {
	t.Helper()
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: demo.Tools(), Config: json.RawMessage(section)}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*adk.Adapter).Close() })
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func lastText(t *testing.T, out chat.Outcome) string {
	t.Helper()
	c, ok := out.(*chat.Completed)
	if !ok || len(c.Replies) == 0 {
		t.Fatalf("want a completed turn, got %#v", out)
	}
	return c.Replies[len(c.Replies)-1].Text()
}

func TestAdapterTurns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "adk.db")
	section := `{"session":{"driver":"sqlite","path":` + strconvQuote(path) + `}}`
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	h := newHarness(t, st, section)

	out, err := h.Send(ctx, "acme/s1", llm.UserText("hello"))
	if err != nil || !strings.HasPrefix(lastText(t, out), "You said") {
		t.Fatalf("plain turn: %#v %v", out, err)
	}
	out, err = h.Send(ctx, "acme/s1", llm.UserText("where is order 7?"))
	if err != nil || lastText(t, out) != "Here is what I found: order 7: shipped, arriving Thursday" {
		t.Fatalf("tool turn: %#v %v", out, err)
	}
	out, err = h.Send(ctx, "acme/s1", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok || s.Descriptor.Metadata[agent.MetadataTool] != "issue_refund" {
		t.Fatalf("approval turn: %#v %v", out, err)
	}

	// Restart: a new ADK engine on the same session file, a new harness
	// on the same Armature stores; the approval resumes there.
	h = newHarness(t, st, section)
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: agent.Approve("")})
	if err != nil || lastText(t, out) != "Here is what I found: refunded $30.00 for order 7" {
		t.Fatalf("resumed turn: %#v %v", out, err)
	}

	out, _ = h.Send(ctx, "acme/s1", llm.UserText("refund order 8 too"))
	s, ok = out.(*chat.Suspended)
	if !ok {
		t.Fatalf("second approval turn: %#v", out)
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: agent.Deny("no")})
	if err != nil || !strings.Contains(lastText(t, out), "rejected") {
		t.Fatalf("denied turn: %#v %v", out, err)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// twoRefunds is a model that calls issue_refund twice in one step, then
// answers with the results it got.
type twoRefunds struct{}

func (twoRefunds) Ready(context.Context) error { return nil }

func (twoRefunds) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		var results []string
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				results = append(results, m.Text())
			}
		}
		return &llm.Response{Message: llm.AssistantText(strings.Join(results, " | ")), FinishReason: llm.FinishStop}, nil
	}
	return &llm.Response{Message: llm.AssistantToolCalls(
		llm.ToolCall{ID: "r1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"1","amount":10}`)},
		llm.ToolCall{ID: "r2", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"2","amount":20}`)}), FinishReason: llm.FinishToolCalls}, nil
}

// modelHarness builds ag's ADK-Go agent through the registry and serves
// it with the chat harness, on in-memory sessions and checkpoints.
func modelHarness(t *testing.T, ag *adapter.Agent) *chat.Harness {
	t.Helper()
	return agentHarness(t, stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}, ag)
}

// agentHarness is ag's chat harness on st, with an adapter (and so an
// ADK-Go engine, and in-memory ADK-Go sessions) of its own: two over the
// same stores are the same agent before and after a restart.
func agentHarness(t *testing.T, st stores, ag *adapter.Agent) *chat.Harness {
	t.Helper()
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*adk.Adapter).Close() })
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestParallelConfirmations: two approval-gated calls of one step are
// asked for one after the other, and answered to ADK-Go together.
func TestParallelConfirmations(t *testing.T) {
	ctx := context.Background()
	h := modelHarness(t, &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: demo.Tools(), Provider: twoRefunds{}, Model: "two"})
	var err error
	out, _ := h.Send(ctx, "s", llm.UserText("refund both"))
	var signals []string
	for _, approve := range []bool{true, false} {
		s, ok := out.(*chat.Suspended)
		if !ok {
			t.Fatalf("want a suspension, got %#v", out)
		}
		signals = append(signals, s.Descriptor.SignalID)
		payload := agent.Approve("")
		if !approve {
			payload = agent.Deny("")
		}
		if out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(signals, " ") != agent.SignalPrefix+"r1 "+agent.SignalPrefix+"r2" {
		t.Errorf("signals %v", signals)
	}
	got := lastText(t, out)
	if !strings.Contains(got, "refunded $10.00 for order 1") || !strings.Contains(got, "rejected") || strings.Contains(got, "requires confirmation") {
		t.Fatalf("answer %q", got)
	}
	calls, results := map[string]int{}, map[string]int{}
	for _, m := range chat.Messages.Get(out.(*chat.Completed).FinalState) {
		for _, tc := range m.ToolCalls {
			calls[tc.ID]++
		}
		if m.Role == llm.RoleTool {
			results[m.ToolCallID]++
		}
	}
	if calls["r1"] != 1 || calls["r2"] != 1 || results["r1"] != 1 || results["r2"] != 1 {
		t.Errorf("the history's tool calls %v and results %v", calls, results)
	}
}

// talker is a model that says something with its call of lookup_order,
// then answers final once it has the result.
type talker struct{ final string }

func (talker) Ready(context.Context) error { return nil }

func (m talker) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText(m.final), FinishReason: llm.FinishStop}, nil
	}
	msg := llm.AssistantToolCalls(llm.ToolCall{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)})
	msg.Content = llm.Text("Let me check that for you.")
	return &llm.Response{Message: msg, FinishReason: llm.FinishToolCalls}, nil
}

// TestTextWithToolCalls: what the model says with its calls is kept on
// the assistant message carrying them (it was only streamed, and lost
// from the replies and the session), and is never taken for the turn's
// answer: an empty answer after the calls fails the turn, as a native
// agent's does, rather than storing the earlier text as the answer.
func TestTextWithToolCalls(t *testing.T) {
	ctx := context.Background()
	for _, streaming := range []bool{false, true} {
		for _, final := range []string{"Order 7 has shipped.", ""} {
			section := `{"streaming":false}`
			if streaming {
				section = `{"streaming":true}`
			}
			h := modelHarness(t, &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: demo.Tools(), Provider: talker{final}, Model: "talker", Config: json.RawMessage(section)})
			out, err := h.Send(ctx, "s", llm.UserText("where is order 7?"))
			if final == "" {
				e, ok := out.(*chat.Errored)
				if !ok || e.Category != errcat.ProviderInvalidResponse || !errors.Is(err, agent.ErrEmptyReply) {
					t.Fatalf("streaming %v, empty answer: %#v %v", streaming, out, err)
				}
				continue
			}
			c, ok := out.(*chat.Completed)
			if !ok || len(c.Replies) != 3 {
				t.Fatalf("streaming %v: %#v %v", streaming, out, err)
			}
			call, answer := c.Replies[0], c.Replies[2]
			if call.Text() != "Let me check that for you." || len(call.ToolCalls) != 1 || answer.Text() != final {
				t.Fatalf("streaming %v: replies %+v", streaming, c.Replies)
			}
			stored := chat.Messages.Get(c.FinalState)
			if got := stored[1]; got.Text() != "Let me check that for you." || len(got.ToolCalls) != 1 {
				t.Fatalf("streaming %v: stored %+v", streaming, stored)
			}
		}
	}
}
