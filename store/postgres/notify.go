package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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

// listenChannel listens to channel on a connection of its own until it
// fails or ctx ends: connected is called once listening, each payload
// goes to fn. An error of connected ends the listening with it.
func (s *Store) listenChannel(ctx context.Context, channel string, connected func() error, fn func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pc.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
		return err
	}
	if err := connected(); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}

// cancelChannel prefixes the NOTIFY channel of cancel requests (the
// schema's suffix follows, see Store.cancels): the payload is the
// tenant, notifySep and the run id.
const cancelChannel = "armature_cancel"

// RequestCancel asks every server on the database (any replica) to
// cancel the live run runID of tenant: the one running it does, the
// others have nothing to cancel. A request is a notification, not a
// row: a replica whose listening connection is down when it is made
// misses it (the caller may ask again). It implements
// server.CancelRelay.
func (s *Store) RequestCancel(ctx context.Context, tenant, runID string) error {
	payload := tenant + notifySep + runID
	if len(payload) > 7800 { // NOTIFY's payload limit is 8000 bytes
		return fmt.Errorf("postgres: request cancel: tenant and run id too long (%d bytes)", len(payload))
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.cancels, payload); err != nil {
		return fmt.Errorf("postgres: request cancel: %w", redact(err))
	}
	return nil
}

// ListenCancels calls fn(tenant, runID) for each cancel request made on
// the database (RequestCancel, by any replica, this one included) until
// ctx ends (its error is then returned), reconnecting with backoff when
// the connection drops. It implements server.CancelRelay.
func (s *Store) ListenCancels(ctx context.Context, fn func(tenant, runID string)) error {
	return s.listenLoop(ctx, "cancel requests", func(connected func()) error {
		return s.listenChannel(ctx, s.cancels, func() error { connected(); return nil }, func(payload string) {
			if tenant, runID, ok := strings.Cut(payload, notifySep); ok {
				fn(tenant, runID)
			}
		})
	})
}

// resumedChannel prefixes the NOTIFY channel of ResumeFeed
// announcements (the schema's suffix follows, see Store.resumed): the
// payload is the announcement's row id, the announcing feed's origin,
// the session id and the mark key, separated by notifySep.
const resumedChannel = "armature_resumed"

// AnnouncementWindow is how long a ResumeFeed announcement stays in the
// database: a feed whose listening connection was down for less than
// this reads, once reconnected, the announcements it missed.
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

// Announce notifies the other feeds that a resumed turn of the session
// committed with its outcome recorded under key: one statement stores
// the announcement and notifies.
func (f *ResumeFeed) Announce(ctx context.Context, sessionID, key string) error {
	rest := f.origin + notifySep + sessionID + notifySep + key
	if len(rest) > 7800 { // NOTIFY's payload limit is 8000 bytes
		return fmt.Errorf("postgres: announce: session id and key too long (%d bytes)", len(rest))
	}
	now := f.s.now()
	if _, err := f.s.pool.Exec(ctx, `WITH a AS (
			INSERT INTO resume_announcements (origin, session_id, key, at) VALUES ($1, $2, $3, $4) RETURNING id)
		SELECT pg_notify($5, (SELECT id FROM a)::text || $6)`,
		f.origin, sessionID, key, unixNano(now), f.s.resumed, notifySep+rest); err != nil {
		return fmt.Errorf("postgres: announce: %w", redact(err))
	}
	if f.sent.Add(1)%64 == 1 {
		if _, err := f.s.pool.Exec(ctx, `DELETE FROM resume_announcements WHERE at < $1`,
			unixNano(now.Add(-AnnouncementWindow))); err != nil {
			f.s.log.WarnContext(ctx, "postgres: pruning resume announcements failed", "error", redact(err).Error())
		}
	}
	return nil
}

// Listen calls fn(sessionID, key) for each announcement of another feed
// until ctx ends, reconnecting with backoff when the connection drops.
// After a reconnection it reads the announcements stored while it was
// down (within AnnouncementWindow) and delivers those it has not; each
// announcement is delivered once, whichever way it arrives. Those made
// before Listen first connected are not delivered.
func (f *ResumeFeed) Listen(ctx context.Context, fn func(sessionID, key string)) error {
	seen := map[int64]int64{} // announcement id -> at, within the window
	// Until the first catch-up, announcements made before start (before
	// the first LISTEN) are not this feed's to deliver.
	first, start := true, int64(0)
	deliver := func(id int64, at int64, origin, sessionID, key string) {
		if _, ok := seen[id]; ok {
			return
		}
		seen[id] = at
		if origin != f.origin {
			fn(sessionID, key)
		}
	}
	catchUp := func() error {
		since := unixNano(f.s.now().Add(-AnnouncementWindow))
		for id, at := range seen {
			if at < since {
				delete(seen, id)
			}
		}
		rows, err := f.s.pool.Query(ctx, `SELECT id, at, origin, session_id, key FROM resume_announcements WHERE at >= $1 ORDER BY id`, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id, at             int64
				origin, sess, mark string
			)
			if err := rows.Scan(&id, &at, &origin, &sess, &mark); err != nil {
				return err
			}
			if first && at < start {
				seen[id] = at // announced before this feed listened
				continue
			}
			deliver(id, at, origin, sess, mark)
		}
		first = false
		return rows.Err()
	}
	return f.s.listenLoop(ctx, "resume announcements", func(connected func()) error {
		if first {
			start = unixNano(f.s.now())
		}
		return f.s.listenChannel(ctx, f.s.resumed, func() error {
			if err := catchUp(); err != nil {
				return err
			}
			connected()
			return nil
		}, func(payload string) {
			idText, rest, ok := strings.Cut(payload, notifySep)
			id, err := strconv.ParseInt(idText, 10, 64)
			if !ok || err != nil {
				return
			}
			origin, rest, ok := strings.Cut(rest, notifySep)
			if !ok {
				return
			}
			if sessionID, key, ok := strings.Cut(rest, notifySep); ok {
				deliver(id, unixNano(f.s.now()), origin, sessionID, key)
			}
		})
	})
}
