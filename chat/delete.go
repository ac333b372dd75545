package chat

import (
	"context"
	"log/slog"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/session"
)

// Delete deletes the session for good: its history, the recorded
// outcomes of its turns (message ids, request ids, record keys) and its
// suspended turns. It waits for the session's running turn, like a Send
// (so a turn running during the delete cannot bring the session back:
// it finishes first, then the delete removes it), and then deletes
// everything in one transaction when the store keeps sessions and
// paused records together (the embedded SQLite store), in sequence
// otherwise. A later signal for one of its suspended turns fails with
// harness_signal_correlation_failed; a later Send starts a new, empty
// session under the same id. Deleting a session that does not exist
// succeeds. Config.OnDelete then deletes the session's state elsewhere
// (an upstream agent's own session), still under the session's lock.
//
// It fails with harness_session_id_unresolved for an invalid id,
// invocation_cancelled when ctx ends while it waits for the session, and
// session_save_failed when the store fails.
func (c *Harness) Delete(ctx context.Context, sessionID string) error {
	unlock, err := c.lockSession(ctx, sessionID)
	if err != nil {
		return err
	}
	defer unlock()
	var pend []harness.Subscription
	if pl, ok := c.h.Coordinator().(harness.PendingLister); ok {
		if pend, err = pl.Pending(ctx, sessionID); err != nil {
			return errcat.Wrap(errcat.SessionSaveFailed, "chat: cannot list the session's suspended turns", err)
		}
	}
	if err := c.h.Graph().DeleteSession(ctx, sessionID); err != nil {
		return err
	}
	for _, p := range pend {
		if err := c.h.Coordinator().Release(context.WithoutCancel(ctx), p); err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "chat: releasing a deleted session's subscription failed",
				slog.String("invocation_id", p.InvocationID), slog.String("error", err.Error()))
		}
	}
	if c.idem != nil {
		c.idem.dropSession(sessionID)
	}
	c.lmu.Lock()
	delete(c.queued, sessionID)
	c.lmu.Unlock()
	if f := c.onDelete; f != nil {
		if err := f(ctx, sessionID); err != nil {
			return errcat.Wrap(errcat.SessionSaveFailed, "chat: cannot delete the session's upstream state", err)
		}
	}
	return nil
}

// lockSession validates a session id and takes the session's locks, as
// a Send does.
func (c *Harness) lockSession(ctx context.Context, sessionID string) (func(), error) {
	if err := session.ValidateID(sessionID); err != nil {
		return nil, &harness.Error{Cat: errcat.HarnessSessionIDUnresolved, Msg: "invalid session id", Err: err}
	}
	return c.lock(ctx, sessionID)
}
