package server

import (
	"context"
	"sync"
	"time"

	"github.com/armature-go/armature/runtime"
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

// WatchRelay tells the servers sharing a run store which sessions are
// watched live on each (store/postgres: LISTEN/NOTIFY). A turn's events
// are written in batches, behind the turn, unless somebody watches its
// session; with a relay, a client streaming a session from one server
// (GET /v1/sessions/{id}/events) gets the events of a turn another
// server runs as they come, its text as it streams, rather than at the
// turn's end. AnnounceWatch tells the other servers that the sessions
// are watched here; ListenWatches calls fn for each session another
// server announced until ctx ends, and fn("", "") when a server asks
// the others to announce again at once (one that started, or whose
// listening reconnected). A server announces a session when it starts
// watching it (before the stream's first byte) and every WatchRefresh
// while it does; an announcement counts for WatchTTL. A server with a
// relay calls its model streaming even when nobody watches its turn
// yet: a watch announced a moment after the turn began still gets the
// reply's text as it comes.
type WatchRelay interface {
	AnnounceWatch(ctx context.Context, sessions []runtime.SessionRef) error
	ListenWatches(ctx context.Context, fn func(tenant, sessionID string)) error
}

// WatchRefresh is how often a server with a WatchRelay announces again
// the sessions it watches; WatchTTL is how long an announcement counts
// for the servers that hear it: a few refreshes, so that one lost
// announcement changes nothing.
const (
	WatchRefresh = 10 * time.Second
	WatchTTL     = 3 * WatchRefresh
)

// watchAnnounceWait bounds the announcement a new watch makes before
// its stream starts.
const watchAnnounceWait = 2 * time.Second

// watching counts, by session, the subscriptions of this server
// (Server.Subscribe) that its WatchRelay announces.
type watching struct {
	mu   sync.Mutex
	subs map[streamKey]int
}

// add counts a subscription of the tenant's session, reporting whether
// it is the session's first.
func (w *watching) add(tenant, sessionID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs = map[streamKey]int{}
	}
	k := streamKey{tenant, sessionID}
	w.subs[k]++
	return w.subs[k] == 1
}

// remove uncounts a subscription add counted.
func (w *watching) remove(tenant, sessionID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := streamKey{tenant, sessionID}
	if w.subs[k]--; w.subs[k] <= 0 {
		delete(w.subs, k)
	}
}

// sessions returns the sessions watched.
func (w *watching) sessions() []runtime.SessionRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]runtime.SessionRef, 0, len(w.subs))
	for k := range w.subs {
		out = append(out, runtime.SessionRef{Tenant: k.tenant, SessionID: k.session})
	}
	return out
}

// announceWatches announces, every WatchRefresh until ctx ends, and
// whenever asked (a value on asked), the sessions this server watches.
func (s *Server) announceWatches(ctx context.Context, relay WatchRelay, asked <-chan struct{}) {
	t := time.NewTicker(WatchRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-asked:
		}
		if refs := s.watches.sessions(); len(refs) > 0 {
			actx, cancel := context.WithTimeout(ctx, WatchRefresh)
			if err := relay.AnnounceWatch(actx, refs); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "server: announcing the sessions watched here failed", "sessions", len(refs), "error", err.Error())
			}
			cancel()
		}
	}
}

// watch counts a subscription of the tenant's session for the
// WatchRelay, announcing the session at once when it is its first, and
// returns the function that uncounts it (once).
func (s *Server) watch(ctx context.Context, relay WatchRelay, tenant, sessionID string) func() {
	if s.watches.add(tenant, sessionID) {
		// Before the stream's first byte: a client that sends its
		// message once the stream is open (the chat page does) finds
		// the session watched on the server that runs the turn, bar the
		// notice's own delivery. Bounded: a slow database delays the
		// stream by watchAnnounceWait at most (the refresh repeats it).
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watchAnnounceWait)
		if err := relay.AnnounceWatch(actx, []runtime.SessionRef{{Tenant: tenant, SessionID: sessionID}}); err != nil {
			s.log.WarnContext(actx, "server: announcing a session watched here failed", "error", err.Error())
		}
		cancel()
	}
	var once sync.Once
	return func() { once.Do(func() { s.watches.remove(tenant, sessionID) }) }
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
