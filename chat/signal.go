package chat

import (
	"context"
	"sync"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
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
}

// Signal resumes the suspended turn the signal is for (harness §3.3,
// harness-chat §8.2): it finds the paused invocation through the
// coordinator, waits for the session's turn like Send, resumes the
// invocation with the payload, and delivers the resumed turn's outcome
// to the session's listeners — exactly once per listener — after the
// session is released. The outcome is also returned.
//
// A signal that matches no paused turn, or whose payload does not fit the
// state schema, resumes nothing and notifies no listener: the outcome is
// Errored (harness_signal_correlation_failed, suspension_record_invalid
// or suspension_resume_payload_invalid, all user-correctable; a turn
// whose payload was invalid stays suspended).
func (c *Harness) Signal(ctx context.Context, sig Signal, opts ...graph.InvokeOption) (Outcome, error) {
	t := Turn{SessionID: sig.SessionID, Path: harness.PathSignalResume, Resumed: true}
	sub, err := c.h.Resolve(ctx, harness.SignalRef{SignalID: sig.SignalID, SessionID: sig.SessionID, InvocationID: sig.InvocationID})
	if err != nil {
		return c.errored(t, err)
	}
	t.SessionID, t.InvocationID = sub.SessionID, sub.InvocationID
	unlock, err := c.lock(ctx, sub.SessionID)
	if err != nil {
		return c.errored(t, err)
	}
	ho, _ := c.h.Resume(ctx, sub, sig.Payload, opts...)
	out := c.outcome(ho, true)
	ran := ho.Result != nil && !ho.Result.Start.IsZero() && ho.Category != errcat.SuspensionRecordInvalid
	unlock()
	if ran {
		c.notify(sub.SessionID, out)
	}
	return out, outcomeErr(out)
}

// listener is one Subscribe registration.
type listener struct {
	fn func(Outcome)
}

// Subscribe registers fn for the outcomes of the session's resumed turns
// (harness-chat §8.2): fn runs once per resumed turn, with its Completed,
// Errored or again-Suspended outcome, never for the turn that suspended
// (Send returned that). Callbacks run in the goroutine that delivered the
// signal, after the session is released, so a callback may call Send.
// The returned function unsubscribes; it is idempotent.
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

// notify hands a resumed turn's outcome to the session's listeners, or,
// with DeliverResumedOnSend and no listener, queues it for the next Send.
func (c *Harness) notify(sessionID string, out Outcome) {
	c.lmu.Lock()
	ls := c.listeners[sessionID]
	if len(ls) == 0 && c.deliver {
		c.queued[sessionID] = append(c.queued[sessionID], out)
	}
	c.lmu.Unlock()
	for _, l := range ls {
		l.fn(out)
	}
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
