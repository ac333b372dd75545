package postgres

import "github.com/jackc/pgx/v5/pgxpool"

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
