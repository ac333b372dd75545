package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fair shares. Event streams and turns are limited in total and per
// tenant, so that one tenant's load never takes another's capacity: a
// tenant over its share gets 429 too_many_requests, a server out of
// capacity 503 too_many_streams / overloaded, both with Retry-After. A
// turn over the limits waits in a bounded queue (in total and per
// tenant) for a while before it is refused; a stream is refused at once.

// Error codes of the limits.
const (
	CodeTooManyRequests = "too_many_requests"
	CodeOverloaded      = "overloaded"
)

// limiter admits up to total units at once, at most perTenant of them
// for one tenant. With a queue, a request that cannot be admitted waits,
// at most queue of them in total and queuePerTenant for one tenant, for
// up to wait; otherwise it is refused at once. Its maps hold only
// tenants with units in use or waiting.
//
// A unit that frees is handed straight to a waiting request, never left
// for whoever takes the lock first: to the waiting tenant with the
// fewest units in use (its share not used up), the one waiting longest
// among equals, and within a tenant in arrival order. A request that
// arrives while a waiting one could use the capacity does not pass it
// (handing on every release leaves no such waiter behind). So a tenant
// whose share is open gets the next unit however many requests other
// tenants keep queued or keep sending: before, every waiter was woken
// to race for the unit, and a tenant queueing many requests (or sending
// a new one the moment its last ended) took the units of a tenant
// waiting with one, until that one's wait ran out.
type limiter struct {
	kind                  string // "stream" or "turn", for errors and metrics
	total, perTenant      int
	queue, queuePerTenant int
	wait                  time.Duration

	mu      sync.Mutex
	n       int                  // units in use
	queued  int                  // requests waiting
	seq     uint64               // arrival order of waiters
	used    map[string]int       // per tenant
	waiting map[string]int       // per tenant
	waiters map[string][]*waiter // per tenant, in arrival order
	refused *refusals
}

// waiter is a request waiting for a unit.
type waiter struct {
	seq     uint64
	ready   chan struct{} // closed when granted
	granted bool          // guarded by limiter.mu
}

// refusals counts refused requests by kind and reason, for /metrics.
type refusals struct {
	mu sync.Mutex
	n  map[[2]string]int64
}

func (r *refusals) add(kind, reason string) {
	r.mu.Lock()
	r.n[[2]string{kind, reason}]++
	r.mu.Unlock()
}

func (r *refusals) snapshot() map[[2]string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[[2]string]int64, len(r.n))
	for k, v := range r.n {
		out[k] = v
	}
	return out
}

func newLimiter(kind string, total, perTenant, queue, queuePerTenant int, wait time.Duration, r *refusals) *limiter {
	return &limiter{kind: kind, total: total, perTenant: perTenant, queue: queue, queuePerTenant: queuePerTenant, wait: wait,
		used: map[string]int{}, waiting: map[string]int{}, waiters: map[string][]*waiter{}, refused: r}
}

// acquire admits one unit for tenant, waiting in the queue if it has
// one, and returns its release (to call exactly once; later calls do
// nothing).
func (l *limiter) acquire(ctx context.Context, tenant string) (func(), error) {
	return l.acquireQueued(ctx, tenant, nil)
}

// acquireQueued is acquire calling queued, when set, once the request
// has its place in the queue and before it waits (not when it is
// admitted or refused at once); an error from queued ends the wait and
// is returned.
func (l *limiter) acquireQueued(ctx context.Context, tenant string, queued func() error) (func(), error) {
	l.mu.Lock()
	// The tenant's own waiters go first (they cannot be admitted now:
	// handing on release leaves none that could), as does capacity
	// another tenant's waiters could use (none either, for the same
	// reason).
	if len(l.waiters[tenant]) == 0 && l.used[tenant] < l.perTenant && l.n < l.total {
		l.used[tenant]++
		l.n++
		l.mu.Unlock()
		return l.releaser(tenant), nil
	}
	if l.waiting[tenant] >= l.queuePerTenant || l.queued >= l.queue {
		err := l.refuseLocked(tenant)
		l.mu.Unlock()
		return nil, err
	}
	l.seq++
	w := &waiter{seq: l.seq, ready: make(chan struct{})}
	l.waiters[tenant] = append(l.waiters[tenant], w)
	l.waiting[tenant]++
	l.queued++
	l.mu.Unlock()
	if queued != nil {
		if err := queued(); err != nil {
			l.mu.Lock()
			granted := w.granted
			if !granted {
				l.unqueueLocked(tenant, w)
			}
			l.mu.Unlock()
			if granted { // handed on
				l.release(tenant)
			}
			return nil, err
		}
	}
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return l.releaser(tenant), nil
	case <-timer.C:
		l.mu.Lock()
		defer l.mu.Unlock()
		if w.granted { // granted as the wait ran out: taken
			return l.releaser(tenant), nil
		}
		l.unqueueLocked(tenant, w)
		return nil, l.refuseLocked(tenant)
	case <-ctx.Done():
		l.mu.Lock()
		if w.granted { // granted as the request ended: handed on
			l.mu.Unlock()
			l.release(tenant)
		} else {
			l.unqueueLocked(tenant, w)
			l.mu.Unlock()
		}
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeOverloaded,
			Message: "the request ended while it waited for capacity", Err: ctx.Err()}
	}
}

