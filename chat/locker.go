package chat

import "context"

// Locker serializes the turns of one session across processes that share
// a store. The chat harness always serializes a session's turns within
// its own process (FIFO); a Locker extends that to every harness holding
// the same Locker backend, e.g. several processes on one SQLite file or
// many replicas on Postgres.
//
// Lock blocks until the session is free or ctx ends, and returns the
// function that frees it.
type Locker interface {
	Lock(ctx context.Context, sessionID string) (release func(), err error)
}
