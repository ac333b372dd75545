package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// A turn that lets its session go (Settle) before it was accepted (a
// run that resolves another, which never holds the session) is not the
// session's turn to follow: the session's next turn, accepted and
// settled meanwhile, does not wait for it, and so no two turns follow
// each other (before, each one's end waited maxFollowWait, 2 s, for the
// other's, and their events were stored in whatever order).
func TestSettleOrderSettleBeforeAcceptCycle(t *testing.T) {
	// Unwatched (records queued for the flusher). Watched, the next
	// turn's Accept already waits (under the session lock) for the
	// resume's end, so it cannot settle first.
	for _, watched := range []bool{false} {
		t.Run("queued", func(t *testing.T) {
			ctx := context.Background()
			store := runtime.NewMemoryStore(runtime.MemoryConfig{})
			rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close(ctx)
			if watched {
				evs, cancel := rec.Subscribe(ctx, "acme", "s1")
				defer cancel()
				go func() {
					for range evs {
					}
				}()
			}
			r := begin(t, rec) // a resume: holds the session, streams no chunk
			b := begin(t, rec) // the session's next turn, waiting for it
			rSettled, bSettled := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			var dr, db time.Duration
			wg.Go(func() { // the resume's owner (server.signal)
				s := time.Now()
				r.Settle() // chat.Signal's OnRelease, under the lock
				close(rSettled)
				// chat.Signal unlocks, then notifies and announces (a DB
				// round trip on Postgres); meanwhile the next turn runs.
				<-bSettled
				_ = r.Emit(ctx, "runtime.approval.resolved", nil) // te.finished's prelude: accept, r.after = b
				_ = r.Complete(ctx, nil)
				dr = time.Since(s)
			})
			wg.Go(func() { // the next turn's owner (server.sendStream)
				<-rSettled
				s := time.Now()
				_ = b.Accept(ctx) // OnLocked: b.after = r
				_ = b.Emit(ctx, "x.b", nil)
				b.Settle() // OnRelease
				close(bSettled)
				_ = b.Complete(ctx, nil)
				db = time.Since(s)
			})
			wg.Wait()
			_ = rec.Flush(ctx)
			t.Logf("resume's end took %v, next turn's end took %v", dr, db)
			evs, _ := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
			for _, e := range evs {
				who := "R"
				if e.RunID == b.ID() {
					who = "B"
				}
				t.Logf("  %s %s", who, e.Type)
			}
			if dr > time.Second || db > time.Second {
				t.Errorf("a turn's end stalled: resume %v, next %v (follow cycle)", dr, db)
			}
		})
	}
}
