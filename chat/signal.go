package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// Signal is an arriving signal for a suspended turn: identified by its
// signal id (optionally scoped to the session, so equal signal ids in
// different sessions do not collide) or by the paused invocation's id;
// Payload is overlaid on the paused state (suspension §6), e.g.
// {"approved": true}.
type Signal struct {
	SignalID     string
	SessionID    string
	InvocationID string
	Payload      graph.Update
	// RequestID, when set, makes the signal idempotent like
	// WithMessageID makes a Send: a retransmission with the same id (in
	// the same session) returns the first resume's recorded outcome
	// (Replayed) instead of failing because the turn was already
	// resumed. At most MaxIDLength bytes. The session must be known:
	// from SessionID, or from the paused invocation on the first try.
	// The same request id with another decision (another Payload, or
	// another SignalID) is refused with an error wrapping
	// ErrMessageIDReused: a retransmission carries the same decision.
	RequestID string
	// RecordKey, when set, records the resumed turn's outcome under it,
	// as WithRecordKey does for a Send.
	RecordKey string
	// WholeText asks for the resumed turn's assistant text whole, as
	// WithWholeText does for a Send.
	WholeText bool
	// Wait, when set, also ends the signal's wait for its session, as
	// WithWaitContext does for a Send.
	Wait context.Context
	// LockWait bounds the signal's wait for its session, as WithLockWait
	// does for a Send (zero: Config.LockWait; negative: no bound).
	LockWait time.Duration
	// RefusedByMessage, when set, refuses the resume (an Errored
	// outcome wrapping ErrMessageIDReused, nothing resumed) when the
	// session recorded a message under this message id, checked under
	// the session's lock: see WithRefusedBySignal.
	RefusedByMessage string
	// OnRelease, when set, is called once the resumed turn is done with
	// its session, with the lock still held, as WithOnRelease does for a
	// Send.
	OnRelease func()
	// OnLocked, when set, is called once the resume holds the session's
	// lock, before anything else of it, as WithOnLocked does for a Send.
	OnLocked func()
	// RequestAlias, when set, is another request id the resume is
	// recorded under, as RequestID is, when RequestID names what resumes
	// (a continuation token) rather than the request (its request_id):
	// a Send refused by it (WithRefusedBySignal) is refused from then
	// on, and a later resume under it (another request given the same
	// id) is refused, as a message reusing a message id is (an Errored
	// outcome wrapping ErrMessageIDReused, nothing resumed), checked
	// under the session's lock after RequestID's retransmission check.
	RequestAlias string
}

