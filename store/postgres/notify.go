package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsChannel is the NOTIFY channel of stored run events: the payload
// is the tenant, a unit separator (0x1f) and the session id.
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
		return s.listenChannel(ctx, eventsChannel, func() { connected(); fn("", "") }, func(payload string) {
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
// goes to fn.
func (s *Store) listenChannel(ctx context.Context, channel string, connected func(), fn func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pc.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}

// resumedChannel is the NOTIFY channel of ResumeFeed announcements: the
// payload is the announcing feed's origin, the session id and the mark
// key, separated by notifySep.
const resumedChannel = "armature_resumed"

// ResumeFeed is a chat.ResumeFeed over the database's LISTEN/NOTIFY: the
// announcements of every other feed (on any replica) reach Listen. Get
// one per chat harness with [Store.ResumeFeed].
type ResumeFeed struct {
	s      *Store
	origin string
}

// ResumeFeed returns a new feed, with an origin of its own: its
// announcements reach every other feed, not itself.
func (s *Store) ResumeFeed() *ResumeFeed {
	return &ResumeFeed{s: s, origin: strconv.FormatUint(rand.Uint64(), 36)}
}

// Announce notifies the other feeds that a resumed turn of the session
// committed with its outcome recorded under key.
func (f *ResumeFeed) Announce(ctx context.Context, sessionID, key string) error {
	payload := f.origin + notifySep + sessionID + notifySep + key
	if len(payload) > 7900 { // NOTIFY's payload limit is 8000 bytes
		return fmt.Errorf("postgres: announce: session id and key too long (%d bytes)", len(payload))
	}
	if _, err := f.s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, resumedChannel, payload); err != nil {
		return fmt.Errorf("postgres: announce: %w", redact(err))
	}
	return nil
}

// Listen calls fn(sessionID, key) for each announcement of another feed
// until ctx ends, reconnecting with backoff when the connection drops
// (announcements made meanwhile are not delivered).
func (f *ResumeFeed) Listen(ctx context.Context, fn func(sessionID, key string)) error {
	return f.s.listenLoop(ctx, "resume announcements", func(connected func()) error {
		return f.s.listenChannel(ctx, resumedChannel, connected, func(payload string) {
			origin, rest, ok := strings.Cut(payload, notifySep)
			if !ok || origin == f.origin {
				return
			}
			if sessionID, key, ok := strings.Cut(rest, notifySep); ok {
				fn(sessionID, key)
			}
		})
	})
}
