package adk

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/adk/v2/session"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	armsession "github.com/armature-go/armature/session"
)

// TestWindow: the workspace agent's window bounds what each model call
// sends of ADK-Go's session: whole turns, from a user message, the turn
// in progress always, within the bounds; tool turns are groups it never
// splits; ADK-Go's session keeps every event.
func TestWindow(t *testing.T) {
	for _, w := range []agent.Window{{MaxMessages: 5}, {MaxTokens: 120}, {MaxMessages: 1}} {
		t.Run(fmt.Sprintf("%+v", w), func(t *testing.T) {
			ctx := context.Background()
			m := adaptertest.NewModel()
			ag := &adapter.Agent{ID: "x", Backend: Name, Provider: m, Tools: adaptertest.Tools(), Window: w}
			a, err := Factory(ctx, adapter.FactoryRequest{Agent: ag})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, a, ag, armsession.NewMemoryStore(armsession.MemoryConfig{}))
			cut := false
			for i := range 12 {
				text := fmt.Sprintf("message %d", i)
				if i%3 == 1 {
					text = fmt.Sprintf("where is order %d?", i) // a tool turn
				}
				out, _ := h.Send(ctx, "acme/s", llm.UserText(text))
				if _, ok := out.(*chat.Completed); !ok {
					if e, ok := out.(*chat.Errored); ok {
						t.Fatalf("turn %d: %v", i, e.Err)
					}
					t.Fatalf("turn %d: %#v", i, out)
				}
				var msgs []llm.Message
				for _, msg := range m.LastTranscript() {
					if msg.Role != llm.RoleSystem {
						msgs = append(msgs, msg)
					}
				}
				if len(msgs) == 0 || msgs[0].Role != llm.RoleUser {
					t.Fatalf("turn %d: the window does not start with a user message: %v", i, msgs)
				}
				if err := llm.CheckHistory(nil, msgs); err != nil {
					t.Fatalf("turn %d: the window splits a tool-call group: %v", i, err)
				}
				users := 0
				for _, msg := range msgs {
					if msg.Role == llm.RoleUser {
						users++
					}
				}
				if users == 1 && !strings.Contains(msgs[0].Text(), text) || !strings.Contains(lastUser(msgs).Text(), text) {
					t.Fatalf("turn %d: the window lacks the turn in progress: %v", i, msgs)
				}
				if w.MaxMessages > 0 && users > 1 && len(msgs) > w.MaxMessages {
					t.Fatalf("turn %d: %d messages sent, over the bound %d", i, len(msgs), w.MaxMessages)
				}
				cut = cut || users < i+1
			}
			if !cut {
				t.Fatal("the window never cut the session")
			}
			e := a.(*Adapter).Engine
			l, err := e.sessions.List(ctx, &session.ListRequest{AppName: e.app})
			if err != nil || len(l.Sessions) != 1 {
				t.Fatalf("ADK-Go's sessions: %v, %v", l, err)
			}
			resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: l.Sessions[0].UserID(), SessionID: l.Sessions[0].ID()})
			if err != nil {
				t.Fatal(err)
			}
			if n := resp.Session.Events().Len(); n < 12*2 {
				t.Fatalf("ADK-Go's session holds %d events, want the whole conversation", n)
			}
		})
	}
}

func lastUser(msgs []llm.Message) llm.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i]
		}
	}
	return llm.Message{}
}
