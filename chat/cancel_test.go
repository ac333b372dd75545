package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// A cancelled suspended turn resumes nothing, its signal answers
// harness_signal_correlation_failed, and the next message (after a
// restart too) closes its open tool call so that the history stays valid
// for every provider and the turn completes.
func TestCancelSuspended(t *testing.T) {
	for _, restart := range []bool{false, true} {
		e := newDemoEnv(t)
		s := want[*chat.Suspended](t, e.send("c", "please refund order 7"))
		ctx := context.Background()
		if err := e.h.CancelSuspended(ctx, "c", s.InvocationID); err != nil {
			t.Fatal(err)
		}
		if err := e.h.CancelSuspended(ctx, "c", s.InvocationID); !errors.Is(err, errcat.HarnessSignalCorrelationFailed) {
			t.Fatalf("cancelling twice: %v, want harness_signal_correlation_failed", err)
		}
		wantCategory(t, e.approve("c", s.Descriptor.SignalID, graph.Update{"approval": map[string]any{"approved": true}}), errcat.HarnessSignalCorrelationFailed)
		if restart {
			e.restart()
		}
		want[*chat.Completed](t, e.send("c", "where is order 8?"))
		hist := e.history("c")
		if !containsText(hist, chat.DefaultCancelledResult) || containsText(hist, "refunded $30.00 for order 7") {
			t.Fatalf("restart=%v: history %+v: want the refund closed as not run", restart, hist)
		}
		if err := llm.CheckHistory(nil, hist); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnansweredCallClosed: a history holding a tool call nobody gave a
// result for, and that never awaited an approval (a conversation a
// client sent whole), has it closed at the next message as unanswered:
// not as an approval that was cancelled, which it never was.
func TestUnansweredCallClosed(t *testing.T) {
	e := newDemoEnv(t)
	ctx := context.Background()
	hist, err := json.Marshal([]llm.Message{llm.UserText("where is order 3?"),
		llm.AssistantToolCalls(llm.ToolCall{ID: "call_0", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"3"}`)})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Save(ctx, session.SaveRequest{SessionID: "u", State: map[string]json.RawMessage{chat.MessagesField: hist}}); err != nil {
		t.Fatal(err)
	}
	want[*chat.Completed](t, e.send("u", "never mind: where is order 8?"))
	got := e.history("u")
	if !containsText(got, chat.UnansweredResult) || containsText(got, chat.DefaultCancelledResult) {
		t.Fatalf("history %+v: want the lookup closed as unanswered", got)
	}
	if err := llm.CheckHistory(nil, got); err != nil {
		t.Fatal(err)
	}
}
