package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// LockerConfig configures a Locker.
type LockerConfig struct {
	// MaxHeld bounds the sessions this replica holds at once: each held
	// lock keeps one connection of the locker's own pool. Default 64.
	MaxHeld int32
	// IdleTimeout is how long a connection of the locker's pool that
	// holds no lock is kept for the next one before it is closed (by the
	// pool's health check, which runs every IdleTimeout/2: up to half as
	// long again); default 15s. After a burst of turns of many sessions, the pool
	// would otherwise keep up to MaxHeld connections open (pgxpool's
	// default is 30 minutes), which, with every replica doing the same,
	// takes the database's connections from the replicas' statements.
	IdleTimeout time.Duration
}

// defaultLockIdle is LockerConfig.IdleTimeout's default.
const defaultLockIdle = 15 * time.Second

// Locker serializes the turns of a session across every replica on the
// database (chat.Locker): a session-level advisory lock on the session,
// held on a connection of the locker's own pool for the turn. It writes
// nothing. PostgreSQL queues the waiters of a lock in arrival order, so
// no replica starves (the chat harness keeps its own replica's turns in
// FIFO order before they reach the database), and releases the lock when
// the holder's connection ends: a replica that dies frees its sessions.
// The lock is (lockSpace, a 32-bit keyed hash of the session id, keyed
// by a secret the schema's first replica made and every replica reads):
// two sessions whose ids hash alike share a lock, which only serializes
// them, and a caller who does not know the secret cannot pick a session
// id that shares another tenant's session's lock to hold it up. (The
// hash was an unkeyed FNV-1a before: while replicas of both builds run,
// their turns of one session are not serialized by the lock; their
// writes stay conditional on the version they read.)
//
// A replica that loses its connection mid-turn loses the lock while the
// turn goes on; the turn's writes are conditional on the version it
// loaded, so a turn another replica started meanwhile cannot be
// overwritten: one of the two fails with session_write_conflict.
type Locker struct {
	s    *Store
	cfg  LockerConfig
	once sync.Once
	pool *pgxpool.Pool
	err  error

	mu   sync.Mutex
	held map[*pgxpool.Conn]struct{} // the connections holding locks
}

var _ chat.TryLocker = (*Locker)(nil)

// lockSpace is the advisory locks' first key: Armature's session locks.
const lockSpace = 0x41524d41 // "ARMA"

// SessionLocker returns the Store's chat.Locker. Its pool opens on the
// first Lock; Close closes it.
func (s *Store) SessionLocker(cfg LockerConfig) *Locker {
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = 64
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultLockIdle
	}
	return &Locker{s: s, cfg: cfg, held: map[*pgxpool.Conn]struct{}{}}
}

// lockKey is the session's advisory lock key within lockSpace: the
// first 32 bits of the session id's HMAC-SHA256 under the schema's
// secret.
func (l *Locker) lockKey(sessionID string) int32 {
	h := hmac.New(sha256.New, l.s.lockSecret)
	h.Write([]byte(sessionID))
	var sum [sha256.Size]byte
	return int32(binary.BigEndian.Uint32(h.Sum(sum[:0])))
}

// Lock waits for the session's lock until ctx ends, and returns the
// function that releases it (idempotent).
func (l *Locker) Lock(ctx context.Context, sessionID string) (func(), error) {
	conn, err := l.conn(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	key := l.lockKey(sessionID)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(lockSpace), key); err != nil {
		// A wait cut short by ctx leaves the connection's state unknown:
		// closing it drops whatever it holds.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, l.failed(ctx, sessionID, err)
	}
	return l.hold(conn, key), nil
}

// TryLock takes the session's lock if no replica holds it, without
// waiting (chat.TryLocker): ok reports whether it did, and release frees
// it then (idempotent).
func (l *Locker) TryLock(ctx context.Context, sessionID string) (release func(), ok bool, err error) {
	conn, err := l.conn(ctx, sessionID)
	if err != nil {
		return nil, false, err
	}
	key := l.lockKey(sessionID)
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(lockSpace), key).Scan(&ok); err != nil {
		_ = conn.Conn().Close(context.Background()) // its state unknown, as in Lock
		conn.Release()
		return nil, false, l.failed(ctx, sessionID, err)
	}
	if !ok {
		conn.Release() // it holds nothing
		return nil, false, nil
	}
	return l.hold(conn, key), true, nil
}

// conn validates the session id and acquires a connection of the
// locker's pool (made on first use).
func (l *Locker) conn(ctx context.Context, sessionID string) (*pgxpool.Conn, error) {
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("postgres: lock: %w", err)
	}
	l.once.Do(func() {
		pc := l.s.pc.Copy()
		pc.MaxConns, pc.MinConns, pc.MinIdleConns = l.cfg.MaxHeld, 0, 0
		// Idle connections go after IdleTimeout: the pool's health
		// check, which closes them, runs twice as often.
		pc.MaxConnIdleTime, pc.HealthCheckPeriod = l.cfg.IdleTimeout, max(l.cfg.IdleTimeout/2, 100*time.Millisecond)
		l.pool, l.err = pgxpool.NewWithConfig(context.WithoutCancel(ctx), pc)
	})
	if l.err != nil {
		return nil, errcat.Wrap(errcat.SessionLoadFailed, "postgres: lock", redact(l.err))
	}
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, l.failed(ctx, sessionID, err)
	}
	return conn, nil
}

// hold records conn as holding the lock of key and returns the function
// that releases it (idempotent).
func (l *Locker) hold(conn *pgxpool.Conn, key int32) func() {
	l.mu.Lock()
	l.held[conn] = struct{}{}
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			_, live := l.held[conn]
			delete(l.held, conn)
			l.mu.Unlock()
			if !live {
				return // Close dropped it
			}
			var unlocked bool
			err := conn.QueryRow(context.Background(), `SELECT pg_advisory_unlock($1, $2)`, int32(lockSpace), key).Scan(&unlocked)
			if err != nil || !unlocked {
				_ = conn.Conn().Close(context.Background()) // the server drops the lock with the session
			}
			conn.Release()
		})
	}
}

// failed maps a failure to take a lock.
func (l *Locker) failed(ctx context.Context, sessionID string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("postgres: lock %q: %w", sessionID, errors.Join(ctx.Err(), redact(err)))
	}
	return errcat.Wrap(errcat.SessionLoadFailed, fmt.Sprintf("postgres: lock %q", sessionID), redact(err))
}

// Close closes the locker's pool, closing the connections that hold
// locks: the server releases them (as if the replica had died).
func (l *Locker) Close() {
	l.once.Do(func() { l.err = errors.New("postgres: the locker is closed") })
	l.mu.Lock()
	held := l.held
	l.held = map[*pgxpool.Conn]struct{}{}
	l.mu.Unlock()
	for conn := range held {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}
	if l.pool != nil {
		l.pool.Close()
	}
}
