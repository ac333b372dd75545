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
// Its wait for the session is bounded as a turn's is: by
// Config.LockWait, or by the options that bound a wait for the session
// (WithLockWait, WithWaitContext; the other SendOptions do not apply to
// a delete). Past the bound it fails with invocation_cancelled
// (retryable), its cause ErrSessionBusy, having deleted nothing.
//
// It fails with harness_session_id_unresolved for an invalid id,
// invocation_cancelled when ctx ends (or the wait context, or the bound)
// while it waits for the session, and session_save_failed when the
// store fails.
func (c *Harness) Delete(ctx context.Context, sessionID string, opts ...SendOption) error {
	return c.DeleteWith(ctx, sessionID, nil, opts...)
}

// DeleteWith is Delete, then calls then (when not nil) while it still
// holds the session's lock: no turn of the session runs, in this harness
// or in another over the same session store, until then returns, and a
// turn that waited for the delete then begins a new session. then's
// error is returned (the session stays deleted). A server serving
// several agents over one store deletes the session once through the
// first agent's harness and, in then, the other agents' state
// ([Harness.DeleteLocked]) and whatever else the session left (its run
// records): a message sent meanwhile, to any agent, cannot slip in
// between.
func (c *Harness) DeleteWith(ctx context.Context, sessionID string, then func(context.Context) error, opts ...SendOption) error {
	return c.DeleteAround(ctx, sessionID, nil, then, opts...)
}

// DeleteAround is DeleteWith that also calls before (when not nil)
// holding the session's lock, before the session is deleted: its error
// is returned, and the session is not deleted. A caller deletes there
// what the session left elsewhere (its run records) for the history to
// be the last thing to go: a process killed in between leaves the
// session, so its delete visibly did not finish and is done again,
// never a deleted session whose records remain.
func (c *Harness) DeleteAround(ctx context.Context, sessionID string, before, then func(context.Context) error, opts ...SendOption) error {
	unlock, err := c.lockSession(ctx, sessionID, opts)
	if err != nil {
		return err
	}
	defer unlock()
	// Once the session is held the delete is done whole: a caller that
	// leaves now (an HTTP client hanging up) does not stop it between
	// before and the history's delete.
	ctx = context.WithoutCancel(ctx)
	if before != nil {
		if err := before(ctx); err != nil {
			return err
		}
	}
	if err := c.DeleteLocked(ctx, sessionID); err != nil {
		return err
	}
	if then != nil {
		return then(ctx)
	}
	return nil
}

// SharesLocks reports whether c and other serialize a session's turns
// with the same locks (both over one session store that keeps them, and
// the same Config.Locker): holding the session's lock through one holds
// it for both.
func (c *Harness) SharesLocks(other *Harness) bool {
	return other != nil && sameLocker(c.locks, other.locks) && sameLocker(c.locker, other.locker)
}

// sameLocker reports whether a and b are the same locker; lockers of a
// type that cannot be compared are not.
func sameLocker(a, b Locker) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// DeleteLocked is Delete for a caller that holds the session's lock
// already: in the callback of [Harness.DeleteWith] of a harness that
// [Harness.SharesLocks] with c. It must not be called otherwise (a turn
// of the session could be running).
func (c *Harness) DeleteLocked(ctx context.Context, sessionID string) error {
	if err := session.ValidateID(sessionID); err != nil {
		return &harness.Error{Cat: errcat.HarnessSessionIDUnresolved, Msg: "invalid session id", Err: err}
	}
	var (
		pend []harness.Subscription
		err  error
	)
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
	c.calls.Forget(sessionID) // its tool-call index: memory a deleted history no longer needs
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
// a Send does, its wait bounded by Config.LockWait or by the options
// that bound a Send's wait (WithLockWait, WithWaitContext).
func (c *Harness) lockSession(ctx context.Context, sessionID string, opts []SendOption) (func(), error) {
	if err := session.ValidateID(sessionID); err != nil {
		return nil, &harness.Error{Cat: errcat.HarnessSessionIDUnresolved, Msg: "invalid session id", Err: err}
	}
	var sc sendConfig
	for _, o := range opts {
		o(&sc)
	}
	return c.lockWaiting(ctx, sc.wait, sc.lockWait, sessionID)
}
