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

// TryLocker is the optional capability of a Locker that can take a
// session nobody holds without waiting: ok reports whether it did, and
// release frees it then. The harness tries it first, so that a bounded
// wait (Config.LockWait) counts only a wait for another holder, never
// the lock's own round trip to its backend. Detect it with a type
// assertion.
type TryLocker interface {
	Locker
	TryLock(ctx context.Context, sessionID string) (release func(), ok bool, err error)
}
