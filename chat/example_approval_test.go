package chat_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// approved is set by the approval signal's payload.
var approved = graph.NewField[bool]("approved")

// A chat graph with a tool loop and an approval step: the scripted model
// calls a lookup tool, then proposes a refund; refunds need a human's
// approval, so the turn suspends with a pending message, and the
// approval signal resumes it. The resumed turn's reply reaches the
// session's listener.
func Example_approval() {
	ctx := context.Background()
	schema, _ := chat.NewSchema(approved)
	g, err := graph.NewBuilder(schema).
		// The model: look the order up first, then propose the refund.
		AddNode("model", func(ctx context.Context, s graph.State) (graph.Update, error) {
			msgs := chat.Messages.Get(s)
			if msgs[len(msgs)-1].Role == llm.RoleTool {
				return chat.Messages.Add(llm.AssistantText("Order 42 was damaged in transit. I'd like to refund $30 — waiting for approval.")), nil
			}
			return chat.Messages.Add(llm.AssistantToolCalls(llm.ToolCall{
				ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":42}`),
			})), nil
		}).
		// The tool loop: run the requested tool, go back to the model.
		AddNode("tools", func(ctx context.Context, s graph.State) (graph.Update, error) {
			msgs := chat.Messages.Get(s)
			call := msgs[len(msgs)-1].ToolCalls[0]
			return chat.Messages.Add(llm.ToolResult(call.ID, `{"order":42,"status":"damaged","total":30}`)), nil
		}).
		AddConditionalEdge("model", func(ctx context.Context, s graph.State) (string, error) {
			msgs := chat.Messages.Get(s)
			if len(msgs[len(msgs)-1].ToolCalls) > 0 {
				return "tools", nil
			}
			return "approve", nil
		}, "tools", "approve").
		AddEdge("tools", "model").
		// The approval step: suspend until a human decides.
		AddNode("approve", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{
					SignalID: "refund-42", Metadata: map[string]any{"amount": 30},
				})
			}
			return nil, nil
		}).
		AddNode("refund", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return chat.Messages.Add(llm.AssistantText("Done: $30 refunded to your card.")), nil
		}).
		AddEdge("approve", "refund").
		AddEdge("refund", graph.End).
		SetEntry("model").
		Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The listener receives the resumed turn's outcome.
	unsubscribe := h.Subscribe("user-7", func(o chat.Outcome) {
		if c, ok := o.(*chat.Completed); ok {
			for _, m := range c.Replies {
				fmt.Printf("listener: %s: %s\n", m.Role, m.Text())
			}
		}
	})
	defer unsubscribe()

	out, err := h.Send(ctx, "user-7", llm.UserText("My order 42 arrived broken."))
	if err != nil {
		fmt.Println(err)
		return
	}
	s := out.(*chat.Suspended)
	fmt.Println("suspended on", s.Descriptor.SignalID, s.Descriptor.Metadata)
	for _, m := range s.PendingMessages {
		fmt.Printf("pending: %s: %s\n", m.Role, describe(m))
	}

	// Later, possibly on another worker: the approval arrives.
	if _, err := h.Signal(ctx, chat.Signal{SignalID: "refund-42", SessionID: "user-7", Payload: approved.Set(true)}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// suspended on refund-42 map[amount:30]
	// pending: assistant: tool call lookup_order
	// pending: tool: {"order":42,"status":"damaged","total":30}
	// pending: assistant: Order 42 was damaged in transit. I'd like to refund $30 — waiting for approval.
	// listener: assistant: Done: $30 refunded to your card.
}

func describe(m llm.Message) string {
	if len(m.ToolCalls) > 0 {
		return "tool call " + m.ToolCalls[0].Name
	}
	return m.Text()
}
