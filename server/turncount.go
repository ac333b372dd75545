package server

import "sync"

// turnCount counts the turns under way, for a stop to wait for them. A
// sync.WaitGroup does not do: a turn taken just as the server stops (its
// Add while a Wait is under way with nothing counted) is a misuse of a
// WaitGroup, which the race detector reports. Here Add and Wait may
// race: Wait returns once the count is zero, and a turn counted after
// that is not waited for (a stopping server refuses new turns before it
// waits).
type turnCount struct {
	mu    sync.Mutex
	n     int
	zeros []chan struct{} // closed once the count is zero
}

// Add adds delta (1 or -1) to the count.
func (c *turnCount) Add(delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += delta
	if c.n < 0 {
		panic("server: turn count below zero")
	}
	if c.n == 0 {
		for _, z := range c.zeros {
			close(z)
		}
		c.zeros = nil
	}
}

// Done subtracts one from the count.
func (c *turnCount) Done() { c.Add(-1) }

// Wait waits until the count is zero.
func (c *turnCount) Wait() {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return
	}
	z := make(chan struct{})
	c.zeros = append(c.zeros, z)
	c.mu.Unlock()
	<-z
}
