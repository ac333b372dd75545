package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/sqlite"
)

// TestEmbedderInvalidCallsOnApprovalTool: model replies whose tool calls
// break the history rules (the same id twice in one reply, an empty id)
// are refused before they are stored when no approval is involved. When
// the calls need approval, the refusal must likewise come before any
// approved tool runs: a human must not be asked, the refund must not
// leave, and then the turn fail with nothing of it stored.
func TestEmbedderInvalidCallsOnApprovalTool(t *testing.T) {
	cases := map[string][]llm.ToolCall{
		"dup-id":   {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"1"}`)}, {ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"2"}`)}},
		"empty-id": {{ID: "", Name: "refund", Arguments: json.RawMessage(`{"order":"1"}`)}},
		"dup-mixed": {{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"order":"1"}`)},
			{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"2"}`)}},
	}
	for name, calls := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close(ctx)
			type args struct {
				Order string `json:"order"`
			}
			var ran []string
			refund := agent.MustTool("refund", "refund", func(ctx context.Context, a args) (string, error) {
				ran = append(ran, a.Order)
				return "refunded " + a.Order, nil
			}).WithApproval()
			lookup := agent.MustTool("lookup", "lookup", func(ctx context.Context, a args) (string, error) { return "found", nil })
			a, err := agent.New(agent.Config{Provider: &embModel{calls: calls}, Tools: []agent.Tool{refund, lookup}})
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
			var steps []string
			for range 4 {
				s, ok := out.(*chat.Suspended)
				if !ok {
					break
				}
				steps = append(steps, "suspended on "+s.Descriptor.SignalID)
				out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
			}
			desc := fmt.Sprintf("%T", out)
			if e, ok := out.(*chat.Errored); ok {
				desc = fmt.Sprintf("errored %s/%s: %v", e.Category, e.Bucket, err)
			}
			hist, _ := graphState(st, "s")
			if _, failed := out.(*chat.Errored); failed && len(ran) > 0 {
				t.Fatalf("approved refunds ran %v, then the turn ended %s (steps %v); the stored history has %d messages: %v",
					ran, desc, steps, len(hist), embRoles(hist))
			}
			t.Logf("%s: %s, refunds %v, steps %v", name, desc, ran, steps)
		})
	}
}

func embRoles(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role)
		if m.Text() != "" {
			s += ":" + m.Text()
		}
		for _, c := range m.ToolCalls {
			s += fmt.Sprintf("[call %q %s]", c.ID, c.Name)
		}
		out = append(out, s)
	}
	return out
}
