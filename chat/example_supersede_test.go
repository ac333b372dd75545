package chat_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// A message sent while a turn waits for approval supersedes it: the
// pending tool call is closed as not run, the new message gets its
// answer, and the old approval can no longer be given.
func Example_supersede() {
	ctx := context.Background()
	a, _ := demo.New()
	g, _ := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	h, _ := chat.New(chat.Config{Graph: g})

	out, _ := h.Send(ctx, "s1", llm.UserText("please refund order 91"))
	pending := out.(*chat.Suspended)
	fmt.Println("suspended for", pending.Descriptor.SignalID)

	out, _ = h.Send(ctx, "s1", llm.UserText("where is order 92?"))
	done := out.(*chat.Completed)
	fmt.Println("superseded:", done.Superseded)
	fmt.Println(done.Replies[len(done.Replies)-1].Text())

	out, _ = h.Signal(ctx, chat.Signal{SignalID: pending.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve("")})
	fmt.Println(out.(*chat.Errored).Category)

	st, _ := g.SessionState(ctx, "s1")
	for _, m := range chat.Messages.Get(st) {
		text := m.Text()
		if len(m.ToolCalls) > 0 {
			text = "calls " + m.ToolCalls[0].Name
		}
		fmt.Printf("%s: %s\n", m.Role, text)
	}
	// Output:
	// suspended for approval:call_2
	// superseded: [approval:call_2]
	// Here is what I found: order 92: shipped, arriving Thursday
	// harness_signal_correlation_failed
	// user: please refund order 91
	// assistant: calls issue_refund
	// assistant: I need your approval to call issue_refund with {"order":"91","amount":30}.
	// tool: Not run: the user sent a new message instead of answering this approval request.
	// user: where is order 92?
	// assistant: calls lookup_order
	// tool: order 92: shipped, arriving Thursday
	// assistant: Here is what I found: order 92: shipped, arriving Thursday
}
