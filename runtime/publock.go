package runtime

import (
	"cmp"
	"slices"
	"sync"
)

// pubLocks serializes, per session, a store write of the session's
// events with their publication on the Broker: the write assigns the
// events' ids, and a session's event stream skips an event whose id is
// below the last it sent, so the Broker must publish a session's events
// in id order. Without it, two runs of one session writing at once (two
// clients answering the same approval, a message sent while another
// turn of the session runs) could publish in the other order, and a
// subscriber lost the first run's events for good.
type pubLocks struct {
	mu sync.Mutex
	m  map[runKey]*pubLock
}

type pubLock struct {
	sync.Mutex
	refs int
}

// lock locks the sessions' publication, in a fixed order (so that
// writers locking several sessions cannot deadlock), and returns the
// unlock. keys may repeat.
func (l *pubLocks) lock(keys ...runKey) (unlock func()) {
	if len(keys) > 1 {
		keys = slices.Clone(keys)
		slices.SortFunc(keys, func(a, b runKey) int {
			if c := cmp.Compare(a.tenant, b.tenant); c != 0 {
				return c
			}
			return cmp.Compare(a.id, b.id)
		})
		keys = slices.Compact(keys)
	}
	held := make([]*pubLock, len(keys))
	l.mu.Lock()
	if l.m == nil {
		l.m = map[runKey]*pubLock{}
	}
	for i, k := range keys {
		p := l.m[k]
		if p == nil {
			p = &pubLock{}
			l.m[k] = p
		}
		p.refs++
		held[i] = p
	}
	l.mu.Unlock()
	for _, p := range held {
		p.Lock()
	}
	return func() {
		for _, p := range held {
			p.Unlock()
		}
		l.mu.Lock()
		for i, k := range keys {
			if held[i].refs--; held[i].refs == 0 {
				delete(l.m, k)
			}
		}
		l.mu.Unlock()
	}
}
