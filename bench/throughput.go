package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/chat"
)

// The shape of W5.
const (
	// W5Sessions is the number of sessions of a W5 block.
	W5Sessions = 100
	// W5Turns is the number of turns of each session of a W5 block.
	W5Turns = 100
	// w5DriversPerProc is the number of driving goroutines per GOMAXPROCS.
	w5DriversPerProc = 2
)

// ChatW5 is W5, throughput: W5Sessions sessions of W5Turns turns
// each, driven by 2 x GOMAXPROCS goroutines. One op is one turn (a Send
// of the user's message whose one-node graph appends one reply), so
// ns/op is the wall time per turn with every driver busy; the
// benchmark also reports turns/s. The b.N turns run in blocks of
// W5Sessions x W5Turns (-benchtime 10000x is exactly one block),
// each block on new sessions; within a block every session's turns run
// in order, one at a time (a user waits for the reply), and the
// sessions take turns: a driver takes the next waiting session, sends
// its next turn and puts it back at the end of the queue. A block's
// first turn of each session is a new session's (W2), the rest warm
// turns (W1) whose history grows to 2 x W5Turns messages.
func ChatW5(b *testing.B, be Backend) {
	b.Helper()
	ctx := context.Background()
	h, err := be.harness(ReplyGraph)
	if err != nil {
		b.Fatal(err)
	}
	drivers := w5DriversPerProc * runtime.GOMAXPROCS(0)
	block := W5Sessions * W5Turns
	var failed atomic.Bool
	b.ReportAllocs()
	b.ResetTimer()
	for start, n := 0, 0; start < b.N && !failed.Load(); start += block {
		n++
		if err := w5Block(ctx, h, fmt.Sprintf("w5-%d-", n), min(block, b.N-start), drivers, &failed); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if !failed.Load() {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	}
}

// w5Session is a session of a W5 block and the turns it has left.
type w5Session struct {
	id   string
	left int
}

// w5Block runs turns turns over W5Sessions sessions named prefix plus a
// number (fewer sessions when turns < W5Sessions), spread evenly, with
// drivers goroutines. The first failed turn sets failed, the drivers
// then stop, and it is returned.
func w5Block(ctx context.Context, h *chat.Harness, prefix string, turns, drivers int, failed *atomic.Bool) error {
	sessions := min(W5Sessions, turns)
	queue := make(chan *w5Session, sessions)
	for i := range sessions {
		left := turns / sessions
		if i < turns%sessions {
			left++
		}
		queue <- &w5Session{id: prefix + itoa(i), left: left}
	}
	var (
		active   atomic.Int64
		firstErr error
	)
	active.Store(int64(sessions))
	var wg sync.WaitGroup
	for range drivers {
		wg.Go(func() {
			for s := range queue {
				if !failed.Load() {
					if err := w5Turn(ctx, h, s.id); err != nil && !failed.Swap(true) {
						firstErr = err // the one Swap that set failed
					}
				}
				if s.left--; s.left > 0 && !failed.Load() {
					queue <- s
				} else if active.Add(-1) == 0 {
					close(queue)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// w5Turn sends one turn and checks it completed with one reply.
func w5Turn(ctx context.Context, h *chat.Harness, id string) error {
	out, err := h.Send(ctx, id, userMsg)
	if err != nil {
		return fmt.Errorf("W5 turn on %s: %w", id, err)
	}
	if c, ok := out.(*chat.Completed); !ok || len(c.Replies) != 1 {
		return fmt.Errorf("W5 turn on %s: %#v", id, out)
	}
	return nil
}
