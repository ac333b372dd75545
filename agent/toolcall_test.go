package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// A tool whose effect must not happen twice keys it with the call's
// IdempotencyKey: a resumed turn retried after a crash runs the approved
// call again, under the same key.
func ExampleToolCallInfo_IdempotencyKey() {
	refunded := map[string]bool{} // the payment system's record of keys
	refund := agent.Tool{
		Definition: llm.Tool{Name: "issue_refund", Parameters: json.RawMessage(`{"type":"object"}`)},
		Call: func(ctx context.Context, args json.RawMessage) (string, error) {
			call, _ := agent.ToolCallOf(ctx)
			if refunded[call.IdempotencyKey()] {
				return "already refunded", nil
			}
			refunded[call.IdempotencyKey()] = true
			return "refunded", nil
		},
	}
	ctx := agent.WithToolCall(context.Background(), "call_7", "issue_refund")
	for range 2 { // the call, and its retry after a crash
		out, _ := refund.Call(ctx, json.RawMessage(`{}`))
		fmt.Println(out)
	}
	// Output:
	// refunded
	// already refunded
}

// TestToolCallIdentity: the agent runs each tool with the call's id and
// name and the session's id; the key names the call in its session.
func TestToolCallIdentity(t *testing.T) {
	var got []agent.ToolCallInfo
	tools := demo.Tools()
	for i := range tools {
		call := tools[i].Call
		tools[i].Call = func(ctx context.Context, args json.RawMessage) (string, error) {
			info, _ := agent.ToolCallOf(ctx)
			got = append(got, info)
			return call(ctx, args)
		}
	}
	h := agentChat(t, agent.Config{Provider: demo.Model{}, Tools: tools}, session.NewMemoryStore(session.MemoryConfig{}))
	out, err := h.Send(context.Background(), "s1", llm.UserText("where is order 7?"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*chat.Completed)
	if !ok || len(got) != 1 {
		t.Fatalf("%#v, calls %+v", out, got)
	}
	call := c.Replies[0].ToolCalls[0]
	if got[0].ID != call.ID || got[0].Name != "lookup_order" || got[0].SessionID != "s1" || got[0].IdempotencyKey() != "s1/"+call.ID {
		t.Fatalf("the tool ran with %+v (key %q); the call was %s", got[0], got[0].IdempotencyKey(), call.ID)
	}
	if _, ok := agent.ToolCallOf(context.Background()); ok {
		t.Fatal("a context without a call has one")
	}
	if k := (agent.ToolCallInfo{ID: "c1"}).IdempotencyKey(); k != "c1" {
		t.Fatalf("outside a session the key is %q", k)
	}
}
