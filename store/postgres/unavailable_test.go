package postgres_test

import (
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// A database that cannot be reached when a turn loads its session fails
// the turn as session_store_unavailable, retryable ("try again"), not
// session_load_failed ("this conversation can't continue"): the session
// is intact, and the turn sent again once the database answers goes on
// with its history.
func TestDatabaseGoneBeforeTurnIsRetryable(t *testing.T) {
	ctx := t.Context()
	st, proxy := proxiedStore(t)
	h := echoChat(t, st, func() {})
	if _, err := h.Send(ctx, "s", llm.UserText("one")); err != nil {
		t.Fatal(err)
	}
	for _, withID := range []bool{false, true} {
		proxy.cut()
		var opts []chat.SendOption
		if withID {
			opts = append(opts, chat.WithMessageID("m1"))
		}
		out, _ := h.Send(ctx, "s", llm.UserText("two"), opts...)
		e, ok := out.(*chat.Errored)
		if !ok || e.Category != errcat.SessionStoreUnavailable || e.Bucket != harness.RetryableTransient {
			t.Fatalf("message id %v: the turn while the database is gone: %+v", withID, out)
		}
		proxy.restore()
	}
	if _, err := h.Send(ctx, "s", llm.UserText("two")); err != nil {
		t.Fatalf("the turn sent again: %v", err)
	}
}
