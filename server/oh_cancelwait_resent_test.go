package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
)

// waitLock is a Locker that, while block is set, waits (as for a busy
// session) until the caller gives up.
type waitLock struct {
	l     chat.Locker
	block atomic.Bool
}

func (b *waitLock) Lock(ctx context.Context, id string) (func(), error) {
	if b.block.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.l.Lock(ctx, id)
}

func (e *ohEnv) postCtx(t *testing.T, ctx context.Context, body string) ohResult {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://localhost/v1/openharness", strings.NewReader(body)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	res := ohResult{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	_ = json.Unmarshal(res.raw, &res.msg)
	return res
}

// TestOpenHarnessContinuationCancelledWhileWaitingRunsWhenResent: a continuation whose
// client gave up while its resume waited for the session ran nothing;
// the same continuation resent (same or new request_id) resumes the
// turn.
func TestOpenHarnessContinuationCancelledWhileWaitingRunsWhenResent(t *testing.T) {
	for _, sameID := range []bool{true, false} {
		t.Run(fmt.Sprintf("same request_id %v", sameID), func(t *testing.T) {
			var lock *waitLock
			e := newOHEnvWith(t, filepath.Join(t.TempDir(), "armature.db"), func(cc *chat.Config) {
				lock = &waitLock{l: cc.Locker}
				cc.Locker = lock
			}, nil)
			s := e.post(t, ohBody("rid-s", `{"session_id": "s-cw", "user_intent": "refund order 7"}`))
			cont := s.ext(t).Continuation
			if cont == nil {
				t.Fatalf("no continuation: %s", s.raw)
			}
			lock.block.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			r := e.postCtx(t, ctx, ohDecide("rid-c", "s-cw", cont.RunID, cont.ContinuationToken, "approve"))
			cancel()
			lock.block.Store(false)
			t.Logf("cancelled: %d %s", r.status, r.raw)
			rid := "rid-c"
			if !sameID {
				rid = "rid-c2"
			}
			again := e.post(t, ohDecide(rid, "s-cw", cont.RunID, cont.ContinuationToken, "approve"))
			if x := again.ext(t); x.Outcome != "completed" {
				t.Fatalf("the same continuation after the cancelled wait: %s, want the resumed turn completed", again.raw)
			}
		})
	}
}
