package chat_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// TestEmbedderUnscopedSignalTwoSessions: two users' sessions suspend on
// the same signal id (the demo model numbers its calls per
// conversation). A signal naming only the signal id cannot tell which
// turn it is for: it must refuse, not approve one user's refund on the
// other's say-so.
func TestEmbedderUnscopedSignalTwoSessions(t *testing.T) {
	embBackends(t, func(t *testing.T, path string) {
		refunds := &embRefunds{ran: map[string]int{}}
		w := embOpen(t, path, refunds.tools())
		ctx := context.Background()
		var sig string
		for i, sid := range []string{"alice", "bob"} {
			out, err := w.h.Send(ctx, sid, llm.UserText([]string{"please refund order 1", "please refund order 2"}[i]))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("%s: %T %v", sid, out, err)
			}
			if sig != "" && sig != s.Descriptor.SignalID {
				t.Skipf("signal ids differ: %s, %s", sig, s.Descriptor.SignalID)
			}
			sig = s.Descriptor.SignalID
		}
		out, err := w.h.Signal(ctx, chat.Signal{SignalID: sig, Payload: agent.Approve("")})
		refunds.mu.Lock()
		defer refunds.mu.Unlock()
		if len(refunds.ran) > 0 {
			t.Fatalf("an unscoped signal %q shared by two sessions resumed %s (%T %v): refunds %v", sig, out.Info().SessionID, out, err, refunds.ran)
		}
		t.Logf("refused: %v", err)
	})
}

// TestEmbedderSignalSessionMismatch: a signal naming bob's session and
// alice's suspended invocation (or alice's signal id under bob, with
// bob suspended on another) must not resume alice's turn.
func TestEmbedderSignalSessionMismatch(t *testing.T) {
	embBackends(t, func(t *testing.T, path string) {
		refunds := &embRefunds{ran: map[string]int{}}
		w := embOpen(t, path, refunds.tools())
		ctx := context.Background()
		out, err := w.h.Send(ctx, "alice", llm.UserText("please refund order 1"))
		s, ok := out.(*chat.Suspended)
		if !ok {
			t.Fatalf("alice: %T %v", out, err)
		}
		if _, err := w.h.Send(ctx, "bob", llm.UserText("hello")); err != nil {
			t.Fatal(err)
		}
		res, err := w.h.Signal(ctx, chat.Signal{SessionID: "bob", InvocationID: s.InvocationID, Payload: agent.Approve("")})
		refunds.mu.Lock()
		defer refunds.mu.Unlock()
		if len(refunds.ran) > 0 {
			t.Fatalf("a signal scoped to bob resumed alice's invocation (%T session %q, %v): refunds %v", res, res.Info().SessionID, err, refunds.ran)
		}
		t.Logf("refused: %v", err)
	})
}
