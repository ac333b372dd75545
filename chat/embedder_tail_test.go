package chat_test

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
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// TestEmbedderTailSupersedeCancel: the demo agent over a session loaded
// by a short tail (SessionConfig.Tail, cache off). A suspended refund
// is superseded by a new message, or cancelled and followed by one, or
// approved after a restart. The stored history must stay valid for
// every provider (every call answered once, before the next user
// message), whatever the tail.
func TestEmbedderTailSupersedeCancel(t *testing.T) {
	for _, tail := range []int{1, 2, 3, 5} {
		for _, mode := range []string{"supersede", "cancel", "approve", "deny", "supersede-twice"} {
			t.Run(fmt.Sprintf("tail%d/%s", tail, mode), func(t *testing.T) {
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "t.db")
				st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close(ctx)
				newH := func() *chat.Harness {
					a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
					if err != nil {
						t.Fatal(err)
					}
					g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st, CacheSize: -1,
						Tail: []session.ListTail{{Field: chat.MessagesField, Max: tail}}}), graph.WithCheckpointStore(st.Checkpoints()))
					if err != nil {
						t.Fatal(err)
					}
					h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints())})
					if err != nil {
						t.Fatal(err)
					}
					return h
				}
				h := newH()
				var log []string
				do := func(what string) func(chat.Outcome, error) chat.Outcome {
					return func(out chat.Outcome, err error) chat.Outcome {
						log = append(log, fmt.Sprintf("%s -> %T %v", what, out, err))
						return out
					}
				}
				for i := range 3 {
					do("lookup")(h.Send(ctx, "s", llm.UserText(fmt.Sprintf("where is order %d?", i))))
				}
				s, ok := do("refund")(h.Send(ctx, "s", llm.UserText("please refund order 9"))).(*chat.Suspended)
				if !ok {
					t.Fatalf("no suspension: %v", log)
				}
				switch mode {
				case "supersede":
					do("new")(h.Send(ctx, "s", llm.UserText("never mind, where is order 5?")))
				case "supersede-twice":
					s2, _ := do("refund2")(h.Send(ctx, "s", llm.UserText("please refund order 8"))).(*chat.Suspended)
					do("new")(h.Send(ctx, "s", llm.UserText("hello")))
					if s2 != nil {
						do("old2")(h.Signal(ctx, chat.Signal{SignalID: s2.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")}))
					}
				case "cancel":
					log = append(log, fmt.Sprint("cancel -> ", h.CancelSuspended(ctx, "s", s.InvocationID)))
					do("new")(h.Send(ctx, "s", llm.UserText("hello")))
				case "approve", "deny":
					h = newH() // a restart
					p := agent.Approve("")
					if mode == "deny" {
						p = agent.Deny("no")
					}
					do(mode)(h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: p}))
					do("new")(h.Send(ctx, "s", llm.UserText("thanks")))
				}
				do("old")(h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")}))
				rec, err := st.Load(ctx, session.LoadRequest{SessionID: "s"})
				if err != nil {
					t.Fatal(err)
				}
				var msgs []llm.Message
				if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
					t.Fatal(err)
				}
				if err := llm.CheckHistory(nil, msgs); err != nil {
					t.Fatalf("stored history invalid: %v\n%v\n%v", err, log, texts(msgs))
				}
				// Every call answered before the next user message.
				open := map[string]bool{}
				for i, m := range msgs {
					for _, c := range m.ToolCalls {
						open[c.ID] = true
					}
					if m.Role == llm.RoleTool {
						delete(open, m.ToolCallID)
					}
					if m.Role == llm.RoleUser && len(open) > 0 {
						t.Fatalf("message %d (user) follows unanswered calls %v\n%v\n%v", i, open, log, texts(msgs))
					}
				}
			})
		}
	}
}