// releaser returns the release of one of tenant's units, idempotent.
func (l *limiter) releaser(tenant string) func() {
	var once sync.Once
	return func() { once.Do(func() { l.release(tenant) }) }
}

// unqueueLocked removes a waiter that was not granted; l.mu is held.
func (l *limiter) unqueueLocked(tenant string, w *waiter) {
	q := l.waiters[tenant]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	l.setWaitersLocked(tenant, q)
	l.queued--
	if l.waiting[tenant]--; l.waiting[tenant] <= 0 {
		delete(l.waiting, tenant)
	}
}

func (l *limiter) setWaitersLocked(tenant string, q []*waiter) {
	if len(q) == 0 {
		delete(l.waiters, tenant)
		return
	}
	l.waiters[tenant] = q
}

// handOnLocked grants free units to waiters: each to the first waiter
// of the tenant with the fewest units in use whose share is not used
// up, the one waiting longest among equals. l.mu is held.
func (l *limiter) handOnLocked() {
	for l.n < l.total && l.queued > 0 {
		var next string
		var best *waiter
		for tenant, q := range l.waiters {
			u := l.used[tenant]
			if u >= l.perTenant {
				continue
			}
			if best == nil || u < l.used[next] || u == l.used[next] && q[0].seq < best.seq {
				next, best = tenant, q[0]
			}
		}
		if best == nil {
			return
		}
		l.setWaitersLocked(next, l.waiters[next][1:])
		l.queued--
		if l.waiting[next]--; l.waiting[next] <= 0 {
			delete(l.waiting, next)
		}
		l.used[next]++
		l.n++
		best.granted = true
		close(best.ready)
	}
}

// refuseLocked builds the refusal: the tenant's share is used up (429),
// or the server's capacity (503; also when a tenant's share is the
// whole server).
func (l *limiter) refuseLocked(tenant string) error {
	reason, status, code := "capacity", http.StatusServiceUnavailable, CodeOverloaded
	msg := "the server is at capacity for " + l.kind + "s; retry later"
	if l.kind == "stream" {
		code = CodeTooManyStreams
	}
	if l.used[tenant] >= l.perTenant && l.perTenant < l.total {
		reason, status, code = "tenant_share", http.StatusTooManyRequests, CodeTooManyRequests
		msg = "your tenant has " + strconv.Itoa(l.used[tenant]) + " " + l.kind + "s open, its share; retry when one ends"
	}
	if l.refused != nil {
		l.refused.add(l.kind, reason)
	}
	return &Error{Status: status, Code: code, Message: msg, RetryAfter: retryAfterSeconds}
}

func (l *limiter) release(tenant string) {
	l.mu.Lock()
	l.n--
	if l.used[tenant]--; l.used[tenant] <= 0 {
		delete(l.used, tenant)
	}
	l.handOnLocked()
	l.mu.Unlock()
}

// counts returns the units in use and the requests waiting.
func (l *limiter) counts() (inUse, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.queued
}

// admitTurn admits a request that runs a turn (runsTurn) through the
// turn limiter, once its body is read: its handler reads that copy,
// read errors included. A client that sends its body slowly (or not at
// all) therefore holds no turn and no place in the queue while it does,
// only its connection, until ReadTimeout (408); before, one that sent
// its headers and a byte of body held a turn for all of ReadTimeout,
// and a few such connections kept a tenant's (or a server's) turns
// busy with nothing running. Reading first also lets net/http notice a
// client hanging up while its request waits in the queue (it does only
// once the body has been read): it then leaves the queue rather than
// keep its place for all of QueueWait and have its turn run for nobody.
// A body that cannot be read (over MaxBodyBytes: 413; sent too slowly:
// 408) is answered with the error its handler would have answered,
// without taking a turn. At most the turns in flight and the queue's
// requests hold a body each (bounded by MaxBodyBytes) for longer than
// their read.
func (s *Server) admitTurn(r *http.Request) (func(), error) {
	if err := bufferBody(r); err != nil {
		return nil, err
	}
	return s.turns.acquireQueued(r.Context(), tenantOf(r), nil)
}

// bufferBody reads r's body and replaces it with a reader of what was
// read that then returns the read's error, or io.EOF; a failed read is
// also returned, classified (bodyReadError).
func bufferBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body = &replayBody{rd: bytes.NewReader(b), err: err, orig: r.Body}
	if err != nil {
		return bodyReadError(err)
	}
	return nil
}

// replayBody is a request body read ahead (bufferBody).
type replayBody struct {
	rd   *bytes.Reader
	err  error // the read's error, nil for io.EOF
	orig io.ReadCloser
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.rd.Len() > 0 {
		return b.rd.Read(p)
	}
	if b.err != nil {
		return 0, b.err
	}
	return 0, io.EOF
}

func (b *replayBody) Close() error { return b.orig.Close() }

// runsTurn reports whether a route runs a turn: each such request is
// admitted by the turn limiter before its handler runs.
func runsTurn(pattern string) bool {
	switch pattern {
	case "POST /v1/sessions/{id}/messages", "POST /v1/sessions/{id}/signals",
		"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/openharness",
		"POST /v1/agents/{agent}/tools/{tool}":
		return true
	}
	return false
}

// shareOf is the default per-tenant share of a total: all of it for a
// single-tenant server, a quarter (at least 1) with several tenants.
func shareOf(total int, tenants int) int {
	if tenants <= 1 {
		return total
	}
	return max(1, total/4)
}
