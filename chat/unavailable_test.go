package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// downStore is a session store whose reads fail with err while it is
// set (a database that went away, or a record the store cannot read).
type downStore struct {
	*session.MemoryStore
	err error
}

func (s *downStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.MemoryStore.Load(ctx, req)
}

func (s *downStore) LoadMark(ctx context.Context, id, key string) (json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.MemoryStore.LoadMark(ctx, id, key)
}

// A session store that cannot be reached fails the turn as
// session_store_unavailable, retryable: the session is intact, and the
// user is told to try again, not that the conversation is over
// (session_load_failed, which stays the category of a store's other
// failures). The next turn, once the store answers, goes on with the
// history.
func TestStoreUnavailableIsRetryable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name   string
		err    error
		cat    errcat.Category
		bucket harness.Bucket
		withID bool
	}{
		{"unreachable", refused, errcat.SessionStoreUnavailable, harness.RetryableTransient, false},
		{"unreachable, message id", refused, errcat.SessionStoreUnavailable, harness.RetryableTransient, true},
		{"a store's other failure", errors.New("corrupt record"), errcat.SessionLoadFailed, harness.SessionTerminating, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &downStore{MemoryStore: session.NewMemoryStore(session.MemoryConfig{})}
			h := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st}, echo)})
			want[*chat.Completed](t, mustSend(t, h, "s", "hello"))
			st.err = tc.err
			var opts []chat.SendOption
			if tc.withID {
				opts = append(opts, chat.WithMessageID("m1"))
			}
			out, _ := h.Send(context.Background(), "s", llm.UserText("again"), opts...)
			wantCategory(t, out, tc.cat)
			if e := out.(*chat.Errored); e.Bucket != tc.bucket {
				t.Fatalf("bucket %s, want %s", e.Bucket, tc.bucket)
			}
			st.err = nil
			want[*chat.Completed](t, mustSend(t, h, "s", "once more"))
		})
	}
}
