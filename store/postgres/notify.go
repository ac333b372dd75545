package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/armature-go/armature/runtime"
)

// eventsChannel prefixes the NOTIFY channel of stored run events (the
// schema's suffix follows, see Store.events): the payload is the tenant,
// a unit separator (0x1f) and the session id.
const eventsChannel = "armature_events"

// notifySep separates the tenant from the session id in a payload.
const notifySep = "\x1f"

// Listen calls fn(tenant, sessionID) whenever a run store on the
// database (any replica's) has stored events of that session, until ctx
// ends (its error is then returned). Notifications name rows, which stay
// the truth: after every (re)connection of its listening connection,
// when notifications may have been missed, it calls fn("", "") — read
// everything again. It reconnects with backoff when the connection
// drops. It implements server.EventNotifier.
func (s *Store) Listen(ctx context.Context, fn func(tenant, sessionID string)) error {
	return s.listenLoop(ctx, "event notifications", func(connected func()) error {
		return s.listenChannel(ctx, s.events, func() error { connected(); fn("", ""); return nil }, func(payload string) {
			if tenant, sessionID, ok := strings.Cut(payload, notifySep); ok {
				fn(tenant, sessionID)
			}
		})
	})
}

// listenLoop runs once (one connection's listening) until ctx ends,
// again after each failure with a backoff that connected resets.
func (s *Store) listenLoop(ctx context.Context, what string, once func(connected func()) error) error {
	backoff := 100 * time.Millisecond
	for {
		err := once(func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.log.WarnContext(ctx, "postgres: "+what+" interrupted; reconnecting", "error", redact(err).Error(), "in", backoff)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenProbe is how long a listening connection may stay silent before
// it is pinged: a connection whose path died without a word (a
// half-open TCP connection, a stalled backend, a proxy that dropped it)
// would otherwise be waited on for ever, its notices lost while the
// replica looks ready. A ping that fails within listenProbe ends the
// connection, and the listener connects again.
const listenProbe = 10 * time.Second

// listenChannel listens to channel on a connection of its own until it
// fails or ctx ends: connected is called once listening, each payload
// goes to fn. An error of connected ends the listening with it. A
// connection silent for listenProbe is pinged, and given up when the
// ping fails or takes longer than listenProbe.
func (s *Store) listenChannel(ctx context.Context, channel string, connected func() error, fn func(payload string)) error {
	cctx, cancel := context.WithTimeout(ctx, listenProbe)
	conn, err := pgx.ConnectConfig(cctx, s.pc.ConnConfig.Copy())
	if err == nil {
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(cctx, `LISTEN `+channel)
	}
	cancel()
	if err != nil {
		return err
	}
	if err := connected(); err != nil {
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenProbe)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			fn(n.Payload)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err):
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, listenProbe)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the listening connection did not answer a ping: %w", err)
		}
	}
}

// cancelChannel prefixes the NOTIFY channel of cancel requests (the
// schema's suffix follows, see Store.cancels): the payload is the
// tenant, notifySep and the run id.
const cancelChannel = "armature_cancel"

// cancels is the log of this schema's cancel requests.
func (s *Store) cancelLog() noticeLog {
	return noticeLog{s: s, what: "request cancel", table: "cancel_requests", channel: s.cancels, columns: []string{"tenant", "run_id"}}
}

// RequestCancel asks every server on the database (any replica) to
// cancel the live run runID of tenant: the one running it does, the
// others have nothing to cancel. A request is a row as well as a
// notification: a replica whose listening connection was down when it
// was made reads it once reconnected (within AnnouncementWindow). It
// implements server.CancelRelay.
func (s *Store) RequestCancel(ctx context.Context, tenant, runID string) error {
	return s.cancelLog().post(ctx, &s.cancelsSent, tenant, runID)
}

// ListenCancels calls fn(tenant, runID) for each cancel request made on
// the database (RequestCancel, by any replica, this one included) until
// ctx ends (its error is then returned), reconnecting with backoff when
// the connection drops; once reconnected it delivers the requests made
// while it was down (each request is delivered once; those made before
// it first listened are not). It implements server.CancelRelay.
func (s *Store) ListenCancels(ctx context.Context, fn func(tenant, runID string)) error {
	return s.cancelLog().listen(ctx, func(v []string) { fn(v[0], v[1]) })
}

// watchChannel prefixes the NOTIFY channel of watch announcements (the
// schema's suffix follows, see Store.watches). A payload is the
// announcing Store's replica id, then for each session watchSep, the
// tenant, notifySep and the session id.
const watchChannel = "armature_watch"

// watchSep separates the sessions of a watch announcement.
const watchSep = "\x1e"

// watchPayload bounds a watch announcement's payload, under NOTIFY's
// limit of 8000 bytes: more sessions go in more announcements.
const watchPayload = 7800

