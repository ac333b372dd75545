package chat_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestDecisionsRandomized races random decisions (approve or deny, under
// request ids drawn from a small pool, some with none) on one suspended
// turn, on a store that records marks (SQLite, durable) and on one that
// does not (the harness's idempotency cache), and checks, round after
// round (seed printed):
//
//   - exactly one decision takes effect: the gated node runs once, and
//     the history ends with that decision's answer;
//   - a call with the winner's request id and the same decision answers
//     the winner's outcome, replayed; with the other decision, it is
//     refused with ErrMessageIDReused;
//   - every other call resumes nothing (harness_signal_correlation_failed);
//   - sent again one by one afterwards, every call is answered the same
//     way.
func TestDecisionsRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, marks := range []bool{true, false} {
		t.Run(fmt.Sprintf("marks=%v", marks), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 45))
			ctx := context.Background()
			var (
				store session.Store
				opts  graphOpts
				cfg   chat.Config
			)
			if marks {
				s := openSQLite(t, dbPath(t))
				store, opts.records = s, s.Checkpoints()
				cfg.Coordinator = harness.NewStoreCoordinator(s.Checkpoints())
			} else {
				store = noMarks{session.NewMemoryStore(session.MemoryConfig{})}
			}
			opts.store = store
			var acts atomic.Int64
			cfg.Graph = approvalGraph(t, opts, "approve", &acts)
			c := newChat(t, cfg)
			type call struct {
				rid     string
				approve bool
			}
			for round := range 12 {
				id := fmt.Sprintf("r%d", round)
				if out, err := c.Send(ctx, id, llm.UserText("delete it")); err != nil {
					t.Fatal(err)
				} else if _, ok := out.(*chat.Suspended); !ok {
					t.Fatalf("round %d: send %#v", round, out)
				}
				calls := make([]call, 2+rng.IntN(5))
				for i := range calls {
					calls[i] = call{rid: []string{"", "a", "b", "c"}[rng.IntN(4)], approve: rng.IntN(2) == 0}
				}
				before := acts.Load()
				signal := func(cl call) (chat.Outcome, error) {
					return c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: id, Payload: Approved.Set(cl.approve), RequestID: cl.rid})
				}
				outs := make([]chat.Outcome, len(calls))
				errs := make([]error, len(calls))
				var wg sync.WaitGroup
				for i, cl := range calls {
					wg.Go(func() { outs[i], errs[i] = signal(cl) })
				}
				wg.Wait()
				if n := acts.Load() - before; n != 1 {
					t.Fatalf("round %d %+v: the gated node ran %d times", round, calls, n)
				}
				win := -1
				for i, o := range outs {
					if _, ok := o.(*chat.Completed); ok && !o.Info().Replayed {
						if win >= 0 {
							t.Fatalf("round %d %+v: two decisions took effect (%d and %d)", round, calls, win, i)
						}
						win = i
					}
				}
				if win < 0 {
					t.Fatalf("round %d %+v: no decision took effect: %v", round, calls, errs)
				}
				w := calls[win]
				want := "done: denied"
				if w.approve {
					want = "done: approved"
				}
				hist := texts(history(t, store, id))
				if last := hist[len(hist)-1]; last != "assistant: "+want {
					t.Fatalf("round %d: history ends %q, want the winner's %q", round, last, want)
				}
				check := func(i int, cl call, o chat.Outcome, err error) {
					t.Helper()
					switch {
					case i == win:
					case cl.rid != "" && cl.rid == w.rid && cl.approve == w.approve:
						if c, ok := o.(*chat.Completed); !ok || !c.Replayed || c.Replies[len(c.Replies)-1].Text() != want {
							t.Fatalf("round %d call %d %+v (winner %+v): %#v, %v, want the winner's outcome, replayed", round, i, cl, w, o, err)
						}
					case cl.rid != "" && cl.rid == w.rid:
						if !errors.Is(err, chat.ErrMessageIDReused) {
							t.Fatalf("round %d call %d %+v (winner %+v): %v, want ErrMessageIDReused", round, i, cl, w, err)
						}
					default:
						if errcat.Of(err) != errcat.HarnessSignalCorrelationFailed {
							t.Fatalf("round %d call %d %+v (winner %+v): %#v, %v, want harness_signal_correlation_failed", round, i, cl, w, o, err)
						}
					}
				}
				for i, cl := range calls {
					check(i, cl, outs[i], errs[i])
				}
				for i, cl := range calls {
					if i == win {
						continue
					}
					o, err := signal(cl)
					check(i, cl, o, err)
				}
				if cl := (call{rid: w.rid, approve: w.approve}); w.rid != "" {
					o, err := signal(cl)
					check(-2, cl, o, err)
				}
				if n := acts.Load() - before; n != 1 {
					t.Fatalf("round %d: the gated node ran %d times after the retransmissions", round, n)
				}
			}
		})
	}
}
