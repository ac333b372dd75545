package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// embModel answers the first call of each turn with calls, then text.
type embModel struct {
	mu    sync.Mutex
	calls []llm.ToolCall
}

func (m *embModel) Ready(context.Context) error { return nil }

func (m *embModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleUser {
		m.mu.Lock()
		defer m.mu.Unlock()
		return &llm.Response{Message: llm.AssistantToolCalls(m.calls...), FinishReason: llm.FinishToolCalls, Raw: json.RawMessage(`{}`)}, nil
	}
	return &llm.Response{Message: llm.AssistantText("ok: " + last.Text()), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// TestEmbedderModelToolArguments: whatever arguments or names a model
// gives its tool calls, the turn ends Completed, Suspended or Errored
// cleanly; a Completed or Suspended turn's history is stored, valid,
// and reloads equal from a fresh store; and an approval resumes it.
func TestEmbedderModelToolArguments(t *testing.T) {
	big := `{"order":"` + strings.Repeat("9", 1<<20) + `"}`
	cases := map[string][]llm.ToolCall{
		"invalid-json":    {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{bad`)}},
		"null":            {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`null`)}},
		"string-encoded":  {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`"{\"order\":\"7\"}"`)}},
		"array":           {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`[]`)}},
		"empty":           {{ID: "c1", Name: "refund", Arguments: nil}},
		"huge":            {{ID: "c1", Name: "refund", Arguments: json.RawMessage(big)}},
		"unicode-id":      {{ID: "c\u00e9\u4e2d\U0001F600", Name: "refund", Arguments: json.RawMessage(`{"order":"7"}`)}},
		"unknown-tool":    {{ID: "c1", Name: "nope", Arguments: json.RawMessage(`{}`)}},
		"two-refunds":     {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"1"}`)}, {ID: "c2", Name: "refund", Arguments: json.RawMessage(`{"order":"2"}`)}},
		"mixed":           {{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"order":"1"}`)}, {ID: "c2", Name: "refund", Arguments: json.RawMessage(`{"order":"2"}`)}},
		"nul-in-args":     {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"7\u0000"}`)}},
		"lone-surrogate":  {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"\ud800"}`)}},
		"dup-keys":        {{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"1","order":"2"}`)}},
		"whitespace-args": {{ID: "c1", Name: "refund", Arguments: json.RawMessage(" \n{\"order\" : \"7\"} \n")}},
	}
	for name, calls := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "a.db")
			st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close(ctx)
			var ran []string
			type args struct {
				Order string `json:"order"`
			}
			refund := agent.MustTool("refund", "refund", func(ctx context.Context, a args) (string, error) {
				ran = append(ran, a.Order)
				return "refunded " + fmt.Sprint(len(a.Order)), nil
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
			for i := 0; i < 4; i++ {
				s, ok := out.(*chat.Suspended)
				if !ok {
					break
				}
				out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
			}
			if e, ok := out.(*chat.Errored); ok {
				t.Logf("errored: %s %v: %v", e.Category, e.Bucket, err)
				if e.Category == "session_save_failed" || e.Category == "session_load_failed" {
					t.Errorf("store failure for model output: %v", err)
				}
			}
			// Reload from a fresh store.
			fresh, err := sqlite.Open(ctx, sqlite.Config{Path: path + "", Shared: false})
			if err == nil {
				defer fresh.Close(ctx)
			}
			rec, lerr := st.Load(ctx, session.LoadRequest{SessionID: "s"})
			if errors.Is(lerr, session.ErrNotFound) {
				return
			}
			if lerr != nil {
				t.Fatalf("load: %v", lerr)
			}
			var msgs []llm.Message
			if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
				t.Fatalf("stored history does not decode: %v", err)
			}
			if err := llm.CheckHistory(nil, msgs); err != nil {
				t.Errorf("stored history invalid: %v", err)
			}
			last := msgs[len(msgs)-1]
			t.Logf("outcome %T, ran %d refunds, %d messages, last %s %.80q", out, len(ran), len(msgs), last.Role, last.Text())
			if _, ok := out.(*chat.Completed); ok && last.Role != llm.RoleAssistant {
				t.Errorf("completed, but history ends with %s", last.Role)
			}
		})
	}
}
