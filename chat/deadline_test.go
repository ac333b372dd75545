package chat_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// slowStore is a session store whose reads wait until their context
// ends (a slow database honouring the caller's deadline).
type slowStore struct {
	*session.MemoryStore
	slow bool
}

func (s *slowStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	if s.slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.MemoryStore.Load(ctx, req)
}

func (s *slowStore) LoadMark(ctx context.Context, id, key string) (json.RawMessage, error) {
	if s.slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.MemoryStore.LoadMark(ctx, id, key)
}

// TestDeadlineDuringLoad: a caller's deadline that ends a turn while the
// session (or its recorded outcome) is read is invocation_cancelled,
// retryable: not session_load_failed, whose bucket tells the user the
// conversation cannot go on and to start a new one. The session is fine
// and the next turn completes.
func TestDeadlineDuringLoad(t *testing.T) {
	for _, withID := range []bool{false, true} {
		st := &slowStore{MemoryStore: session.NewMemoryStore(session.MemoryConfig{})}
		h := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st}, echo)})
		want[*chat.Completed](t, mustSend(t, h, "s", "hello"))
		st.slow = true
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		var opts []chat.SendOption
		if withID {
			opts = append(opts, chat.WithMessageID("m1"))
		}
		out, _ := h.Send(ctx, "s", llm.UserText("again"), opts...)
		cancel()
		wantCategory(t, out, errcat.InvocationCancelled)
		if e := out.(*chat.Errored); e.Bucket != harness.RetryableTransient {
			t.Fatalf("message id %v: bucket %s, want retryable_transient", withID, e.Bucket)
		}
		st.slow = false
		want[*chat.Completed](t, mustSend(t, h, "s", "and again"))
	}
}
