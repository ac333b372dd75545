package peers

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
)

// The shape of W5, as in the main module's bench.ChatW5.
const (
	// W5Sessions is the number of sessions of a W5 block.
	W5Sessions = 100
	// W5Turns is the number of turns of each session of a W5 block.
	W5Turns = 100
)

// W5Block runs one block of W5: turns turns spread evenly over
// W5Sessions sessions named prefix plus a number (fewer sessions when
// turns < W5Sessions), driven by drivers goroutines. A session's turns
// run one at a time and in order; the sessions take turns, each driver
// taking the next waiting session, sending its next turn with send and
// putting it back at the end of the queue. The first failed turn stops
// the drivers and is returned. W5Block is safe for concurrent use if
// send is.
func W5Block(ctx context.Context, prefix string, turns, drivers int, send func(ctx context.Context, id string) error) error {
	type sess struct {
		id   string
		left int
	}
	sessions := min(W5Sessions, turns)
	if sessions <= 0 {
		return nil
	}
	queue := make(chan *sess, sessions)
	for i := range sessions {
		left := turns / sessions
		if i < turns%sessions {
			left++
		}
		queue <- &sess{id: prefix + strconv.Itoa(i), left: left}
	}
	var (
		active   atomic.Int64
		failed   atomic.Bool
		firstErr error
		wg       sync.WaitGroup
	)
	active.Store(int64(sessions))
	for range drivers {
		wg.Go(func() {
			for s := range queue {
				if !failed.Load() {
					if err := send(ctx, s.id); err != nil && !failed.Swap(true) {
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
