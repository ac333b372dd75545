package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestCancelRightAfterApprovedCallReturns: the cancel lands just
// as the approved tool returns (the tool's last act starts it). The
// refund ran; its result must be kept (runtime history) every time.
func TestCancelRightAfterApprovedCallReturns(t *testing.T) {
	ctx := context.Background()
	lost := 0
	const rounds = 200 // a window of microseconds: the cancel lands at 0–59 µs after the tool returns
	for i := 0; i < rounds; i++ {
		m := &orderScript{}
		var mu sync.Mutex
		var cancelTurn context.CancelFunc
		runs := 0
		type args struct {
			Order  string  `json:"order"`
			Amount float64 `json:"amount"`
		}
		tl := agent.MustTool("issue_refund", "Refund an order (needs approval)", func(ctx context.Context, a args) (string, error) {
			mu.Lock()
			runs++
			c := cancelTurn
			mu.Unlock()
			d := time.Duration(i%60) * time.Microsecond
			go func() { // the client goes away as the refund completes
				for st := time.Now(); time.Since(st) < d; {
				}
				c()
			}()
			return "refunded order " + a.Order, nil
		}).WithApproval()
		st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
		h, closeA := approvalHarness(t, `{}`, m, tl, st)
		sid := fmt.Sprintf("acme/s%d", i)
		out, err := h.Send(ctx, sid, llm.UserText("refund one 7"))
		s, ok := out.(*chat.Suspended)
		if err != nil || !ok {
			t.Fatalf("send: %#v %v", out, err)
		}
		cctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		cancelTurn = cancel
		mu.Unlock()
		_, _ = h.Signal(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sid, Payload: agent.Approve("")})
		cancel()
		rec, _ := st.sessions.Load(ctx, session.LoadRequest{SessionID: sid})
		b, _ := json.Marshal(rec.State["messages"])
		if runs == 1 && !strings.Contains(string(b), `"content":"refunded order 7","tool_call_id":"call_0"`) {
			lost++
			if lost > 1 {
				closeA()
				continue
			}
			mu.Lock()
			cancelTurn = func() {}
			mu.Unlock()
			o2, e2 := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sid, Payload: agent.Approve("")})
			_, _ = h.Send(ctx, sid, llm.UserText("hello"))
			reqs := m.requests()
			var shape []string
			for _, msg := range reqs[len(reqs)-1] {
				shape = append(shape, string(msg.Role)+":"+msg.Text())
			}
			t.Logf("round %d (delay %v): history after the cancel: %s; approval sent again: %T %v; refund runs now %d; next request %q", i, time.Duration(i%60)*time.Microsecond, b, o2, e2, runs, shape)
		}
		closeA()
	}
	if lost > 0 {
		t.Errorf("in %d of %d rounds the approved refund ran and the session does not keep its result", lost, rounds)
	}
}
