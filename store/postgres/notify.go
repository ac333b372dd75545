package postgres

import (
	"context"
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
	backoff := 100 * time.Millisecond
	for {
		if err := s.listenOnce(ctx, fn); ctx.Err() != nil {
			return ctx.Err()
		} else if err != nil {
			s.log.WarnContext(ctx, "postgres: event notifications interrupted; reconnecting", "error", redact(err).Error(), "in", backoff)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenOnce listens on one connection until it fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context, fn func(tenant, sessionID string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pc.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+eventsChannel); err != nil {
		return err
	}
	fn("", "") // whatever was stored while not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		tenant, sessionID, ok := strings.Cut(n.Payload, notifySep)
		if ok {
			fn(tenant, sessionID)
		}
	}
}
