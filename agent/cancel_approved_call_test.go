package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

// An approved call whose turn is cancelled while the tool runs (a
// payment call that cannot be taken back once sent, ignoring its
// context) still ran: the session keeps its result, the approval cannot
// be given again, and the model's next request reads what the tool
// answered, not that the call never ran.
func TestCancelWhileApprovedCallRunsKeepsItsResult(t *testing.T) {
	ctx := context.Background()
	var runs atomic.Int32
	started, release := make(chan struct{}, 1), make(chan struct{})
	type args struct {
		Order string `json:"order"`
	}
	refund := agent.MustTool("issue_refund", "Refund an order", func(context.Context, args) (string, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release // the call is under way: it finishes whatever the turn's state
		return "refunded order 7", nil
	}).WithApproval()
	p := llmtest.New(llmtest.CallTools(call("c1", "issue_refund", `{"order":"7"}`)), llmtest.Reply("Noted."))
	store := session.NewMemoryStore(session.MemoryConfig{})
	h := agentChat(t, agent.Config{Provider: p, Tools: []agent.Tool{refund}}, store)

	out, err := h.Send(ctx, "s1", llm.UserText("refund order 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("send: %T %v", out, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan chat.Outcome, 1)
	go func() {
		o, _ := h.Signal(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve("")})
		done <- o
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the approved call never started")
	}
	cancel()
	time.Sleep(20 * time.Millisecond) // the cancel is seen before the call returns
	close(release)
	if o := <-done; o == nil {
		t.Fatal("the resume returned no outcome")
	}

	rec, err := store.Load(ctx, session.LoadRequest{SessionID: "s1"})
	if err != nil || rec == nil || !strings.Contains(string(rec.State["messages"]), "refunded order 7") {
		t.Fatalf("the session after the cancel does not keep the call's result: %v %v", rec, err)
	}
	if o, _ := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve("")}); o != nil {
		if _, ok := o.(*chat.Errored); !ok {
			t.Fatalf("the same approval again: %T, want an errored outcome", o)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the refund ran %d times", n)
	}
	if _, err := h.Send(ctx, "s1", llm.UserText("did it go through?")); err != nil {
		t.Fatal(err)
	}
	reqs := p.Requests()
	last := reqs[len(reqs)-1].Transcript()
	var tool string
	for _, m := range last {
		if m.Role == llm.RoleTool {
			tool = m.Text()
		}
	}
	if tool != "refunded order 7" {
		t.Fatalf("the model's next request reads %q for the refund, want its result", tool)
	}
}
