package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
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

// TestDecidedCallReplyMatchesHistory: a denied call's result as the
// resumed turn answers it (chat.Completed.Replies, the REST "replies")
// must be the result the session stores (GET /v1/sessions/{id}): the
// runtime's resultSaver saves the call's result mid-turn, and "the save
// at the turn's end overwrites it" (adapter/graph.go). On Eino the
// reply says "The user denied this call. Reason: no" while the session
// keeps "error: The user denied this call. Reason: no".
func TestDecidedCallReplyMatchesHistory(t *testing.T) {
	for _, c := range []struct {
		name    string
		payload map[string]any
	}{{"denied", agent.Deny("no")}, {"approved, the tool failed", agent.Approve("")}} {
		t.Run(c.name, func(t *testing.T) { replyMatchesHistory(t, c.payload) })
	}
}

func replyMatchesHistory(t *testing.T, payload map[string]any) {
	ctx := context.Background()
	m := &a57Model{}
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	reg := &adapter.Registry{}
	if err := eino.Register(reg); err != nil {
		t.Fatal(err)
	}
	refund := agent.MustTool("issue_refund", "Refund an order", func(ctx context.Context, a struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}) (string, error) {
		return "", errors.New("the payment service refused")
	}).WithApproval()
	section := `{"checkpoint":{"driver":"file","dir":` + strconvQuote(filepath.Join(t.TempDir(), "ckpt")) + `}}`
	ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: []agent.Tool{refund}, Provider: m, Model: "m", Config: json.RawMessage(section)}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	defer a.(*eino.Adapter).Close()
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Send(ctx, "acme/s", llm.UserText("refund 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("send: %#v %v", out, err)
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: payload})
	c, ok := out.(*chat.Completed)
	if err != nil || !ok {
		t.Fatalf("deny: %#v %v", out, err)
	}
	var replied string
	for _, r := range c.Replies {
		if r.Role == llm.RoleTool {
			replied = r.Text()
		}
	}
	rec, err := st.sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	var stored string
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			stored = m.Text()
		}
	}
	if _, err := h.Send(ctx, "acme/s", llm.UserText("hello")); err != nil {
		t.Fatal(err)
	}
	var seen string
	for _, msg := range m.reqs[len(m.reqs)-1] {
		if msg.Role == llm.RoleTool {
			seen = msg.Text()
		}
	}
	if replied != stored {
		t.Fatalf("the resumed turn's reply answers the decided call with %q, the session stores %q (the model's next request reads %q)", replied, stored, seen)
	}
}
