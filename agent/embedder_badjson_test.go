package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/sqlite"
)

// TestEmbedderInvalidJSONArgsOnApprovalTool: a model that answers with
// a tool call whose arguments are not JSON ({bad) is a bad provider
// response. For a tool without approval the turn fails as such
// (provider_invalid_response, user-correctable, or the call answered
// with an error the model reads); it must be the same for an
// approval-gated tool (agent.ErrInvalidToolCall) — not
// suspension_persistence_failed, bucket session_terminating, which
// tells the user the session is over.
func TestEmbedderInvalidJSONArgsOnApprovalTool(t *testing.T) {
	got := map[string]string{}
	for _, tool := range []string{"lookup", "refund"} {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close(ctx)
		type args struct {
			Order string `json:"order"`
		}
		refund := agent.MustTool("refund", "refund", func(ctx context.Context, a args) (string, error) { return "refunded", nil }).WithApproval()
		lookup := agent.MustTool("lookup", "lookup", func(ctx context.Context, a args) (string, error) { return "found", nil })
		model := &embModel{calls: []llm.ToolCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(`{"order": 7`)}}}
		a, err := agent.New(agent.Config{Provider: model, Tools: []agent.Tool{refund, lookup}})
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
		out, err := h.Send(ctx, "s", llm.UserText("go"))
		desc := "completed"
		if e, ok := out.(*chat.Errored); ok {
			desc = string(e.Category) + "/" + string(e.Bucket)
			if e.Bucket == harness.SessionTerminating {
				t.Errorf("%s: the turn failed %s (%v): reply %q", tool, desc, err, e.Reply.Text())
			}
		}
		got[tool] = desc
		model.mu.Lock()
		model.calls = []llm.ToolCall{{ID: "c2", Name: "lookup", Arguments: json.RawMessage(`{"order":"8"}`)}}
		model.mu.Unlock()
		next, err := h.Send(ctx, "s", llm.UserText("and order 8?"))
		t.Logf("%s: first turn %s; the next message: %T %v", tool, desc, next, err)
	}
	if got["lookup"] != got["refund"] {
		t.Errorf("the same malformed model output ends the turn %s for a tool without approval, %s for one with", got["lookup"], got["refund"])
	}
	_ = errcat.ProviderInvalidResponse
}
