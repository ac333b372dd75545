package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/session"
)

// LockerConfig configures a [Locker]. The zero value is usable.
type LockerConfig struct {
	// TTL is how long a lease lasts without renewal: the time after which
	// the lease of a crashed holder lapses. The holder renews it every
	// TTL/3 while it runs. Default 15s.
	TTL time.Duration
	// MaxPoll bounds the wait between attempts to take a held lease.
	// Default 50ms.
	MaxPoll time.Duration
}

// Locker serializes the turns of one session across every process (and
// every Store) sharing the database file (processes share it only when
// each opens it with Config.Shared): it implements chat.Locker with
// leases in the session_leases table. A lease is taken in one write
// transaction and released in another, so a serialized turn costs two
// extra small transactions; waiters poll with jittered backoff, so
// across processes the order is not FIFO (within one process the chat
// harness's own lock keeps FIFO order). A holder that crashes stops
// renewing, and its lease lapses after TTL.
type Locker struct {
	s   *Store
	ttl time.Duration
	max time.Duration
}

// SessionLocker returns a Locker over the store's file.
func (s *Store) SessionLocker(cfg LockerConfig) *Locker {
	if cfg.TTL <= 0 {
		cfg.TTL = 15 * time.Second
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = 50 * time.Millisecond
	}
	return &Locker{s: s, ttl: cfg.TTL, max: cfg.MaxPoll}
}

// Lock takes the session's lease, waiting while another holder has it,
// until ctx ends. The returned function releases it (idempotent).
func (l *Locker) Lock(ctx context.Context, sessionID string) (func(), error) {
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("sqlite: lock: %w", err)
	}
	owner := uuid.New()
	wait := time.Millisecond
	for {
		ok, err := l.try(ctx, sessionID, owner)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("sqlite: lock %q: %w", sessionID, ctx.Err())
			}
			return nil, err
		}
		if ok {
			break
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("sqlite: lock %q: %w", sessionID, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, l.max)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // renew while held
		defer wg.Done()
		tick := time.NewTicker(l.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := l.renew(sessionID, owner); err != nil {
					l.s.log.Warn("sqlite: renewing a session lease failed", "session_id", sessionID, "error", err)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
			if err := l.release(sessionID, owner); err != nil {
				l.s.log.Warn("sqlite: releasing a session lease failed; it lapses after its TTL",
					"session_id", sessionID, "error", err)
			}
		})
	}, nil
}

// try takes the lease if it is free or lapsed.
func (l *Locker) try(ctx context.Context, sessionID, owner string) (bool, error) {
	now := l.s.now()
	var n int64
	err := l.s.write(ctx, "lock", sessionID, errcat.SessionSaveFailed, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO session_leases (session_id, owner, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE session_leases.expires_at < ?`, sessionID, owner, nanotime.Of(now.Add(l.ttl)), nanotime.Of(now))
		if err != nil {
			return fmt.Errorf("sqlite: lock %q: %w", sessionID, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: lock %q: %w", sessionID, err)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

func (l *Locker) renew(sessionID, owner string) error {
	return l.exec(sessionID, `UPDATE session_leases SET expires_at = ? WHERE session_id = ? AND owner = ?`,
		nanotime.Of(l.s.now().Add(l.ttl)), sessionID, owner)
}

func (l *Locker) release(sessionID, owner string) error {
	return l.exec(sessionID, `DELETE FROM session_leases WHERE session_id = ? AND owner = ?`, sessionID, owner)
}

// exec runs one statement in a write transaction, detached from any
// caller context so a release is not lost to a cancelled turn.
func (l *Locker) exec(sessionID, query string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.s.write(ctx, "lease", sessionID, errcat.SessionSaveFailed, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}
