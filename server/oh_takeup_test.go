package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/session"
)

// blipLock is a Locker whose Lock fails, as a store that cannot be
// reached, while fail is set (a connection reset while a replica takes
// the session's lock).
type blipLock struct {
	l    chat.Locker
	fail atomic.Bool
}

func (b *blipLock) Lock(ctx context.Context, id string) (func(), error) {
	if b.fail.Load() {
		return nil, fmt.Errorf("lock: %w", session.ErrUnavailable)
	}
	return b.l.Lock(ctx, id)
}

// TestOpenHarnessContinuationFailedBeforeTakeUpRunsWhenSentAgain: a
// continuation whose resume could not take the session's lock (the
// store unreachable for a moment) ran nothing: the suspended turn still
// awaits the decision. The Shell is told to retry (retryable), and the
// same continuation sent again, with the same request_id or a new one,
// resumes the turn. Before, the endpoint kept the failure as the
// continuation's answer (any category but the refusals counted as
// resumed), so the retry it asked for was answered that failure again
// and the refund could never be approved from the Shell.
func TestOpenHarnessContinuationFailedBeforeTakeUpRunsWhenSentAgain(t *testing.T) {
	for _, sameID := range []bool{true, false} {
		t.Run(fmt.Sprintf("same request_id %v", sameID), func(t *testing.T) {
			var lock *blipLock
			e := newOHEnvWith(t, filepath.Join(t.TempDir(), "armature.db"), func(cc *chat.Config) {
				lock = &blipLock{l: cc.Locker}
				cc.Locker = lock
			}, nil)
			s := e.post(t, ohBody("rid-s", `{"session_id": "s-blip", "user_intent": "refund order 7"}`))
			cont := s.ext(t).Continuation
			if cont == nil {
				t.Fatalf("no continuation: %s", s.raw)
			}
			lock.fail.Store(true)
			r := e.post(t, ohDecide("rid-c", "s-blip", cont.RunID, cont.ContinuationToken, "approve"))
			lock.fail.Store(false)
			er := r.msg.Response.Error
			if er == nil || er.Retryable == nil || !*er.Retryable {
				t.Fatalf("the continuation during the blip: %s, want a retryable error", r.raw)
			}
			rid := "rid-c"
			if !sameID {
				rid = "rid-c2"
			}
			again := e.post(t, ohDecide(rid, "s-blip", cont.RunID, cont.ContinuationToken, "approve"))
			if x := again.ext(t); x.Outcome != "completed" {
				t.Fatalf("the same continuation after the blip: %s, want the resumed turn completed", again.raw)
			}
		})
	}
}