// Signal resumes the suspended turn the signal is for (harness §3.3,
// harness-chat §8.2): it finds the paused invocation through the
// coordinator, waits for the session's turn like Send, resumes the
// invocation with the payload, and delivers the resumed turn's outcome
// to the session's listeners — exactly once per listener — after the
// session is released. The outcome is also returned.
//
// The resumed turn's messages are appended to the session as it is now,
// with the history checks of Send. A signal resumes nothing, notifies no
// listener and returns an Errored outcome when:
//
//   - nothing awaits it — no suspended turn with that signal or
//     invocation id, the turn was already resumed (of concurrent signals
//     for one suspension exactly one wins, every other gets this), the
//     session was deleted, or a later message superseded the suspension:
//     harness_signal_correlation_failed;
//   - its payload does not fit what the suspended node expects (the
//     descriptor's PayloadSchema, or the state schema):
//     suspension_resume_payload_invalid, and the turn stays suspended.
//
// All are user-correctable.
func (c *Harness) Signal(ctx context.Context, sig Signal, opts ...graph.InvokeOption) (Outcome, error) {
	t := Turn{SessionID: sig.SessionID, Path: harness.PathSignalResume, Resumed: true}
	if sig.WholeText {
		wholeText(ctx)
	}
	for _, x := range []struct{ what, id string }{{"the request id", sig.RequestID}, {"the record key", sig.RecordKey}} {
		if err := checkID(x.what, x.id); err != nil {
			return c.errored(t, err)
		}
	}
	if o, ok, err := c.signalRecorded(ctx, sig); err != nil {
		return c.errored(t, err)
	} else if ok {
		return o, nil
	}
	sub, err := c.Resolve(ctx, sig)
	if err != nil {
		// A copy of a signal whose original resumed the turn since the
		// look-up above (on another replica, or before this copy reached
		// the session): the original recorded its outcome no later than
		// it removed the paused record (in the same write, on a store
		// that writes both), so the outcome is found now.
		o, ok, rerr := c.signalRecorded(ctx, sig)
		if !ok && rerr == nil && sig.RequestID != "" && sig.SessionID != "" && c.marker == nil && c.idem != nil {
			// Without marks, the original records its outcome in the
			// idempotency cache after its resume removed the paused
			// record, still holding the session: once the session is
			// free, the outcome is found.
			if unlock, lerr := c.lockWaiting(ctx, sig.Wait, sig.LockWait, sig.SessionID); lerr == nil {
				unlock()
				o, ok, rerr = c.signalRecorded(ctx, sig)
			}
		}
		if ok || errors.Is(rerr, ErrMessageIDReused) {
			if rerr != nil {
				return c.errored(t, rerr)
			}
			return o, nil
		}
		if sig.SessionID != "" {
			// The message sent with the same id ran meanwhile (it
			// superseded the suspension): refused as under the lock.
			if rerr := c.refusedByMark(ctx, sig.SessionID, markMessage, sig.RefusedByMessage, "a message"); rerr != nil {
				return c.errored(t, rerr)
			}
		}
		return c.errored(t, err)
	}
	t.SessionID, t.InvocationID = sub.SessionID, sub.InvocationID
	unlock, err := c.lockWaiting(ctx, sig.Wait, sig.LockWait, sub.SessionID)
	if err != nil {
		return c.errored(t, err)
	}
	out, ran, announce := func() (out Outcome, ran bool, announce string) {
		// Deferred, as a Send's: a hook that panics (the embedder's,
		// recovered up the stack as net/http does) lets the session go.
		defer unlock()
		if sig.OnRelease != nil {
			defer sig.OnRelease()
		}
		if sig.OnLocked != nil {
			sig.OnLocked()
		}
		if err := c.refusedByMark(ctx, sub.SessionID, markMessage, sig.RefusedByMessage, "a message"); err != nil {
			out, _ = c.errored(t, err)
			return out, false, ""
		}
		return c.resume(ctx, sig, sub, t, opts)
	}()
	if ran {
		// The other harnesses first: a local listener's failure must not
		// keep the turn from theirs.
		if announce != "" {
			if err := c.feed.Announce(context.WithoutCancel(ctx), sub.SessionID, announce); err != nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "chat: announcing a resumed turn to the other harnesses failed",
					slog.String("session_id", sub.SessionID), slog.String("error", err.Error()))
			}
		}
		c.notify(sub.SessionID, out)
	}
	return out, outcomeErr(out)
}

// signalRecorded returns the outcome recorded under the signal's request
// id in its session (ok false when the signal has no request id or no
// session, or nothing is recorded under it). When the request id
// answered another decision (another payload, or another signal id), it
// fails with an error wrapping ErrMessageIDReused.
func (c *Harness) signalRecorded(ctx context.Context, sig Signal) (Outcome, bool, error) {
	if sig.RequestID == "" || sig.SessionID == "" {
		return nil, false, nil
	}
	return c.recordedSignal(ctx, sig.SessionID, sig)
}

// recordedSignal reads the outcome recorded under sig's request id in
// the session, as signalRecorded.
func (c *Harness) recordedSignal(ctx context.Context, sessionID string, sig Signal) (Outcome, bool, error) {
	o, ok, err := c.recorded(ctx, sessionID, markSignal+sig.RequestID)
	if err != nil || !ok {
		return nil, false, err
	}
	if !sameSignal(o, sig) {
		return nil, false, fmt.Errorf("%w: request %q in session %q took another decision", ErrMessageIDReused, sig.RequestID, sessionID)
	}
	return o, true, nil
}

