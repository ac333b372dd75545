package adk

import (
	"context"
	"testing"

	"google.golang.org/adk/v2/session"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	armsession "github.com/armature-go/armature/session"
)

// TestOwnTurnsAreNotForeign: a session only this agent serves — plain
// turns, an approval, two confirmations of one step superseded half
// decided, a cancelled approval, messages holding U+0000 and invalid
// UTF-8 — is never given the runtime's history again: ADK-Go's session
// keeps its own events (none is a seeded one), on each session service.
// A user message the session would not recognize as its own would be
// taken for another agent's turn, and seeding again drops ADK-Go's
// session state.
func TestOwnTurnsAreNotForeign(t *testing.T) {
	for name, cfg := range sessionConfigs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			m := &twoRefunds{}
			e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m), Session: cfg(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			h := adaptertest.Harness(t, &Adapter{Engine: e}, &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}, armsession.NewMemoryStore(armsession.MemoryConfig{}))
			const sid = "acme/s"
			send := func(text string) chat.Outcome {
				t.Helper()
				out, err := h.Send(ctx, sid, llm.UserText(text))
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			signal := func(out chat.Outcome, approve bool) chat.Outcome {
				t.Helper()
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("want a suspension, got %T", out)
				}
				p := agent.Approve("")
				if !approve {
					p = agent.Deny("no")
				}
				out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sid, Payload: p})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			send("hello")
			signal(signal(send("two refunds"), true), false)
			signal(send("two refunds again"), true)           // half decided
			if out := send("never mind, hello"); out != nil { // supersedes it
				if _, ok := out.(*chat.Suspended); ok {
					signal(signal(out, false), false)
				}
			}
			if s, ok := send("two refunds once more").(*chat.Suspended); ok {
				if err := h.CancelSuspended(ctx, sid, s.InvocationID); err != nil {
					t.Fatal(err)
				}
			}
			for _, text := range []string{"nul \x00 here", "bad \xff utf-8", "hello again"} {
				if out := send(text); out != nil {
					if _, ok := out.(*chat.Suspended); ok {
						signal(signal(out, true), true)
					}
				}
			}
			resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: "acme", SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ev := range resp.Session.Events().All() {
				n++
				if ev.InvocationID == seedInvocation {
					t.Fatalf("ADK-Go's session was given the runtime's history again (event %d is a seeded one)", n)
				}
			}
			if n == 0 {
				t.Fatal("ADK-Go's session holds no event")
			}
		})
	}
}
