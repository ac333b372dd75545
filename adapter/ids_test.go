package adapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// reuser is an upstream whose model gives every tool call the same id,
// as some OpenAI-compatible servers do ("call_0"), and, behind a window,
// as a model numbering its calls by what it sees does. "refund" asks for
// approval of a call under that id; its resume answers it under that id.
type reuser struct{}

func (reuser) Name() string { return "reuser" }

func (reuser) Run(_ context.Context, req *adapter.Request, _ adapter.Emitter) (*adapter.Result, error) {
	call := llm.ToolCall{ID: "call_0", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}
	if r := req.Resume; r != nil {
		return adapter.Completed("refunded", []llm.Message{llm.ToolResult("call_0", "refunded"), llm.AssistantText("refunded")}), nil
	}
	if strings.Contains(req.Input.Text(), "refund") {
		call.Name = "issue_refund"
		return &adapter.Result{Suspension: &adapter.Suspension{ToolCall: call, Messages: []llm.Message{llm.AssistantToolCalls(call)}}}, nil
	}
	// Two steps, each a call under the same id, then the answer.
	return adapter.Completed("shipped", []llm.Message{llm.AssistantToolCalls(call), llm.ToolResult("call_0", "first"),
		llm.AssistantToolCalls(call), llm.ToolResult("call_0", "second"), llm.AssistantText("shipped")}), nil
}

// TestReusedCallIDs: tool calls an upstream makes under an id the
// session's history already holds (or the turn made before) are stored
// under fresh ids, each result answering its own call, so every turn
// completes and the stored history stays valid; an approval asked under
// such an id is resumed, and its result answers the call it approved;
// short histories are scanned, long ones looked up in the session's
// index.
func TestReusedCallIDs(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, reuser{})
	var last chat.Outcome
	for i, text := range []string{"where is order 7?", "and again?", "please refund", "", "once more?"} {
		var out chat.Outcome
		if text == "" {
			s, ok := last.(*chat.Suspended)
			if !ok {
				t.Fatalf("step %d: %#v", i, last)
			}
			out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
		} else {
			out, _ = h.Send(ctx, "s", llm.UserText(text))
		}
		if e, ok := out.(*chat.Errored); ok {
			t.Fatalf("step %d (%q): %v", i, text, e.Err)
		}
		last = out
	}
	// Past 64 messages the ids are looked up in the session's index.
	for i := range 15 {
		out, _ := h.Send(ctx, "s", llm.UserText(fmt.Sprint("order ", i)))
		if e, ok := out.(*chat.Errored); ok {
			t.Fatalf("turn %d past the first steps: %v", i, e.Err)
		}
		last = out
	}
	if _, ok := last.(*chat.Completed); !ok {
		t.Fatalf("last turn: %#v", last)
	}
	st, err := h.Harness().Graph().SessionState(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	msgs := chat.Messages.Get(st)
	if err := llm.CheckHistory(nil, msgs); err != nil {
		t.Fatalf("stored history: %v", err)
	}
	// Each result answers the call just before it, whatever its id.
	var calls []string
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			calls = append(calls, tc.ID)
		}
		if m.Role == llm.RoleTool {
			j := i - 1
			for j >= 0 && len(msgs[j].ToolCalls) == 0 {
				j--
			}
			if j < 0 || msgs[j].ToolCalls[0].ID != m.ToolCallID {
				t.Fatalf("message %d answers %q, not the call before it: %s", i, m.ToolCallID, fmt.Sprint(msgs))
			}
		}
	}
	if len(calls) != 7+15*2 || calls[0] != "call_0" {
		t.Fatalf("calls stored as %q", calls)
	}
}
