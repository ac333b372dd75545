package adk

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/adk/v2/session"

	"github.com/armature-go/armature/errcat"
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
	err := s.Service.AppendEvent(ctx, sess, ev)
	if err != nil && strings.Contains(err.Error(), staleSession) {
		// Another replica's turn wrote the session since this turn read
		// it: this replica lost the session's lock while the turn ran.
		return errcat.Wrap(errcat.SessionWriteConflict, "adk: another turn wrote the session meanwhile", err)
	}
	if err == nil && ev != nil && !ev.Partial {
		if n, ok := ctx.Value(appendsKey{}).(*appends); ok {
			n.note(ev.Timestamp)
		}
	}
	return err
}

// staleSession is the text of the error ADK-Go's database session
// service fails an append with when the session was written since it
// was read (ADK-Go gives it no sentinel).
const staleSession = "stale session error"

// appends notes the time of the last event a turn appended to its
// session through ordered: on the in-memory session service, which
// stores an event with the time it was appended with, that is the
// session's Position once the turn is in it, without reading the
// session again (a lookup among every session the service holds).
type appends struct {
	mu   sync.Mutex
	last time.Time
	n    int
}

type appendsKey struct{}

// noteAppends returns ctx noting the appends made under it in a.
func noteAppends(ctx context.Context, a *appends) context.Context {
	return context.WithValue(ctx, appendsKey{}, a)
}

func (a *appends) note(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 || at.After(a.last) {
		a.last = at
	}
	a.n++
}

// position returns the Position the noted appends left the session at,
// and whether any was noted.
func (a *appends) position() (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last.UnixMicro(), a.n > 0
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
