package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Many sessions, each with a turn, some watched while it runs and some
// cancelled: once the turns end and are written, the Recorder, its
// Broker and its publication locks hold nothing per session or per run
// (their memory does not grow with the sessions served), and the
// MemoryStore holds only the records.
func TestRecorderForgetsEndedSessions(t *testing.T) {
	for _, sync_ := range []bool{false, true} {
		t.Run(fmt.Sprintf("synchronous=%v", sync_), func(t *testing.T) {
			ctx := context.Background()
			rec, err := NewRecorder(RecorderConfig{Store: NewMemoryStore(MemoryConfig{}), Synchronous: sync_, FlushEvery: 4})
			if err != nil {
				t.Fatal(err)
			}
			const sessions = 2000
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			for i := range sessions {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					id := fmt.Sprintf("s%d", i)
					turn, tctx, err := rec.Begin(ctx, BeginRequest{Tenant: "t", SessionID: id, AgentID: "a"})
					if err != nil {
						t.Error(err)
						return
					}
					var cancel func()
					if i%3 == 0 { // a watcher joins midway and leaves
						_, cancel = rec.Subscribe(ctx, "t", id)
					}
					for range 6 {
						_ = turn.Emit(tctx, "x.y", map[string]int{"i": i})
					}
					if cancel != nil {
						cancel()
					}
					switch i % 4 {
					case 0:
						rec.Cancel(ctx, "t", turn.ID())
						err = turn.Cancelled(tctx, "stop")
					case 1:
						err = turn.Fail(tctx, RunError{Category: "x", Message: "m"})
					default:
						err = turn.Complete(tctx, map[string]int{"i": i})
					}
					if err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			live := len(rec.live)
			rec.mu.Unlock()
			rec.qmu.Lock()
			perSession, queue := len(rec.perSession), len(rec.queue)
			rec.qmu.Unlock()
			rec.pub.mu.Lock()
			locks := len(rec.pub.m)
			rec.pub.mu.Unlock()
			rec.broker.mu.Lock()
			subs := len(rec.broker.subs)
			rec.broker.mu.Unlock()
			if live+perSession+queue+locks+subs != 0 {
				t.Fatalf("after %d ended turns: live %d, perSession %d, queue %d, publication locks %d, broker sessions %d; want none",
					sessions, live, perSession, queue, locks, subs)
			}
			resp, err := rec.Store().ListRuns(ctx, ListRunsRequest{Tenant: "t", SessionID: "s1"})
			if err != nil || len(resp.Runs) != 1 {
				t.Fatalf("session s1's runs: %v %v", resp.Runs, err)
			}
			if err := rec.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
