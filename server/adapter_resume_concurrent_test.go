package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// adapter.Emitter: "Emit is safe to call from any goroutine while Run
// runs". On a resumed turn, an upstream that runs the approved call and
// the other open call of the suspended step in parallel (ADK-Go runs a
// step's function calls concurrently) reports their results from two
// goroutines, while its other tools report theirs: the runtime's
// result saver (adapter/graph.go resultSaver.result) reads and writes
// its map and slice without a lock.
func TestAdapterToolResultsReportedConcurrentlyOnResume(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		if req.Resume == nil {
			a := llm.ToolCall{ID: "a-" + req.RequestID, Name: "issue_refund", Arguments: json.RawMessage(`{}`)}
			b := llm.ToolCall{ID: "b-" + req.RequestID, Name: "lookup_order", Arguments: json.RawMessage(`{}`)}
			return &adapter.Result{Suspension: &adapter.Suspension{ToolCall: a,
				Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{a, b}}}}}, nil
		}
		a := req.Resume.ToolCall
		b := llm.ToolCall{ID: "b" + a.ID[1:], Name: "lookup_order"}
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch g {
				case 0:
					emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &a, Output: "refunded"})
				case 1:
					emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &b, Output: "shipped"})
				default:
					for i := 0; i < 200; i++ {
						other := llm.ToolCall{ID: fmt.Sprintf("x%d-%d", g, i), Name: "lookup_order"}
						emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &other, Output: "x"})
					}
				}
			}()
		}
		wg.Wait()
		return adapter.Completed("done", []llm.Message{llm.ToolResult(a.ID, "refunded"), llm.ToolResult(b.ID, "shipped"), llm.AssistantText("done")}), nil
	}))
	ctx := context.Background()
	for i := 0; i < concurrentResumeRounds; i++ {
		sid := fmt.Sprint("s", i)
		resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: sid, Message: llm.UserText("refund")})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := resp.Outcome.(*chat.Suspended)
		if !ok {
			t.Fatalf("outcome %T %+v", resp.Outcome, resp.Outcome)
		}
		resp, err = srv.Submit(ctx, adapter.SubmitRequest{SessionID: sid, Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, InvocationID: s.InvocationID,
			Payload: map[string]any{"approval": map[string]any{"approved": true}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := resp.Outcome.(*chat.Completed); !ok {
			t.Fatalf("resume outcome %T %+v", resp.Outcome, resp.Outcome)
		}
	}
}

const concurrentResumeRounds = 300
