package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ResumedChannel returns the NOTIFY channel of the store's ResumeFeed
// announcements, for tests that cut a feed's listening connection.
func ResumedChannel(s *Store) string { return s.resumed }

// CancelChannel returns the NOTIFY channel of the store's cancel
// requests, for tests that cut a listener's connection.
func CancelChannel(s *Store) string { return s.cancels }

// FirstSchema exposes firstSchema to the tests.
func FirstSchema(searchPath string) string { return firstSchema(searchPath) }

// Replica returns the store's replica id (its advisory lock's key), for
// tests that cut the connection holding it.
func Replica(s *Store) int64 { return s.replica }

// Pool returns the store's pool, for tests that read pg_locks.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// LockConns returns how many connections the locker's pool has open
// (0 before its first lock).
func LockConns(l *Locker) int32 {
	if l.pool == nil {
		return 0
	}
	return l.pool.Stat().TotalConns()
}

// LoseReplicaLock frees the store's replica lock and keeps it free, its
// keeper stopped: a replica whose lock's connection was lost for longer
// than the others' OwnerGrace, alive and running its turns, which the
// others count as gone.
func LoseReplicaLock(s *Store) {
	s.stopKeep()
	<-s.kept
	s.aliveMu.Lock()
	defer s.aliveMu.Unlock()
	if s.alive != nil {
		_ = s.alive.Close(context.Background())
		s.alive = nil
	}
	s.held.Store(false)
}

// TakeReplicaLockAgain takes the lock LoseReplicaLock freed (waiting
// while the lost connection's backend, or another replica's probe, still
// holds it), and keeps it as Open does.
func TakeReplicaLockAgain(ctx context.Context, s *Store) error {
	conn, err := s.takeReplica(ctx, s.replica)
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, errLockTaken) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		conn, err = s.takeReplica(ctx, s.replica)
	}
	if err != nil {
		return err
	}
	s.aliveMu.Lock()
	s.alive = conn
	s.aliveMu.Unlock()
	s.held.Store(true)
	kctx, stop := context.WithCancel(context.Background())
	s.stopKeep, s.kept = stop, make(chan struct{})
	go s.keepReplica(kctx)
	return nil
}

// LoadPageSQL is the page load, for its query plan.
const LoadPageSQL = loadPageSQL