// ReplaySignal returns the outcome recorded for the resume that
// sig.RequestID already made in sig.SessionID (Replayed set), as a
// retransmitted Signal would, without resolving the signal, taking the
// session's lock or running anything. The error wraps ErrNotRecorded
// when no resume is recorded under the request id, ErrMessageIDReused
// when it took another decision (another payload, or another signal id
// when sig names one: a retransmission carries the same decision), and
// is a session_load_failed error when the store fails.
func (c *Harness) ReplaySignal(ctx context.Context, sig Signal) (Outcome, error) {
	if err := checkID("the request id", sig.RequestID); err != nil {
		return nil, err
	}
	if sig.RequestID == "" || sig.SessionID == "" {
		return nil, fmt.Errorf("%w: a look-up needs a request id and a session id", ErrNotRecorded)
	}
	o, ok, err := c.signalRecorded(ctx, sig)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: request %q in session %q", ErrNotRecorded, sig.RequestID, sig.SessionID)
	}
	return o, nil
}

// resume runs a resolved signal's turn under the session's lock; ran
// reports whether a turn ran (and its outcome goes to the listeners);
// announce, when set, is the mark its outcome is recorded under for the
// other harnesses of the Feed.
func (c *Harness) resume(ctx context.Context, sig Signal, sub harness.Subscription, t Turn, opts []graph.InvokeOption) (Outcome, bool, string) {
	out, ran, key := c.resumeTurn(ctx, sig, sub, t, opts)
	if _, failed := out.(*Errored); failed || !ran {
		key = "" // an errored turn stores nothing: nothing to read back
	}
	return out, ran, key
}

func (c *Harness) resumeTurn(ctx context.Context, sig Signal, sub harness.Subscription, t Turn, opts []graph.InvokeOption) (Outcome, bool, string) {
	var w turnWrite
	w.resumed = true
	w.calls, w.key = &c.calls, sub.SessionID
	mctx, m := withMeter(ctx)
	w.meter = m
	var announce string
	if c.feed != nil && c.marker != nil {
		announce = markFed + uuid.New()
		w.marks = append(w.marks, announce)
	}
	if sig.RequestID != "" {
		if o, ok, err := c.recordedSignal(ctx, sub.SessionID, sig); err != nil {
			o, _ := c.errored(t, err)
			return o, false, ""
		} else if ok {
			return o, false, ""
		}
		w.marks = append(w.marks, markSignal+sig.RequestID)
		w.signal = &signalRef{ID: sub.SignalID, Sum: digestPayload(sig.Payload)}
	}
	if sig.RequestAlias != "" {
		if err := c.refusedByMark(ctx, sub.SessionID, markSignal, sig.RequestAlias, "another request"); err != nil {
			o, _ := c.errored(t, err)
			return o, false, ""
		}
		w.marks = append(w.marks, markSignal+sig.RequestAlias)
	}
	if sig.RecordKey != "" {
		w.marks = append(w.marks, markRecord+sig.RecordKey)
	}
	if key, ok := decidedMark(sub.SignalID); ok && c.marker != nil {
		w.decided = key
		w.marks = append(w.marks, key)
	}
	goneBecause := func(msg string, cause error) (Outcome, bool, string) {
		o, _ := c.errored(t, &harness.Error{Cat: errcat.HarnessSignalCorrelationFailed, Msg: msg, Err: cause})
		return o, false, ""
	}
	gone := func(msg string) (Outcome, bool, string) { return goneBecause(msg, nil) }
	// While this signal waited for the session, another may have resumed
	// the turn, a message superseded it, or the session was deleted.
	_, rerr := c.h.Resolve(ctx, harness.SignalRef{InvocationID: sub.InvocationID, SignalID: sub.SignalID})
	if ok, err := c.isMarked(ctx, sub.SessionID, markSuperseded+sub.InvocationID); err == nil && ok {
		// A message superseded the turn (before this signal got the
		// session, or before it was retired): no decision took effect.
		if rerr == nil {
			c.retire(ctx, []harness.Subscription{sub})
		}
		return goneBecause("the suspended turn was superseded by a later message", ErrSuperseded)
	}
	if rerr != nil {
		return gone("no suspended turn awaits the signal (it was already answered, superseded or deleted)")
	}
	invOpts := append(opts[:len(opts):len(opts)], graph.RefuseStaleResume())
	invOpts = append(invOpts, graph.WithSessionHooks(&w))
	ho, _ := c.h.Resume(mctx, sub, sig.Payload, invOpts...)
	if ho.Status == graph.Errored && ho.Category == errcat.SuspensionRecordInvalid {
		if errors.Is(ho.Err, graph.ErrStaleResume) {
			// The session moved on since the suspension and no later
			// message superseded it (that was checked above): an earlier
			// resume's decision took effect before the turn failed.
			return goneBecause("the decision on this call was already given and took effect", ErrDecisionTookEffect)
		}
		return gone("no suspended turn awaits the signal (it was already answered, superseded or deleted)")
	}
	out := c.outcome(ho, true)
	m.stamp(out)
	ran := ho.Result != nil && !ho.Result.Start.IsZero() && ho.Category != errcat.SuspensionResumePayloadInvalid
	if ran && c.marker == nil && c.idem != nil {
		if _, failed := out.(*Errored); !failed {
			out.Info().signal = w.signal
			for _, k := range w.marks {
				c.idem.put(sub.SessionID, k, out)
			}
		}
	}
	return out, ran, announce
}

