package server

import (
	"net"
	"sync"
)

// DefaultMaxConns is the connection cap of a Config.MaxConns of 0.
const DefaultMaxConns = 10000

// LimitListener returns a listener that accepts at most n connections at
// once: at the cap, Accept waits until a connection it returned is
// closed (closing one twice frees one slot), or until the listener is
// closed (net.ErrClosed then). n is read as Config.MaxConns: 0 is
// DefaultMaxConns, and a negative n is no cap (l itself is returned).
// armature serve wraps its listener in it.
func LimitListener(l net.Listener, n int) net.Listener {
	switch {
	case n < 0:
		return l
	case n == 0:
		n = DefaultMaxConns
	}
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// limitListener is LimitListener's listener: slots holds a token per
// open connection.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// Accept waits for a free slot, then accepts a connection holding it.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
}

// Close closes the listener, ending an Accept waiting for a slot.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn is a connection holding a slot of a limitListener, freed by
// its first Close.
type limitConn struct {
	net.Conn
	free func()
	once sync.Once
}

// Close closes the connection and frees its slot.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
