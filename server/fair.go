package server

import (
	"context"
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
type limiter struct {
	kind                  string // "stream" or "turn", for errors and metrics
	total, perTenant      int
	queue, queuePerTenant int
	wait                  time.Duration

	mu      sync.Mutex
	n       int            // units in use
	queued  int            // requests waiting
	used    map[string]int // per tenant
	waiting map[string]int // per tenant
	freed   chan struct{}  // closed (and replaced) when a unit frees
	refused *refusals
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
		used: map[string]int{}, waiting: map[string]int{}, freed: make(chan struct{}), refused: r}
}

// acquire admits one unit for tenant, waiting in the queue if it has
// one, and returns its release (to call exactly once).
func (l *limiter) acquire(ctx context.Context, tenant string) (func(), error) {
	l.mu.Lock()
	queued := false
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if l.used[tenant] < l.perTenant && l.n < l.total {
			if queued {
				l.unqueueLocked(tenant)
			}
			l.used[tenant]++
			l.n++
			l.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { l.release(tenant) }) }, nil
		}
		if !queued {
			if l.waiting[tenant] >= l.queuePerTenant || l.queued >= l.queue {
				err := l.refuseLocked(tenant)
				l.mu.Unlock()
				return nil, err
			}
			queued = true
			l.waiting[tenant]++
			l.queued++
			timer = time.NewTimer(l.wait)
		}
		freed := l.freed
		l.mu.Unlock()
		select {
		case <-freed:
			l.mu.Lock()
		case <-timer.C:
			l.mu.Lock()
			l.unqueueLocked(tenant)
			err := l.refuseLocked(tenant)
			l.mu.Unlock()
			return nil, err
		case <-ctx.Done():
			l.mu.Lock()
			l.unqueueLocked(tenant)
			l.mu.Unlock()
			return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeOverloaded,
				Message: "the request ended while it waited for capacity", Err: ctx.Err()}
		}
	}
}

func (l *limiter) unqueueLocked(tenant string) {
	l.queued--
	if l.waiting[tenant]--; l.waiting[tenant] <= 0 {
		delete(l.waiting, tenant)
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
	if l.queued > 0 {
		close(l.freed)
		l.freed = make(chan struct{})
	}
	l.mu.Unlock()
}

// counts returns the units in use and the requests waiting.
func (l *limiter) counts() (inUse, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.queued
}

// runsTurn reports whether a route runs a turn: each such request is
// admitted by the turn limiter before its handler runs.
func runsTurn(pattern string) bool {
	switch pattern {
	case "POST /v1/sessions/{id}/messages", "POST /v1/sessions/{id}/signals",
		"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/openharness":
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
