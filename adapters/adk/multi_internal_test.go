package adk

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// twoRefunds is a model that answers "two refunds" with two issue_refund
// calls in one step, tool results with their texts, and anything else
// with "ok"; it keeps the transcript of its last call.
type twoRefunds struct {
	mu   sync.Mutex
	last []llm.Message
}

func (m *twoRefunds) Ready(context.Context) error { return nil }

// record keeps the transcript of a call and returns it.
func (m *twoRefunds) record(req *llm.Request) []llm.Message {
	msgs := req.Transcript()
	m.mu.Lock()
	m.last = slices.Clone(msgs)
	m.mu.Unlock()
	return msgs
}

// lastShape returns the shape of the last call's transcript: each
// message's role, an assistant's tool call count, a result's call id;
// the system prompt left out.
func (m *twoRefunds) lastShape() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var got []string
	for _, msg := range m.last {
		switch {
		case msg.Role == llm.RoleSystem:
		case len(msg.ToolCalls) > 0:
			got = append(got, fmt.Sprintf("calls %d", len(msg.ToolCalls)))
		case msg.Role == llm.RoleTool:
			got = append(got, "result "+msg.ToolCallID)
		default:
			got = append(got, string(msg.Role))
		}
	}
	return got
}

func (m *twoRefunds) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	msgs := m.record(req)
	answer := llm.AssistantText("ok")
	switch last := msgs[len(msgs)-1]; {
	case last.Role == llm.RoleTool:
		var results []string
		for _, msg := range msgs {
			if msg.Role == llm.RoleTool {
				results = append(results, msg.Text())
			}
		}
		answer = llm.AssistantText("done: " + strings.Join(results, "; "))
	case last.Role == llm.RoleUser && strings.Contains(last.Text(), "look up and refund"):
		answer = llm.AssistantToolCalls(
			llm.ToolCall{ID: "l7", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)},
			llm.ToolCall{ID: "r7", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":10}`)})
	case last.Role == llm.RoleUser && strings.Contains(last.Text(), "two refunds"):
		answer = llm.AssistantToolCalls(
			llm.ToolCall{ID: "r7", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":10}`)},
			llm.ToolCall{ID: "r8", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"8","amount":20}`)})
	}
	return &llm.Response{Message: answer, FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// twoRefundsAgent is an agent on twoRefunds under the chat harness, in
// memory: the model, the adapter, the harness, and the function that
// builds a new engine (a restart: set it as the adapter's Engine).
func twoRefundsAgent(t *testing.T) (*twoRefunds, *Adapter, *chat.Harness, func() *Engine) {
	t.Helper()
	m := &twoRefunds{}
	newEngine := func() *Engine {
		e, err := NewEngine(context.Background(), Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := &Adapter{Engine: newEngine()}
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}, session.NewMemoryStore(session.MemoryConfig{}))
	return m, a, h, newEngine
}

// TestTwoConfirmationsAfterLoss: a model step asking for two
// confirmations, each approval given after a restart that lost ADK-Go's
// in-memory sessions: both tools run once, and the model is sent the
// committed conversation.
func TestTwoConfirmationsAfterLoss(t *testing.T) {
	for _, restarts := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprint(restarts), func(t *testing.T) {
			ctx := context.Background()
			m, a, h, newEngine := twoRefundsAgent(t)
			out, _ := h.Send(ctx, "acme/s", llm.UserText("two refunds please"))
			for i, restart := range restarts {
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("before approval %d: %#v", i+1, out)
				}
				if restart {
					a.Engine = newEngine()
				}
				out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			}
			c, ok := out.(*chat.Completed)
			if !ok {
				t.Fatalf("after both approvals: %#v", out)
			}
			text := c.Replies[len(c.Replies)-1].Text()
			if strings.Count(text, "refunded") != 2 || !strings.Contains(text, "order 7") || !strings.Contains(text, "order 8") {
				t.Fatalf("the answer %q, want both refunds once", text)
			}
			got := m.lastShape()
			want := []string{"user", "calls 2", "result r7", "result r8"}
			if !slices.Equal(got, want) {
				t.Fatalf("the model was sent %q, want %q", got, want)
			}
		})
	}
}

// TestConfirmationBesideAResultAfterLoss: a model step calling a tool
// that runs at once and one that needs a confirmation, approved after a
// restart that lost ADK-Go's in-memory sessions: the model is then sent
// both calls' results, as without the restart (the seeded session kept
// the result of the call that ran).
func TestConfirmationBesideAResultAfterLoss(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprint("restart=", restart), func(t *testing.T) {
			ctx := context.Background()
			m, a, h, newEngine := twoRefundsAgent(t)
			out, _ := h.Send(ctx, "acme/s", llm.UserText("look up and refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("before the approval: %#v", out)
			}
			if restart {
				a.Engine = newEngine()
			}
			out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			c, ok := out.(*chat.Completed)
			if !ok {
				t.Fatalf("after the approval: %#v", out)
			}
			if text := c.Replies[len(c.Replies)-1].Text(); !strings.Contains(text, "shipped") || strings.Count(text, "refunded $10.00") != 1 {
				t.Fatalf("the answer %q, want the lookup's result and the refund once", text)
			}
			got := m.lastShape()
			want := []string{"user", "calls 2", "result l7", "result r7"}
			if !slices.Equal(got, want) {
				t.Fatalf("the model was sent %q, want %q", got, want)
			}
		})
	}
}

// TestPendingCalls: the pending calls are found under the upstream's ids
// or the fresh ids the runtime stored a reused id under, in the last
// message holding them.
func TestPendingCalls(t *testing.T) {
	call := func(id, name string) llm.ToolCall { return llm.ToolCall{ID: id, Name: name} }
	history := []llm.Message{
		llm.UserText("a"), llm.AssistantToolCalls(call("call_0", "issue_refund")), llm.ToolResult("call_0", "ok"),
		llm.UserText("b"), llm.AssistantToolCalls(call("call_0_4", "issue_refund"), call("call_1", "issue_refund")),
		llm.AssistantText("I need your approval"),
	}
	for _, c := range []struct {
		name    string
		pending []Pending
		k       int
		ids     []string
	}{
		{"renamed", []Pending{{CallID: "call_0", Tool: "issue_refund"}}, 4, []string{"call_0_4"}},
		{"both", []Pending{{CallID: "call_0", Tool: "issue_refund"}, {CallID: "call_1", Tool: "issue_refund"}}, 4, []string{"call_0_4", "call_1"}},
		{"missing", []Pending{{CallID: "call_9", Tool: "issue_refund"}}, -1, nil},
		{"one missing", []Pending{{CallID: "call_1", Tool: "issue_refund"}, {CallID: "call_7", Tool: "issue_refund"}}, -1, nil},
	} {
		k, ids := pendingCalls(history, c.pending)
		if k != c.k || !slices.Equal(ids, c.ids) {
			t.Errorf("%s: %d %q, want %d %q", c.name, k, ids, c.k, c.ids)
		}
	}
}

// TestRepeatedCallIDs: a model repeating a tool call id across turns;
// ADK-Go, answering every call of an id with the last result, would send
// the model each earlier lookup answered with the latest one's result.
// The bridge gives a repeated id a fresh one: every call the model is
// sent is answered with its own result.
func TestRepeatedCallIDs(t *testing.T) {
	ctx := context.Background()
	m := &adaptertest.SameIDs{}
	e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m)})
	if err != nil {
		t.Fatal(err)
	}
	a := &Adapter{Engine: e}
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}, session.NewMemoryStore(session.MemoryConfig{}))
	for _, n := range []string{"1", "2", "3"} {
		if out, _ := h.Send(ctx, "acme/s", llm.UserText("where is order "+n+"?")); !isCompleted(out) {
			t.Fatalf("order %s: %#v", n, out)
		}
	}
	reqs := m.Requests()
	adaptertest.CheckCallIDs(t, reqs)
	calls := 0
	for _, msg := range reqs[len(reqs)-1] {
		calls += len(msg.ToolCalls)
	}
	if calls != 3 {
		t.Fatalf("the model was last sent %d calls, want 3: %v", calls, reqs[len(reqs)-1])
	}
}

func isCompleted(out chat.Outcome) bool {
	_, ok := out.(*chat.Completed)
	return ok
}
