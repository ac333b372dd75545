package server

import (
	"context"
	"sync"
)

// EventNotifier tells a server that events of a tenant's session were
// stored by another server sharing its run store. Listen calls
// fn(tenant, sessionID) for each notice, and fn("", "") when notices may
// have been missed (a reconnection), until ctx ends.
type EventNotifier interface {
	Listen(ctx context.Context, fn func(tenant, sessionID string)) error
}

// CancelRelay carries cancel requests between the servers sharing a run
// store (store/postgres: LISTEN/NOTIFY), so that a run can be cancelled
// through any of them: a live run belongs to the server running its
// turn. RequestCancel asks every server to cancel the run;
// ListenCancels calls fn for each request made (this server's
// included) until ctx ends.
type CancelRelay interface {
	RequestCancel(ctx context.Context, tenant, runID string) error
	ListenCancels(ctx context.Context, fn func(tenant, runID string)) error
}

// wakeups registers the session event streams to wake when a notice
// names their session (or every stream, for a notice of nothing in
// particular). A wake never blocks: each stream has one pending wake at
// most, and it reads everything new when it runs.
type wakeups struct {
	mu   sync.Mutex
	subs map[streamKey]map[chan struct{}]struct{}
}

type streamKey struct{ tenant, session string }

// add registers a stream of the tenant's session and returns its wake
// channel and the function that removes it.
func (w *wakeups) add(tenant, sessionID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	k := streamKey{tenant, sessionID}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[streamKey]map[chan struct{}]struct{}{}
	}
	if w.subs[k] == nil {
		w.subs[k] = map[chan struct{}]struct{}{}
	}
	w.subs[k][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs[k], ch)
		if len(w.subs[k]) == 0 {
			delete(w.subs, k)
		}
	}
}

// wake wakes the streams of the tenant's session, or all of them for
// ("", "").
func (w *wakeups) wake(tenant, sessionID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	poke := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if tenant == "" && sessionID == "" {
		for _, set := range w.subs {
			poke(set)
		}
		return
	}
	poke(w.subs[streamKey{tenant, sessionID}])
}
