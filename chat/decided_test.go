package chat_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// A signal id too long for a mark key (a graph's own: they are bounded
// only by the checkpoint store, which also refuses one that is not
// valid UTF-8) still resumes its turn, its decision unmarked: the
// resume's session write must not carry a mark the store refuses.
func TestResumeOfAnUnmarkableSignal(t *testing.T) {
	ctx := context.Background()
	for _, id := range []string{strings.Repeat("x", session.MaxMarkKeyLength)} {
		var acts atomic.Int64
		c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: session.NewMemoryStore(session.MemoryConfig{})}, id, &acts)})
		if out, err := c.Send(ctx, "s", llm.UserText("delete it")); err != nil {
			t.Fatal(err)
		} else if _, ok := out.(*chat.Suspended); !ok {
			t.Fatalf("send: %#v", out)
		}
		out, err := c.Signal(ctx, chat.Signal{SignalID: id, SessionID: "s", Payload: Approved.Set(true)})
		if _, ok := out.(*chat.Completed); !ok || err != nil || acts.Load() != 1 {
			t.Fatalf("signal %q: %#v, %v (acts %d)", id[:10], out, err, acts.Load())
		}
		if done, err := c.DecisionTookEffect(ctx, "s", id, "call", ""); err != nil || done {
			t.Errorf("DecisionTookEffect of an unmarkable signal: %v, %v", done, err)
		}
	}
}
