package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// TestLostConfirmationStartsNoTool: an approval whose ADK-Go
// confirmation request cannot be found (the session holds no such
// request, or lost it with a history that does not hold the call) fails
// with adk.ErrNoPending and emits no agent.tool.start: the call never
// ran. Before, the approved call's start was emitted before the
// confirmation was looked up, so the run record showed a tool starting
// that never ran, with no result.
func TestLostConfirmationStartsNoTool(t *testing.T) {
	state := json.RawMessage(`{"pending":[{"confirmation_id":"adk-gone","call_id":"call-gone","tool":"issue_refund","args":{"order":"7"}}]}`)
	for _, c := range []struct {
		name string
		// first runs a turn before the resume (the session then holds
		// events, and its cursor is the resume's).
		first bool
	}{
		{"session holds no such request", true},
		{"session lost, history without the call", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e, err := adk.NewEngine(ctx, adk.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			a := &adk.Adapter{Engine: e}
			history := []llm.Message{llm.UserText("hello"), llm.AssistantText("hi")}
			var cur json.RawMessage
			if c.first {
				res, err := a.Run(ctx, &adapter.Request{SessionID: "s", Input: llm.UserText("hello")}, adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return true }))
				if err != nil {
					t.Fatal(err)
				}
				cur = res.Cursor
			}
			var starts []string
			emit := adapter.EmitterFunc(func(_ context.Context, ev adapter.Event) bool {
				if ev.Phase == runtime.PhaseToolStart {
					starts = append(starts, ev.ToolCall.ID)
				}
				return true
			})
			_, err = a.Run(ctx, &adapter.Request{SessionID: "s", History: history, Cursor: cur,
				Resume: &adapter.Resume{SignalID: "approval:call-gone", Approved: true, State: state}}, emit)
			if !errors.Is(err, adk.ErrNoPending) {
				t.Fatalf("err = %v, want ErrNoPending", err)
			}
			if len(starts) > 0 {
				t.Fatalf("tool starts %v for a call that never ran", starts)
			}
		})
	}
}
