package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// TestEmbedderReusedCallIDOnApprovalTool: local models often number
// their tool calls per response ("call_0" every time). A reply reusing
// a call id of the session is refused before it is stored (chat
// package: provider_invalid_response). For an approval-gated tool the
// refusal must come before the human is asked and before the approved
// tool runs — not after the refund left, with the turn then failing and
// nothing of it stored.
func TestEmbedderReusedCallIDOnApprovalTool(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	type args struct {
		Order string `json:"order"`
	}
	ran := 0
	refund := agent.MustTool("refund", "refund", func(ctx context.Context, a args) (string, error) { ran++; return "refunded " + a.Order, nil }).WithApproval()
	model := &embModel{calls: []llm.ToolCall{{ID: "call_0", Name: "refund", Arguments: json.RawMessage(`{"order":"7"}`)}}}
	a, err := agent.New(agent.Config{Provider: model, Tools: []agent.Tool{refund}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints())})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(text string) (chat.Outcome, error) {
		out, err := h.Send(ctx, "s", llm.UserText(text))
		if s, ok := out.(*chat.Suspended); ok {
			return h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
		}
		return out, err
	}
	if out, err := turn("refund order 7"); err != nil {
		t.Fatalf("first turn: %T %v", out, err)
	}
	if ran != 1 {
		t.Fatalf("first refund ran %d times", ran)
	}
	model.mu.Lock()
	model.calls = []llm.ToolCall{{ID: "call_0", Name: "refund", Arguments: json.RawMessage(`{"order":"8"}`)}}
	model.mu.Unlock()
	out, err := turn("refund order 8 too")
	hist := embHistory(t, st, "s")
	if e, ok := out.(*chat.Errored); ok && ran == 2 {
		t.Fatalf("the second refund ran (ran=%d) but the turn failed %s/%s: %v\nhistory after: %d messages, last %s %q",
			ran, e.Category, e.Bucket, err, len(hist), hist[len(hist)-1].Role, hist[len(hist)-1].Text())
	}
	t.Logf("second turn: %T %v, ran %d", out, err, ran)
}

func embHistory(t *testing.T, st *sqlite.Store, id string) []llm.Message {
	t.Helper()
	s, err := graphState(st, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func graphState(st *sqlite.Store, id string) ([]llm.Message, error) {
	rec, err := st.Load(context.Background(), session.LoadRequest{SessionID: id})
	if err != nil {
		return nil, err
	}
	var msgs []llm.Message
	err = json.Unmarshal(rec.State[chat.MessagesField], &msgs)
	return msgs, err
}
