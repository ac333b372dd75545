package session

import (
	"context"
	"sync"
)

// Locks serializes the turns of each session within one process: holders
// of one session id go in arrival order (FIFO, so no waiter starves)
// while different sessions proceed in parallel. A waiter whose context
// ends leaves the queue. Entries exist only while a session is held or
// awaited, so memory is bounded by the sessions in flight. The zero
// value is ready to use.
//
// It has the shape of chat.Locker. MemoryStore embeds one, and so do
// the SQLite and PostgreSQL stores: every chat harness over one store
// then serializes a session's turns with every other (two agents
// serving one session), which a lock per harness would not.
type Locks struct {
	mu sync.Mutex
	m  map[string]*lockEntry
}

type lockEntry struct {
	held    bool
	waiters []chan struct{} // FIFO; a closed channel is a handoff
	refs    int             // holder plus waiters
}

// Lock acquires the session, waiting behind earlier callers. It returns
// the release function, or ctx's error if ctx ends first.
func (k *Locks) Lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*lockEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &lockEntry{}
		k.m[key] = e
	}
	e.refs++
	if !e.held {
		e.held = true
		k.mu.Unlock()
		return func() { k.unlock(key, e) }, nil
	}
	ch := make(chan struct{})
	e.waiters = append(e.waiters, ch)
	k.mu.Unlock()
	select {
	case <-ch:
		return func() { k.unlock(key, e) }, nil
	case <-ctx.Done():
		k.mu.Lock()
		for i, w := range e.waiters {
			if w == ch {
				e.waiters = append(e.waiters[:i], e.waiters[i+1:]...)
				e.refs--
				k.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		k.mu.Unlock()
		// The lock was handed over as ctx ended: pass it on.
		k.unlock(key, e)
		return nil, ctx.Err()
	}
}

// TryLock acquires the session if nobody holds it, without waiting: ok
// reports whether it did, and unlock releases it then.
func (k *Locks) TryLock(key string) (unlock func(), ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.m[key]
	if e != nil && e.held {
		return nil, false
	}
	if k.m == nil {
		k.m = map[string]*lockEntry{}
	}
	if e == nil {
		e = &lockEntry{}
		k.m[key] = e
	}
	e.refs++
	e.held = true
	return func() { k.unlock(key, e) }, true
}

// unlock hands the key to the first waiter, or frees it.
func (k *Locks) unlock(key string, e *lockEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.refs--
	if len(e.waiters) > 0 {
		ch := e.waiters[0]
		e.waiters[0] = nil
		e.waiters = e.waiters[1:]
		close(ch) // held stays true: ownership passes to the waiter
		return
	}
	e.held = false
	if e.refs == 0 {
		delete(k.m, key)
	}
}
