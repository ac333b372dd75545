package adk

import (
	"context"
	"time"

	"google.golang.org/adk/v2/session"
)

// ordered is an ADK-Go session service whose sessions' events are timed
// in the order they are appended: an event timed no later than its
// session's last update (the previous event's time) is timed a
// microsecond (the database's precision) after it. ADK-Go times an
// event by the clock of the process that made it and orders a session's
// events by their time; replicas sharing a session database whose
// clocks disagree, or a clock stepped back, would otherwise put a turn
// before the turn it follows, and the model would be sent the
// conversation out of order. The adapter's cursor (Engine.Position, the
// time of the last event) then only grows too, so a rollback to it
// never keeps what followed it.
type ordered struct{ session.Service }

func (s ordered) AppendEvent(ctx context.Context, sess session.Session, ev *session.Event) error {
	if ev != nil && sess != nil {
		if floor := sess.LastUpdateTime().Truncate(time.Microsecond).Add(time.Microsecond); ev.Timestamp.Before(floor) {
			ev.Timestamp = floor
		}
	}
	return s.Service.AppendEvent(ctx, sess, ev)
}

// unordered returns the session service without ordered's timing: for
// the adapter's own writes of events whose times it chose (a seeded
// history, the events a rollback keeps).
func (e *Engine) unordered() session.Service {
	if o, ok := e.sessions.(ordered); ok {
		return o.Service
	}
	return e.sessions
}
