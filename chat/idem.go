package chat

import "sync"

// idemCache remembers the outcomes of Sends that carried a client
// message id, evicting the oldest beyond its capacity.
type idemCache struct {
	mu    sync.Mutex
	cap   int
	m     map[string]Outcome
	order []string // ring of keys, oldest at next
	next  int
}

func newIdemCache(capacity int) *idemCache {
	return &idemCache{cap: capacity, m: make(map[string]Outcome), order: make([]string, 0, min(capacity, 1024))}
}

func (c *idemCache) get(key string) (Outcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.m[key]
	return o, ok
}

func (c *idemCache) put(key string, o Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
