package eino_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestAttackCancelRacesApproval: a suspension cancelled while its
// approval is given: the refund runs exactly when the approval
// completes, and no checkpoint is left once the session goes on.
func TestAttackCancelRacesApproval(t *testing.T) {
	ctx := context.Background()
	var refunds atomic.Int32
	tools := []agent.Tool{agent.MustTool("issue_refund", "Refund an order", func(context.Context, struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}) (string, error) {
		refunds.Add(1)
		return "refunded", nil
	}).WithApproval()}
	ms := eino.NewMemoryStore()
	e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: ms, Model: eino.NewProviderModel(refundsModel{})})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
		session.NewMemoryStore(session.MemoryConfig{}))
	approvedWins := 0
	for i := range 20 {
		before := refunds.Load()
		out, _ := h.Send(ctx, "acme/s", llm.UserText(fmt.Sprintf("refund %d", i)))
		s, ok := out.(*chat.Suspended)
		if !ok {
			t.Fatalf("refund %d: %#v", i, out)
		}
		var (
			wg        sync.WaitGroup
			approval  chat.Outcome
			cancelErr error
		)
		wg.Go(func() {
			approval, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
		})
		wg.Go(func() { cancelErr = h.CancelSuspended(ctx, "acme/s", s.InvocationID) })
		wg.Wait()
		ran := refunds.Load() - before
		if isCompleted(approval) {
			approvedWins++
		}
		if ran > 1 || (ran == 1) != isCompleted(approval) {
			t.Fatalf("round %d: refund ran %d times, the approval %#v, the cancel %v", i, ran, approval, cancelErr)
		}
		for _, text := range []string{"hello", "hello again"} {
			if out, err := h.Send(ctx, "acme/s", llm.UserText(text)); !isCompleted(out) {
				t.Fatalf("round %d: %s: %#v %v", i, text, out, err)
			}
		}
		if n := ms.Len(); n != 0 {
			t.Fatalf("round %d: %d checkpoints left (approval %T, cancel %v)", i, n, approval, cancelErr)
		}
	}
	t.Logf("the approval won %d of 20 races", approvedWins)
}
