package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// Turns queued on one session, each answered at once by the
// model: no turn waits maxFollowWait (2 s) for the turn before it, watched
// or not.
func TestSettleOrderSessionTurnsNoFollowStall(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			ctx := context.Background()
			srv, rec := sqliteServer(t, &instantModel{})
			if watched {
				evs, cancel := rec.Subscribe(ctx, server.DefaultTenant, "s")
				defer cancel()
				go func() {
					for range evs {
					}
				}()
			}
			const n = 20
			var wg sync.WaitGroup
			durs := make([]time.Duration, n)
			start := time.Now()
			for i := range n {
				wg.Go(func() {
					s := time.Now()
					if _, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText(fmt.Sprint("m", i))}); err != nil {
						t.Error(err)
					}
					durs[i] = time.Since(s)
				})
			}
			wg.Wait()
			total := time.Since(start)
			var worst time.Duration
			for _, d := range durs {
				worst = max(worst, d)
			}
			t.Logf("%d turns on one session: %v in all, slowest %v", n, total, worst)
			// A turn that waits for its predecessor's end waits up to
			// 2 s (maxFollowWait): 20 such turns take about 40 s, 20
			// that do not well under a second on a quiet machine; 10 s
			// tells the two apart on a loaded one too.
			if total > 10*time.Second {
				t.Errorf("%d turns took %v: a turn waited for its predecessor's end", n, total)
			}
		})
	}
}
