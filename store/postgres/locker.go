package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// LockerConfig configures a Locker.
//
// A held lock keeps a connection of the locker's own pool for its turn,
// and so does a wait in PostgreSQL's queue for a session another replica
// holds; the pool has two budgets, so that neither kind starves the
// other: MaxHeld connections for the sessions no replica held when the
// turn asked (taken without waiting), MaxWaiting for the waits (and the
// locks they end holding). The pool opens at most MaxHeld + MaxWaiting
// connections. A turn never waits for a connection unbounded: TryLock
// answers that the session is not free at once when every MaxHeld
// connection holds a lock, and Lock waits for a connection as it waits
// for the session, until its context ends (the chat harness's
// Config.LockWait, armature serve's --session-wait: the turn fails with
// chat.ErrSessionBusy, as when another turn held the session).
type LockerConfig struct {
	// MaxHeld bounds the locks this replica takes at once of sessions no
	// replica holds (TryLock, and Lock's tries): each keeps one
	// connection for its turn. Size it for the turns the replica runs at
	// once (armature serve: --max-session-locks, by default --max-turns
	// + 16). Default 64.
	MaxHeld int32
	// MaxWaiting bounds the waits for sessions another replica holds
	// that keep a connection each, queued by PostgreSQL in arrival order
	// (the connection then holds the lock for the turn). Past it, a wait
	// keeps no connection: it tries the lock again (pg_try_advisory_lock
	// on a connection of MaxHeld's, when one is free) every 10 ms at
	// first, backing off to every 200 ms, or takes a waiting connection
	// as one frees; such a wait is not queued in arrival order (a
	// PostgreSQL waiter still goes first). Default MaxHeld/4, at least 1.
	MaxWaiting int32
	// IdleTimeout is how long a connection of the locker's pool that
	// holds no lock is kept for the next one before it is closed (by the
	// pool's health check, which runs every IdleTimeout/2: up to half as
	// long again); default 15s. After a burst of turns of many sessions,
	// the pool would otherwise keep up to MaxHeld + MaxWaiting
	// connections open (pgxpool's default is 30 minutes), which, with
	// every replica doing the same, takes the database's connections
	// from the replicas' statements.
	IdleTimeout time.Duration
}

// defaultLockIdle is LockerConfig.IdleTimeout's default.
const defaultLockIdle = 15 * time.Second

// maxLockConns bounds MaxHeld and MaxWaiting (a database serves far
// fewer connections), so that their sum fits the pool's int32.
const maxLockConns = 1 << 20

// A wait past MaxWaiting tries the lock again pollFirst after its first
// try, doubling up to pollMax (each delay drawn in [d/2, d)).
const (
	pollFirst = 10 * time.Millisecond
	pollMax   = 200 * time.Millisecond
)

// Locker serializes the turns of a session across every replica on the
// database (chat.Locker): a session-level advisory lock on the session,
// held on a connection of the locker's own pool for the turn. It writes
// nothing. PostgreSQL queues the waiters of a lock in arrival order, so
// no replica starves (the chat harness keeps its own replica's turns in
// FIFO order before they reach the database; a wait past
// LockerConfig.MaxWaiting polls instead, behind the queued ones), and
// releases the lock when the holder's connection ends: a replica that
// dies frees its sessions.
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

	// free and waiting are the budgets of connections (a token sent is
	// one taken): MaxHeld for the tries of free sessions, MaxWaiting for
	// the waits queued by the server. A connection is acquired only with
	// a token, so Acquire never waits for one the pool has lent.
	free, waiting chan struct{}

	mu   sync.Mutex
	held map[*pgxpool.Conn]chan struct{} // the connections holding locks, and their budgets
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
	cfg.MaxHeld = min(cfg.MaxHeld, maxLockConns)
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = max(cfg.MaxHeld/4, 1)
	}
	cfg.MaxWaiting = min(cfg.MaxWaiting, maxLockConns)
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultLockIdle
	}
	return &Locker{s: s, cfg: cfg, free: make(chan struct{}, cfg.MaxHeld), waiting: make(chan struct{}, cfg.MaxWaiting),
		held: map[*pgxpool.Conn]chan struct{}{}}
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
// function that releases it (idempotent). The wait is queued by the
// server on a connection of LockerConfig.MaxWaiting's; when they are
// all taken, it tries the lock again now and then (see
// LockerConfig.MaxWaiting), keeping no connection between tries. A
// wait for a connection is a wait for the session: it too ends with
// ctx.
func (l *Locker) Lock(ctx context.Context, sessionID string) (func(), error) {
	if err := l.open(ctx, sessionID); err != nil {
		return nil, err
	}
	key := l.lockKey(sessionID)
	for delay := pollFirst; ; delay = min(2*delay, pollMax) {
		select {
		case l.waiting <- struct{}{}:
			return l.wait(ctx, sessionID, key)
		default:
		}
		select {
		case l.free <- struct{}{}:
			release, ok, err := l.try(ctx, sessionID, key, l.free)
			if err != nil || ok {
				return release, err
			}
		default:
		}
		t := time.NewTimer(delay/2 + rand.N(delay/2))
		select {
		case l.waiting <- struct{}{}:
			t.Stop()
			return l.wait(ctx, sessionID, key)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("postgres: lock %q: %w", sessionID, ctx.Err())
		}
	}
}

