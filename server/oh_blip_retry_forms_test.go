package server

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/chat"
)

// TestOpenHarnessBlipBeforeTakeUpEveryRetryFormResumes: a continuation whose resume failed
// before it took the suspension up (the session lock's store blip)
// resumes the turn when sent again (doc.go: "A continuation whose
// resume failed before it took the suspension up ... resumes the turn
// when sent again"): by run_id alone, by token, with the same
// request_id or a new one, also after a restart.
func TestOpenHarnessBlipBeforeTakeUpEveryRetryFormResumes(t *testing.T) {
	for _, c := range []struct {
		firstRun, againRun bool
		same, restart      bool
	}{
		{true, true, true, false}, {true, true, false, false}, {false, true, true, false}, {true, false, true, false},
		{true, true, true, true}, {false, false, true, true}, {true, false, false, true},
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
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
			body := func(rid string, byRun bool) string {
				if byRun {
					return ohDecide(rid, "s-blip", cont.RunID, "", "approve")
				}
				return ohDecide(rid, "s-blip", "", cont.ContinuationToken, "approve")
			}
			lock.fail.Store(true)
			r := e.post(t, body("rid-c", c.firstRun))
			lock.fail.Store(false)
			er := r.msg.Response.Error
			if er == nil || er.Retryable == nil || !*er.Retryable {
				t.Fatalf("during the blip: %s, want a retryable error", r.raw)
			}
			if c.restart {
				e = e.restart(t)
			}
			rid := "rid-c"
			if !c.same {
				rid = "rid-c2"
			}
			again := e.post(t, body(rid, c.againRun))
			if x := again.ext(t); x.Outcome != "completed" {
				t.Fatalf("sent again after the blip: %s, want the resumed turn completed", again.raw)
			}
		})
	}
}
