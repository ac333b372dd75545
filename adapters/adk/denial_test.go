package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// refundScript is a scripted model: "refund one" calls issue_refund once,
// "refund two" twice in one step; a tool result is answered "ok". It
// records every request's messages.
type refundScript struct {
	mu   sync.Mutex
	reqs [][]llm.Message
}

func (*refundScript) Ready(context.Context) error { return nil }

func (m *refundScript) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, slices.Clone(req.Messages))
	m.mu.Unlock()
	refund := func(id, order string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "issue_refund", Arguments: json.RawMessage(`{"order":"` + order + `","amount":10}`)}
	}
	answer := llm.AssistantText("ok")
	switch last := req.Messages[len(req.Messages)-1]; {
	case last.Role != llm.RoleUser:
	case strings.Contains(last.Text(), "refund one"):
		answer = llm.AssistantToolCalls(refund("r1", "1"))
	case strings.Contains(last.Text(), "refund two"):
		answer = llm.AssistantToolCalls(refund("r1", "1"), refund("r2", "2"))
	}
	return &llm.Response{Message: answer, FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// results returns the tool results of the last request, by call id.
func (m *refundScript) results() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	got := map[string]string{}
	if len(m.reqs) == 0 {
		return got
	}
	for _, msg := range m.reqs[len(m.reqs)-1] {
		if msg.Role == llm.RoleTool {
			got[msg.ToolCallID] = msg.Text()
		}
	}
	return got
}

func scriptHarness(t *testing.T, m *refundScript) *chat.Harness {
	t.Helper()
	ctx := context.Background()
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: demo.Tools(), Provider: m, Model: "script"}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*adk.Adapter).Close() })
	cps := checkpoint.NewMemoryStore(nil)
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}), graph.WithCheckpointStore(cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cps)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// decision is a human's answer to one approval.
type decision struct {
	Approved bool
	Comment  string
}

// TestDenialReason: a human's denial with a comment reaches the model as
// the denied call's result, the comment its reason (as the native and
// Eino backends give it); an approval's comment runs the call as
// without one; a denial without a comment says the user denied the
// call, as the other backends do. Before, ADK-Go answered every denied
// call with "call is rejected", whatever the decision's comment, and
// then one without a comment so (a model may read it as a failure to
// retry).
func TestDenialReason(t *testing.T) {
	// The bridge sends the model a function response as its JSON.
	rejected := func(reason string) string {
		msg := `error tool "issue_refund" call is rejected. The user denied this call.`
		if reason != "" {
			msg += " Reason: " + reason
		}
		b, _ := json.Marshal(map[string]string{"error": msg})
		return string(b)
	}
	for _, c := range []struct {
		name      string
		message   string
		decisions []decision
		want      map[string]string
	}{
		{"denied with a reason", "refund one", []decision{{Approved: false, Comment: "use the cheaper option"}},
			map[string]string{"r1": rejected("use the cheaper option")}},
		{"denied without one", "refund one", []decision{{Approved: false}},
			map[string]string{"r1": rejected("")}},
		{"approved with a comment", "refund one", []decision{{Approved: true, Comment: "fine"}},
			map[string]string{"r1": "refunded $10.00 for order 1"}},
		{"two denials of one step", "refund two", []decision{{Approved: false, Comment: "not order 1"}, {Approved: false, Comment: "nor 2"}},
			map[string]string{"r1": rejected("not order 1"), "r2": rejected("nor 2")}},
		{"approved, then denied", "refund two", []decision{{Approved: true, Comment: "ok"}, {Approved: false, Comment: "too much"}},
			map[string]string{"r1": "refunded $10.00 for order 1", "r2": rejected("too much")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := &refundScript{}
			h := scriptHarness(t, m)
			out, err := h.Send(ctx, "acme/s", llm.UserText(c.message))
			for i, d := range c.decisions {
				s, ok := out.(*chat.Suspended)
				if err != nil || !ok {
					t.Fatalf("before decision %d: %#v %v", i+1, out, err)
				}
				payload := agent.Approve(d.Comment)
				if !d.Approved {
					payload = agent.Deny(d.Comment)
				}
				out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: payload})
			}
			if _, ok := out.(*chat.Completed); err != nil || !ok {
				t.Fatalf("after the decisions: %#v %v", out, err)
			}
			if got := m.results(); !maps(got, c.want) {
				t.Fatalf("the model's last request answers the calls with\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestEngineDenialReason: Engine.Confirm sends a rejection's comment in
// the confirmation's payload, and the tool answers the call with it;
// the error the model reads begins as ADK-Go's own rejection.
func TestEngineDenialReason(t *testing.T) {
	ctx := context.Background()
	m := &refundScript{}
	e, err := adk.NewEngine(ctx, adk.Config{Tools: demo.Tools(), LLM: adk.NewProviderModel("m", m)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	res, err := e.SendMessage(ctx, "u", "s", llm.UserText("refund one"), func(adk.Event) {})
	if err != nil || len(res.Pending) != 1 {
		t.Fatalf("SendMessage: %+v %v", res, err)
	}
	var results []adk.Event
	if _, err := e.Confirm(ctx, "u", "s", func(ev adk.Event) {
		if ev.Kind == adk.EventToolResult {
			results = append(results, ev)
		}
	}, adk.Decision{ConfirmationID: res.Pending[0].ConfirmationID, Comment: "use the cheaper option"}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("error tool %q call is rejected. The user denied this call. Reason: use the cheaper option", "issue_refund")
	if len(results) != 1 || results[0].Error != want {
		t.Fatalf("the tool results %+v, want one failing with %q", results, want)
	}
	if b, _ := json.Marshal(map[string]string{"error": want}); m.results()["r1"] != string(b) {
		t.Fatalf("the model was sent %q", m.results()["r1"])
	}
}

// TestDenialReasonAfterRestart: on ADK-Go's SQLite session service, a
// denial given after a restart (a new engine on the same session file)
// still reaches the model with its reason: the confirmation's payload
// comes back from the session store.
func TestDenialReasonAfterRestart(t *testing.T) {
	ctx := context.Background()
	section := `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	out, err := newHarness(t, st, section).Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("approval turn: %#v %v", out, err)
	}
	out, err = newHarness(t, st, section).Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Deny("use the cheaper option")})
	if err != nil {
		t.Fatal(err)
	}
	if got := lastText(t, out); !strings.Contains(got, "call is rejected. The user denied this call. Reason: use the cheaper option") {
		t.Fatalf("the answer %q does not carry the denial's reason", got)
	}
}