// Resolve finds the suspended invocation sig would resume (its
// signal id, invocation id and session), as Signal does first, without
// resuming it or taking the session: a caller that records a resume (a
// run) looks it up first. An ambiguous look-up in a session
// (harness.ErrAmbiguousSignal: a turn of the session between writing
// the paused record of its own suspension and releasing the one it
// superseded, on stores that do not write both with the session) is
// made again once the session is free (within sig.Wait and
// sig.LockWait). The errors are the harness's (Harness().Resolve).
func (c *Harness) Resolve(ctx context.Context, sig Signal) (harness.Subscription, error) {
	ref := harness.SignalRef{SignalID: sig.SignalID, SessionID: sig.SessionID, InvocationID: sig.InvocationID}
	sub, err := c.h.Resolve(ctx, ref)
	if err != nil && sig.SessionID != "" && errors.Is(err, harness.ErrAmbiguousSignal) {
		if unlock, lerr := c.lockWaiting(ctx, sig.Wait, sig.LockWait, sig.SessionID); lerr == nil {
			sub, err = c.h.Resolve(ctx, ref)
			unlock()
		}
	}
	return sub, err
}

// ErrDecisionTookEffect is the cause of the harness_signal_correlation_failed
// outcome of a signal whose suspended turn a resume already took up and
// did not finish: the decision given then took effect (an approved call
// ran, its result is in the history) before that resume failed or its
// process died, so no decision can be given again and the turn's answer
// was never written; a new message goes on with the conversation.
// errors.Is(outcome.Err, ErrDecisionTookEffect) tells it from a signal
// that matches no suspended turn at all.
var ErrDecisionTookEffect = errors.New("chat: the decision on this call already took effect")

// ErrSuperseded is the cause of the harness_signal_correlation_failed
// outcome of a signal whose suspended turn a later message superseded
// while the signal waited for the session (Config.SupersededResult
// closed its calls): no decision on it took effect, none can now, and
// the message goes on with the conversation. errors.Is(outcome.Err,
// ErrSuperseded) tells it from a signal that lost to another decision.
var ErrSuperseded = errors.New("chat: a later message superseded the suspended turn")

// listener is one Subscribe registration.
type listener struct {
	fn func(Outcome)
}

// Subscribe registers fn for the outcomes of the session's resumed turns
// (harness-chat §8.2): fn runs once per resumed turn, with its Completed,
// Errored or again-Suspended outcome, never for the turn that suspended
// (Send returned that). Callbacks run in the goroutine that delivered the
// signal, after the session is released, so a callback may call Send.
// A callback that panics is logged (Config.Logger) and recovered: the
// session's other listeners, and the other harnesses' (the Feed), get
// the outcome all the same. The returned function unsubscribes; it is
// idempotent.
func (c *Harness) Subscribe(sessionID string, fn func(Outcome)) (unsubscribe func()) {
	l := &listener{fn: fn}
	c.lmu.Lock()
	c.listeners[sessionID] = append(c.listeners[sessionID], l)
	c.lmu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.lmu.Lock()
			defer c.lmu.Unlock()
			ls := c.listeners[sessionID]
			for i, x := range ls {
				if x == l {
					ls = append(ls[:i:i], ls[i+1:]...)
					break
				}
			}
			if len(ls) == 0 {
				delete(c.listeners, sessionID)
			} else {
				c.listeners[sessionID] = ls
			}
		})
	}
}