// AnnounceWatch tells every other replica on the database that the
// sessions are watched live here (a notice, in as few as fit NOTIFY's
// payload limit; no row: the watching server repeats it while it
// watches, so one lost to a listener's reconnection only delays a
// turn's events to its end). It implements server.WatchRelay.
func (s *Store) AnnounceWatch(ctx context.Context, sessions []runtime.SessionRef) error {
	head := strconv.FormatInt(s.replica, 36)
	var b strings.Builder
	send := func() error {
		if b.Len() == 0 {
			return nil
		}
		_, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.watches, head+b.String())
		b.Reset()
		if err != nil {
			return fmt.Errorf("postgres: announce watch: %w", redact(err))
		}
		return nil
	}
	for _, ref := range sessions {
		if ref.Tenant == "" && ref.SessionID == "" || strings.ContainsAny(ref.Tenant+ref.SessionID, notifySep+watchSep) {
			continue // not a session any run names (ids hold no control characters)
		}
		n := len(watchSep) + len(ref.Tenant) + len(notifySep) + len(ref.SessionID)
		if len(head)+n > watchPayload {
			continue // longer than any id may be
		}
		if len(head)+b.Len()+n > watchPayload {
			if err := send(); err != nil {
				return err
			}
		}
		b.WriteString(watchSep)
		b.WriteString(ref.Tenant)
		b.WriteString(notifySep)
		b.WriteString(ref.SessionID)
	}
	return send()
}

// watchAsk is the body of a watch notice that asks the other replicas
// to announce at once the sessions they watch (after the origin and
// watchSep): a listener that (re)connected may have missed their
// announcements.
const watchAsk = "?"

// ListenWatches calls fn(tenant, sessionID) for each session another
// replica on the database announced watched (AnnounceWatch) until ctx
// ends (its error is then returned), reconnecting with backoff when the
// connection drops. Each time it (re)connects it asks the other
// replicas to announce again at once, and it calls fn("", "") when
// another replica asks so: the server announces the sessions it
// watches. It implements server.WatchRelay.
func (s *Store) ListenWatches(ctx context.Context, fn func(tenant, sessionID string)) error {
	self := strconv.FormatInt(s.replica, 36)
	return s.listenLoop(ctx, "watch announcements", func(connected func()) error {
		ask := func() error {
			connected()
			if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.watches, self+watchSep+watchAsk); err != nil {
				s.log.WarnContext(ctx, "postgres: asking the other replicas for their watched sessions failed", "error", redact(err).Error())
			}
			return nil
		}
		return s.listenChannel(ctx, s.watches, ask, func(payload string) {
			origin, rest, _ := strings.Cut(payload, watchSep)
			switch {
			case origin == self || rest == "":
				return
			case rest == watchAsk:
				fn("", "")
				return
			}
			for ref := range strings.SplitSeq(rest, watchSep) {
				if tenant, sessionID, ok := strings.Cut(ref, notifySep); ok {
					fn(tenant, sessionID)
				}
			}
		})
	})
}

// resumedChannel prefixes the NOTIFY channel of ResumeFeed
// announcements (the schema's suffix follows, see Store.resumed): the
// payload is the announcement's row id, the announcing feed's origin,
// the session id and the mark key, separated by notifySep.
const resumedChannel = "armature_resumed"

// AnnouncementWindow is how long a ResumeFeed announcement or a cancel
// request stays in the database: a listener whose connection was down
// for less than this reads, once reconnected, the ones it missed.
const AnnouncementWindow = 10 * time.Minute

// ResumeFeed is a chat.ResumeFeed over the database's LISTEN/NOTIFY: the
// announcements of every other feed (on any replica) reach Listen. Each
// announcement is also a row (kept for AnnouncementWindow), the truth
// the notification names: after a reconnection, Listen delivers the rows
// it missed. Get one per chat harness with [Store.ResumeFeed].
type ResumeFeed struct {
	s      *Store
	origin string
	sent   atomic.Uint64 // announcements made: every 64th prunes old rows
}

// ResumeFeed returns a new feed, with an origin of its own: its
// announcements reach every other feed, not itself.
func (s *Store) ResumeFeed() *ResumeFeed {
	return &ResumeFeed{s: s, origin: strconv.FormatUint(rand.Uint64(), 36)}
}

// log is the log of this schema's resume announcements.
func (f *ResumeFeed) log() noticeLog {
	return noticeLog{s: f.s, what: "announce", table: "resume_announcements", channel: f.s.resumed, columns: []string{"origin", "session_id", "key"}}
}

// Announce notifies the other feeds that a resumed turn of the session
// committed with its outcome recorded under key: one statement stores
// the announcement and notifies.
func (f *ResumeFeed) Announce(ctx context.Context, sessionID, key string) error {
	return f.log().post(ctx, &f.sent, f.origin, sessionID, key)
}

// Listen calls fn(sessionID, key) for each announcement of another feed
// until ctx ends, reconnecting with backoff when the connection drops.
// After a reconnection it reads the announcements stored while it was
// down (within AnnouncementWindow) and delivers those it has not; each
// announcement is delivered once, whichever way it arrives. Those made
// before Listen first connected are not delivered.
func (f *ResumeFeed) Listen(ctx context.Context, fn func(sessionID, key string)) error {
	return f.log().listen(ctx, func(v []string) {
		if v[0] != f.origin {
			fn(v[1], v[2])
		}
	})
}
