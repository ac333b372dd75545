package chat

import (
	"sync"

	"github.com/armature-go/armature/graph"
)

// idemCache remembers, in memory, the outcomes of turns that carried a
// message id or record key, for a session store that records no marks
// (session.Marker); with one, outcomes are recorded durably in the store
// instead. Entries are per session (so deleting a session forgets its
// entries) and the oldest are evicted beyond the capacity.
type idemCache struct {
	mu    sync.Mutex
	cap   int
	m     map[idemKey]Outcome
	order []idemKey // ring of keys, oldest at next
	next  int
}

type idemKey struct{ session, mark string }

func newIdemCache(capacity int) *idemCache {
	return &idemCache{cap: capacity, m: make(map[idemKey]Outcome), order: make([]idemKey, 0, min(capacity, 1024))}
}

// get returns the outcome recorded under mark, as a replay: a copy
// marked Replayed, without the final state (as one read back from a
// store's marks), so that callers never share the turn's own outcome.
func (c *idemCache) get(session, mark string) (Outcome, bool) {
	c.mu.Lock()
	o, ok := c.m[idemKey{session, mark}]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	switch o := o.(type) {
	case *Completed:
		r := *o
		r.Replayed, r.FinalState = true, graph.State{}
		return &r, true
	case *Suspended:
		r := *o
		r.Replayed = true
		return &r, true
	}
	return o, true
}

func (c *idemCache) put(session, mark string, o Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := idemKey{session, mark}
	if _, ok := c.m[key]; ok {
		c.m[key] = o
		return
	}
	if len(c.order) < c.cap {
		c.order = append(c.order, key)
	} else {
		delete(c.m, c.order[c.next])
		c.order[c.next] = key
		c.next = (c.next + 1) % c.cap
	}
	c.m[key] = o
}

// dropSession forgets the session's entries (their ring slots stay until
// reused).
func (c *idemCache) dropSession(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.session == session {
			delete(c.m, k)
		}
	}
}
