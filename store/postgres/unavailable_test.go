package postgres_test

import (
	"errors"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
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

// The same when the session's lock cannot be taken (the replicas'
// Locker, on connections of its own): the lock's failure keeps, past the
// redaction of the driver's text, that the database could not be
// reached (it was session_load_failed, "this conversation can't
// continue", for every turn of a database failover).
func TestDatabaseGoneAtLockIsRetryable(t *testing.T) {
	ctx := t.Context()
	st, proxy := proxiedStore(t)
	locker := st.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(locker.Close)
	h := echoChat(t, st, func() {}, func(c *chat.Config) { c.Locker = locker })
	if _, err := h.Send(ctx, "s", llm.UserText("one")); err != nil {
		t.Fatal(err)
	}
	proxy.cut()
	_, err := locker.Lock(ctx, "s")
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("the lock while the database is gone: %v, want one wrapping session.ErrUnavailable", err)
	}
	for _, sid := range []string{"s", "new"} {
		out, _ := h.Send(ctx, sid, llm.UserText("two"))
		e, ok := out.(*chat.Errored)
		if !ok || e.Category != errcat.SessionStoreUnavailable || e.Bucket != harness.RetryableTransient {
			t.Fatalf("session %s: the turn while the database is gone: %+v", sid, out)
		}
	}
	proxy.restore()
	// Sent again as a client does with a retryable failure: a connection
	// the cut broke may fail one more turn before the pool drops it.
	for try := 1; ; try++ {
		out, err := h.Send(ctx, "s", llm.UserText("two"))
		if err == nil {
			break
		}
		if e, ok := out.(*chat.Errored); try == 3 || !ok || e.Category != errcat.SessionStoreUnavailable {
			t.Fatalf("the turn sent again (try %d): %v", try, err)
		}
	}
}
