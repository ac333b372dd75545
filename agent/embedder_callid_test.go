package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// TestEmbedderModelCallIDs: tool call ids are the model's: whatever
// they hold (a NUL byte, invalid UTF-8, 600 bytes), an approval-gated
// call either is refused as a bad provider response before anything
// runs, or suspends, and its approval runs the tool once and completes
// — never runs the tool and then fails to store the turn.
func TestEmbedderModelCallIDs(t *testing.T) {
	ids := map[string]string{
		"nul":     "call\x00_1",
		"invalid": "call\xff_1",
		"long":    "call_" + strings.Repeat("x", 600),
		"ctrl":    "call\n\t_1",
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		for name, id := range ids {
			t.Run(backend+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				var (
					st session.Store
					cp checkpoint.Store
				)
				if backend == "sqlite" {
					s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close(ctx)
					st, cp = s, s.Checkpoints()
				} else {
					_, url := pgtest.Schema(t)
					p, err := postgres.Open(ctx, postgres.Config{URL: url})
					if err != nil {
						t.Fatal(err)
					}
					defer p.Close()
					st, cp = p, p.Checkpoints()
				}
				type args struct {
					Order string `json:"order"`
				}
				ran := 0
				refund := agent.MustTool("refund", "refund", func(ctx context.Context, a args) (string, error) { ran++; return "refunded", nil }).WithApproval()
				model := &embModel{calls: []llm.ToolCall{{ID: id, Name: "refund", Arguments: json.RawMessage(`{"order":"7"}`)}}}
				a, err := agent.New(agent.Config{Provider: model, Tools: []agent.Tool{refund}})
				if err != nil {
					t.Fatal(err)
				}
				g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(cp))
				if err != nil {
					t.Fatal(err)
				}
				h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cp)})
				if err != nil {
					t.Fatal(err)
				}
				out, err := h.Send(ctx, "s", llm.UserText("go"))
				s, ok := out.(*chat.Suspended)
				if !ok {
					e, _ := out.(*chat.Errored)
					if e != nil && e.Bucket == harness.SessionTerminating {
						t.Fatalf("send: %s/%s: %v", e.Category, e.Bucket, err)
					}
					t.Logf("send refused: %T %v", out, err)
					return
				}
				res, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
				if _, ok := res.(*chat.Completed); !ok || ran != 1 {
					e, _ := res.(*chat.Errored)
					cat := ""
					if e != nil {
						cat = string(e.Category) + "/" + string(e.Bucket)
					}
					t.Fatalf("approval: %T %s %v; the tool ran %d times", res, cat, err, ran)
				}
			})
		}
	}
}