// maxQueuedOutcomes bounds the resumed outcomes queued for one session's
// next Send (DeliverResumedOnSend).
const maxQueuedOutcomes = 16

// notify hands a resumed turn's outcome to the session's listeners, or,
// with DeliverResumedOnSend and no listener, queues it for the next Send.
func (c *Harness) notify(sessionID string, out Outcome) {
	c.lmu.Lock()
	ls := c.listeners[sessionID]
	if len(ls) == 0 && c.deliver {
		q := append(c.queued[sessionID], out)
		if len(q) > maxQueuedOutcomes { // the oldest go: their replies are in the history
			q = append(q[:0:0], q[len(q)-maxQueuedOutcomes:]...)
		}
		c.queued[sessionID] = q
	}
	c.lmu.Unlock()
	for _, l := range ls {
		c.deliverTo(sessionID, l.fn, out)
	}
}

// deliverTo hands out to a listener: one that panics is logged, and the
// others (and the feed's loop, which delivers the other harnesses'
// turns) go on.
func (c *Harness) deliverTo(sessionID string, fn func(Outcome), out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			c.log.LogAttrs(context.Background(), slog.LevelError, "chat: a listener panicked",
				slog.String("session_id", sessionID), slog.Any("panic", r))
		}
	}()
	fn(out)
}

// takeQueued removes and returns the session's undelivered resumed
// outcomes.
func (c *Harness) takeQueued(sessionID string) []Outcome {
	if !c.deliver {
		return nil
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	q := c.queued[sessionID]
	delete(c.queued, sessionID)
	return q
}

// DecisionTookEffect reports whether a resume consumed a decision on
// signal signalID in the session (recorded with the resume's session
// writes, its interim saves included, when the session store records
// marks: session.Marker) and the session's history holds a result of
// tool call callID, the call the signal decides, that the decision gave:
// a result other than those the harness closes a call with that nobody
// decided (Config.SupersededResult, Config.CancelledResult,
// UnansweredResult). A signal that finds no suspended turn awaiting it
// uses it to tell a decision that was already given and took effect
// (another signal's, or its own in a resume that then failed:
// cancelled, or its session lost after the approved call ran) from one
// that never will (ErrDecisionTookEffect). Without the mark a result of
// the call is not a decision's: a call of that id that needed none (a
// model numbering its calls per conversation, in a session deleted and
// begun again under its id). When invocationID is set (the signal named
// the suspended invocation it answers) the decision must have been
// consumed by that invocation: a signal naming one that a delete
// removed is not answered by a decision its session's next conversation
// took under the same signal id. The mark lasts the store's mark
// retention (a day by default); on a store that records no marks, the
// history alone tells.
func (c *Harness) DecisionTookEffect(ctx context.Context, sessionID, signalID, callID, invocationID string) (bool, error) {
	if callID == "" || signalID == "" {
		return false, nil
	}
	if c.marker != nil {
		key, ok := decidedMark(signalID)
		if !ok {
			return false, nil
		}
		raw, err := c.marker.LoadMark(ctx, sessionID, key)
		switch {
		case errors.Is(err, session.ErrNotFound):
			return false, nil
		case err != nil:
			return false, loadFailed(ctx, "chat: cannot read whether the decision took effect", err)
		}
		var rec decidedRecord // or an outcome record: both carry invocation_id
		if invocationID != "" && (json.Unmarshal(raw, &rec) != nil || rec.InvocationID != invocationID) {
			return false, nil
		}
	}
	st, err := c.h.Graph().SessionState(ctx, sessionID)
	if err != nil {
		return false, err
	}
	msgs := Messages.Get(st)
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Role != llm.RoleTool || m.ToolCallID != callID {
			continue
		}
		switch m.Text() {
		case c.superseded, c.cancelled, UnansweredResult:
			return false, nil
		}
		return true, nil
	}
	return false, nil
}

// decidedMark returns the key of the mark recording that a resume
// consumed a decision on signalID, and whether a mark key can hold it
// (valid UTF-8, within session.MaxMarkKeyLength with its prefix). A
// graph's own signal ids are not validated: one that cannot be a mark
// key is not marked, rather than failing every resume's session write.
func decidedMark(signalID string) (string, bool) {
	key := markDecided + signalID
	return key, session.ValidateMarkKey(key) == nil
}
