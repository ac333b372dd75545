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
	// done is closed when the goroutine ends: at stop, or when it gave
	// up on a stream whose events are too large for the client.
	done chan struct{}

	// queued is the size of the events in events (see eventSize), at
	// most maxQueuedEventBytes unless one event is larger; the loop
	// calls took for each event it takes, which signals room.
	mu     sync.Mutex
	queued int
	room   chan struct{}
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
	w := &watcher{events: make(chan runtime.Event, 1024), notes: make(chan string, 4), cancel: cancel,
		done: make(chan struct{}), room: make(chan struct{}, 1)}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(w.done)
		w.follow(ctx, c, id, s)
	}()
	return w, nil
}

// follow reads s, and reconnects from its last event id with backoff
// until ctx ends. When the server no longer knows that id (the events
// were deleted with the session or removed by retention), it reconnects
// from the start and passes on only the events after it: ids only grow,
// so the ones at or below it were read before (or are gone).
//
// An event larger than [MaxEventBytes] ends the connection: the stream
// is reopened after it when its id is known (the user is told it was
// skipped), else at the same position; after maxTooLargeRetries tries
// in a row that get no further, follow tells the user and returns.
func (w *watcher) follow(ctx context.Context, c *Client, id string, s *Stream) {
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	lastID, floor := s.LastID, int64(0)
	noted := false
	strikes := 0 // connections in a row ended by too large an event, getting no further
	for {
		if s != nil {
			cur, from, read := s, s.LastID, s.LastID
			stop := context.AfterFunc(ctx, func() { cur.Close() })
			var big *TooLargeError
			for ev, err := range s.Events() {
				if err != nil {
					errors.As(err, &big)
					break
				}
				read = s.LastID
				backoff = minBackoff
				if ev.ID <= floor {
					continue // read before the server forgot the position
				}
				if noted {
					noted = false
					w.note("event stream reconnected")
				}
				if !w.put(ctx, ev) {
					break
				}
			}
			stop()
			s.Close()
			lastID = s.LastID
			if s.Unknown {
				floor, lastID = max(floor, lastID), 0
				backoff = 0 // not a failure: reconnect at once
			}
			if lastID > from {
				strikes = 0 // the connection got further
			}
			switch {
			case big == nil || ctx.Err() != nil:
			case s.LastID > read:
				// Its id came first: LastID is past it.
				strikes = 0
				w.note(big.detail() + "; skipped it")
			case strikes+1 < maxTooLargeRetries:
				strikes++
				w.note(big.detail() + "; reconnecting")
			default:
				w.note(big.detail() + ", again and again: stopped following the stream (turns still print when they end; /switch " + id + " follows it again)")
				return
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

// put passes ev on to the loop, once the events queued for it leave
// room for ev (or none are queued); false when ctx ended first.
func (w *watcher) put(ctx context.Context, ev runtime.Event) bool {
	n := eventSize(ev)
	for {
		w.mu.Lock()
		if w.queued == 0 || w.queued+n <= maxQueuedEventBytes {
			w.queued += n
			w.mu.Unlock()
			break
		}
		w.mu.Unlock()
		select {
		case <-w.room:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case w.events <- ev:
		return true
	case <-ctx.Done():
		w.took(ev)
		return false
	}
}

// took tells that the loop took ev from events.
func (w *watcher) took(ev runtime.Event) {
	w.mu.Lock()
	w.queued -= eventSize(ev)
	w.mu.Unlock()
	select {
	case w.room <- struct{}{}:
	default:
	}
}

// eventSize is about the memory ev holds: its strings and data.
func eventSize(ev runtime.Event) int {
	return len(ev.Type) + len(ev.RunID) + len(ev.ParentRequestID) + len(ev.SessionID) + len(ev.AgentID) +
		len(ev.Tenant) + len(ev.Data) + 64
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