// TryLock takes the session's lock if no replica holds it, without
// waiting (chat.TryLocker): ok reports whether it did, and release frees
// it then (idempotent). It does not wait for a connection either: ok is
// false when every one of LockerConfig.MaxHeld holds a lock, and the
// caller's wait (Lock, bounded by its context) takes over.
func (l *Locker) TryLock(ctx context.Context, sessionID string) (release func(), ok bool, err error) {
	if err := l.open(ctx, sessionID); err != nil {
		return nil, false, err
	}
	select {
	case l.free <- struct{}{}:
	default:
		return nil, false, nil
	}
	return l.try(ctx, sessionID, l.lockKey(sessionID), l.free)
}

// open validates the session id and makes the locker's pool on first
// use.
func (l *Locker) open(ctx context.Context, sessionID string) error {
	if err := session.ValidateID(sessionID); err != nil {
		return fmt.Errorf("postgres: lock: %w", err)
	}
	l.once.Do(func() {
		pc := l.s.pc.Copy()
		pc.MaxConns, pc.MinConns, pc.MinIdleConns = l.cfg.MaxHeld+l.cfg.MaxWaiting, 0, 0
		// Idle connections go after IdleTimeout: the pool's health
		// check, which closes them, runs twice as often.
		pc.MaxConnIdleTime, pc.HealthCheckPeriod = l.cfg.IdleTimeout, max(l.cfg.IdleTimeout/2, 100*time.Millisecond)
		l.pool, l.err = pgxpool.NewWithConfig(context.WithoutCancel(ctx), pc)
	})
	if l.err != nil {
		return errcat.Wrap(errcat.SessionLoadFailed, "postgres: lock", redact(l.err))
	}
	return nil
}

// try takes the lock of key with pg_try_advisory_lock on a connection
// of budget, whose token the caller took: the token goes back unless
// the lock is held.
func (l *Locker) try(ctx context.Context, sessionID string, key int32, budget chan struct{}) (release func(), ok bool, err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		<-budget
		return nil, false, l.failed(ctx, sessionID, err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(lockSpace), key).Scan(&ok); err != nil {
		_ = conn.Conn().Close(context.Background()) // its state unknown, as in wait
		conn.Release()
		<-budget
		return nil, false, l.failed(ctx, sessionID, err)
	}
	if !ok {
		conn.Release() // it holds nothing
		<-budget
		return nil, false, nil
	}
	return l.hold(conn, key, budget), true, nil
}

// wait takes the lock of key with pg_advisory_lock, queued by the
// server, on a connection of MaxWaiting's, whose token the caller took.
func (l *Locker) wait(ctx context.Context, sessionID string, key int32) (func(), error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		<-l.waiting
		return nil, l.failed(ctx, sessionID, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(lockSpace), key); err != nil {
		// A wait cut short by ctx leaves the connection's state unknown:
		// closing it drops whatever it holds.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		<-l.waiting
		return nil, l.failed(ctx, sessionID, err)
	}
	return l.hold(conn, key, l.waiting), nil
}

// hold records conn, of budget, as holding the lock of key and returns
// the function that releases it and gives budget its token back
// (idempotent).
func (l *Locker) hold(conn *pgxpool.Conn, key int32, budget chan struct{}) func() {
	l.mu.Lock()
	l.held[conn] = budget
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
			<-budget
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
	l.held = map[*pgxpool.Conn]chan struct{}{}
	l.mu.Unlock()
	for conn, budget := range held {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		<-budget
	}
	if l.pool != nil {
		l.pool.Close()
	}
}
