package chat

import (
	"context"
	"log/slog"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
)

// DefaultCancelledResult is the tool result that closes each open tool
// call of a suspended turn that was cancelled (Harness.CancelSuspended),
// when the session's next message is sent.
const DefaultCancelledResult = "Not run: the request was cancelled before it was approved."

// UnansweredResult is the tool result that closes each open tool call of
// the history's last exchange that never awaited an approval (a
// conversation a client sent whole with a call it gave no result for),
// when the session's next message is sent: no provider takes a history
// with a call nobody answered.
const UnansweredResult = "Not run: no result was given for this call."

// CancelSuspended ends a suspended turn of the session without resuming
// it: its paused record is deleted and its subscription released, so a
// later signal for it fails with harness_signal_correlation_failed, like
// the signal of a superseded turn. Its open tool calls stay unanswered
// in the history until the session's next message, which closes each
// with a tool result saying it was not run (DefaultCancelledResult)
// before the message, so the history stays valid for every provider.
//
// It waits for the session's running turn, like a Send. It fails with
// harness_signal_correlation_failed when no suspended turn of the
// session has that invocation id (it was resumed, superseded, cancelled
// or never existed), harness_session_id_unresolved for an invalid id
// and invocation_cancelled when ctx ends while it waits, or
// when its wait passes its bound (Config.LockWait, or the options
// WithLockWait and WithWaitContext, as for Delete; cause
// ErrSessionBusy, nothing cancelled). Config.OnCancel then releases the
// suspension's state kept elsewhere.
func (c *Harness) CancelSuspended(ctx context.Context, sessionID, invocationID string, opts ...SendOption) error {
	unlock, err := c.lockSession(ctx, sessionID, opts)
	if err != nil {
		return err
	}
	defer unlock()
	sub, err := c.h.Resolve(ctx, harness.SignalRef{InvocationID: invocationID, SessionID: sessionID})
	if err != nil || sub.SessionID != sessionID {
		return &harness.Error{Cat: errcat.HarnessSignalCorrelationFailed, Msg: "no suspended turn of this session has that invocation id", Err: err}
	}
	c.retire(ctx, []harness.Subscription{sub})
	if f := c.onCancel; f != nil {
		if err := f(context.WithoutCancel(ctx), sessionID, sub.SignalID); err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "chat: releasing a cancelled suspension's state failed",
				slog.String("session_id", sessionID), slog.String("signal_id", sub.SignalID), slog.String("error", err.Error()))
		}
	}
	return nil
}
