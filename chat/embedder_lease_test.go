package chat_test

import (
	"context"
	"fmt"
	"github.com/armature-go/armature/internal/pgtest"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
)

// TestEmbedderCancelledLockLeavesNoLease: sends on one worker whose
// contexts end at random moments (during the SQLite lease's own write
// transactions, among others) must leave no lease behind: the other
// worker's next send on the session runs at once, not after the lease's
// 15 s TTL.
func TestEmbedderCancelledLockLeavesNoLease(t *testing.T) {
	seed := embSeed(t)
	rng := rand.New(rand.NewPCG(seed, 9))
	path := filepath.Join(t.TempDir(), "l.db")
	refunds := &embRefunds{ran: map[string]int{}}
	a, b := embOpen(t, path, refunds.tools()), embOpen(t, path, refunds.tools())
	ctx := context.Background()
	for i := range 80 {
		cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(400))*time.Microsecond)
		_, _ = a.h.Send(cctx, "s", llm.UserText(fmt.Sprint("hello ", i)))
		cancel()
		start := time.Now()
		bctx, bcancel := context.WithTimeout(ctx, 3*time.Second)
		out, err := b.h.Send(bctx, "s", llm.UserText(fmt.Sprint("hi ", i)))
		bcancel()
		if err != nil {
			t.Fatalf("round %d: the other worker's send waited %v and failed: %T %v", i, time.Since(start).Round(time.Millisecond), out, err)
		}
	}
}

// TestEmbedderCancelledLockLeavesNoLockPostgres is the same on
// PostgreSQL's advisory locks, with two senders on the first worker
// contending so that cancellations also land while waiting.
func TestEmbedderCancelledLockLeavesNoLockPostgres(t *testing.T) {
	seed := embSeed(t)
	rng := rand.New(rand.NewPCG(seed, 10))
	_, url := pgtest.Schema(t)
	refunds := &embRefunds{ran: map[string]int{}}
	a, b := embOpen(t, "pg:"+url, refunds.tools()), embOpen(t, "pg:"+url, refunds.tools())
	c := embOpen(t, "pg:"+url, refunds.tools())
	ctx := context.Background()
	for i := range 60 {
		d1, d2 := time.Duration(rng.IntN(3000))*time.Microsecond, time.Duration(rng.IntN(3000))*time.Microsecond
		var wg sync.WaitGroup
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, d1)
			defer cancel()
			_, _ = a.h.Send(cctx, "s", llm.UserText(fmt.Sprint("hello ", i)))
		})
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, d2)
			defer cancel()
			_, _ = c.h.Send(cctx, "s", llm.UserText(fmt.Sprint("hey ", i)))
		})
		wg.Wait()
		start := time.Now()
		bctx, bcancel := context.WithTimeout(ctx, 3*time.Second)
		out, err := b.h.Send(bctx, "s", llm.UserText(fmt.Sprint("hi ", i)))
		bcancel()
		if err != nil {
			t.Fatalf("round %d: the other worker's send waited %v and failed: %T %v", i, time.Since(start).Round(time.Millisecond), out, err)
		}
	}
}
