package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

type r52refuse struct {
	*MemoryStore
	refuse atomic.Bool
}

func (s *r52refuse) Append(ctx context.Context, req AppendRequest) ([]Event, error) {
	if s.refuse.Load() {
		return nil, errors.New("disk full")
	}
	return s.MemoryStore.Append(ctx, req)
}

// The Recorder keeps no settled turn once the session's turns ended,
// however Settle and the end interleave (twice, after the end,
// concurrently with it, an end the store refused, a watched turn).
func TestSettleOrderSettledTurnForgotten(t *testing.T) {
	for _, sync_ := range []bool{false, true} {
		t.Run(fmt.Sprintf("synchronous=%v", sync_), func(t *testing.T) {
			ctx := context.Background()
			st := &r52refuse{MemoryStore: NewMemoryStore(MemoryConfig{})}
			rec, err := NewRecorder(RecorderConfig{Store: st, Synchronous: sync_})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			for i := range 2000 {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					id := fmt.Sprintf("s%d", i%300)
					turn, _, err := rec.Begin(ctx, BeginRequest{Tenant: "t", SessionID: id, AgentID: "a"})
					if err != nil {
						return
					}
					_ = turn.Accept(ctx)
					var cancel func()
					if i%7 == 0 {
						_, cancel = rec.Subscribe(ctx, "t", id)
					}
					switch i % 4 {
					case 0:
						turn.Settle()
						turn.Settle()
						_ = turn.Complete(ctx, nil)
					case 1:
						_ = turn.Complete(ctx, nil)
						turn.Settle()
					case 2:
						var w sync.WaitGroup
						w.Go(turn.Settle)
						w.Go(func() { _ = turn.Complete(ctx, nil) })
						w.Wait()
					case 3:
						turn.Settle()
						_ = turn.Emit(ctx, "x", nil)
						_ = turn.Fail(ctx, RunError{Category: "c"})
					}
					if cancel != nil {
						cancel()
					}
				})
				if i == 1000 {
					st.refuse.Store(true)
				}
				if i == 1200 {
					st.refuse.Store(false)
				}
			}
			wg.Wait()
			_ = rec.Flush(ctx)
			rec.mu.Lock()
			n := len(rec.settledTurn)
			rec.mu.Unlock()
			if n != 0 {
				t.Fatalf("settledTurn holds %d sessions after every turn ended", n)
			}
			_ = rec.Close(ctx)
		})
	}
}
