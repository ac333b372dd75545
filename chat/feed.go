package chat

import (
	"context"
	"log/slog"
)

// markFed prefixes the mark a resumed turn's outcome is recorded under
// for the other harnesses of a Feed: "f:" and a random id.
const markFed = "f:"

// ResumeFeed carries resumed turns between the harnesses of several
// processes sharing one session store (replicas), so that a listener
// ([Harness.Subscribe]) subscribed on any of them gets the outcome of a
// turn another resumed. store/postgres provides one over LISTEN/NOTIFY.
type ResumeFeed interface {
	// Announce tells the other harnesses that a resumed turn of the
	// session committed, its outcome recorded under the mark key.
	Announce(ctx context.Context, sessionID, key string) error
	// Listen calls fn(sessionID, key) for each announcement another
	// harness made, until ctx ends.
	Listen(ctx context.Context, fn func(sessionID, key string)) error
}

// Follow delivers the resumed turns other harnesses announce on the
// Feed to this harness's listeners of their sessions — each once per
// listener, read back from the session store — until ctx ends. Run it
// in a goroutine of each harness's process for the life of the harness;
// without a Feed it returns at once. A turn whose outcome is errored
// stored nothing and is delivered only where it ran. Whether
// announcements made while a feed's connection was down are delivered
// is the feed's promise: store/postgres's are (it keeps them as rows for
// a while and reads those it missed when it reconnects).
func (c *Harness) Follow(ctx context.Context) error {
	if c.feed == nil {
		return nil
	}
	return c.feed.Listen(ctx, func(sessionID, key string) {
		c.lmu.Lock()
		n := len(c.listeners[sessionID])
		c.lmu.Unlock()
		if n == 0 {
			return // nobody here listens: the turn is in the history
		}
		out, ok, err := c.recorded(ctx, sessionID, key)
		switch {
		case err != nil:
			c.log.LogAttrs(ctx, slog.LevelWarn, "chat: reading an announced resumed turn failed",
				slog.String("session_id", sessionID), slog.String("error", err.Error()))
		case ok:
			out.Info().Replayed = false // delivered, not a retransmission's answer
			c.notify(sessionID, out)
		}
	})
}
