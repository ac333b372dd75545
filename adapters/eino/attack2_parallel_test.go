package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// nRefunds is a model that calls issue_refund n times in one step, then
// answers with the results it got.
type nRefunds int

func (nRefunds) Ready(context.Context) error { return nil }

func (n nRefunds) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		var results []string
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				results = append(results, m.Text())
			}
		}
		return &llm.Response{Message: llm.AssistantText(strings.Join(results, " | ")), FinishReason: llm.FinishStop}, nil
	}
	var calls []llm.ToolCall
	for i := range int(n) {
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("r%d", i+1), Name: "issue_refund",
			Arguments: json.RawMessage(fmt.Sprintf(`{"order":"%d","amount":%d}`, i+1, 10*(i+1)))})
	}
	return &llm.Response{Message: llm.AssistantToolCalls(calls...), FinishReason: llm.FinishToolCalls}, nil
}

// TestAttackThreeParallelApprovals: three approval-gated calls of one
// step are asked for one after the other; each approval resumes the one
// interrupted run (one checkpoint id). Every approval must find its
// checkpoint.
func TestAttackThreeParallelApprovals(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ms := eino.NewMemoryStore()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms, Model: eino.NewProviderModel(nRefunds(n))})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, _ := h.Send(ctx, "acme/s", llm.UserText("refund them all"))
			for i := range n {
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("approval %d: want a suspension, got %#v", i+1, out)
				}
				if out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); err != nil {
					t.Fatal(err)
				}
			}
			got := lastText(t, out)
			for i := range n {
				if want := fmt.Sprintf("for order %d", i+1); !strings.Contains(got, want) {
					t.Errorf("answer %q lacks %q", got, want)
				}
			}
			if n := ms.Len(); n != 0 {
				t.Errorf("%d checkpoints left", n)
			}
		})
	}
}
