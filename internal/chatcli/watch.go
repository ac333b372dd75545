package chatcli

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/armature-go/armature/runtime"
)

// watcher follows one session's event stream in a goroutine it owns,
// reconnecting with Last-Event-ID when the connection drops, and hands
// the events to the chat loop in order.
type watcher struct {
	events chan runtime.Event
	// notes carries connection trouble worth telling the user.
	notes  chan string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// watch subscribes to the session's stream after event id after and
// follows it until stop or the end of ctx. The first subscription is
// synchronous: when watch returns without error, turns sent from then on
// are streamed. Ending req (a command's interrupt) abandons that first
// subscription; once it is made, req no longer matters.
func watch(ctx, req context.Context, c *Client, id string, after int64) (*watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(req, cancel)
	s, err := c.Subscribe(ctx, id, after)
	if !stop() && err == nil {
		s.Close() // req ended meanwhile: the subscription is abandoned
		err = context.Cause(req)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	w := &watcher{events: make(chan runtime.Event, 1024), notes: make(chan string, 4), cancel: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.follow(ctx, c, id, s)
	}()
	return w, nil
}

// follow reads s, and reconnects from its last event id with backoff
// until ctx ends. When the server no longer knows that id (the events
// were deleted with the session or removed by retention), it reconnects
// from the start and passes on only the events after it: ids only grow,
// so the ones at or below it were read before (or are gone).
func (w *watcher) follow(ctx context.Context, c *Client, id string, s *Stream) {
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	lastID, floor := s.LastID, int64(0)
	noted := false
	for {
		if s != nil {
			cur := s
			stop := context.AfterFunc(ctx, func() { cur.Close() })
			for ev, err := range s.Events() {
				if err != nil {
					break
				}
				backoff = minBackoff
				if ev.ID <= floor {
					continue // read before the server forgot the position
				}
				if noted {
					noted = false
					w.note("event stream reconnected")
				}
				select {
				case w.events <- ev:
				case <-ctx.Done():
				}
			}
			stop()
			s.Close()
			lastID = s.LastID
			if s.Unknown {
				floor, lastID = max(floor, lastID), 0
				backoff = 0 // not a failure: reconnect at once
			}
			s = nil
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = max(min(2*backoff, maxBackoff), minBackoff)
		var err error
		s, err = c.Subscribe(ctx, id, lastID)
		if err != nil && ctx.Err() == nil && !noted {
			noted = true
			msg := "event stream lost; reconnecting"
			var ae *APIError
			if errors.As(err, &ae) {
				msg += " (" + ae.Message + ")"
			}
			w.note(msg)
		}
	}
}

// note passes msg on unless the loop is behind on notes.
func (w *watcher) note(msg string) {
	select {
	case w.notes <- msg:
	default:
	}
}

// stop ends the stream and waits for the goroutine.
func (w *watcher) stop() {
	w.cancel()
	w.wg.Wait()
}
