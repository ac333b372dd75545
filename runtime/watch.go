package runtime

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SessionRef names a tenant's session.
type SessionRef struct {
	Tenant    string
	SessionID string
}

// elsewhere holds the sessions watched live on other servers sharing
// the Recorder's store (Recorder.WatchElsewhere), each until a time.
type elsewhere struct {
	n      atomic.Int64 // len(until), read without the lock
	mu     sync.Mutex
	until  map[runKey]time.Time
	pruned time.Time // when expired entries were last removed
}

// watchedAt reports whether k is watched elsewhere at now, dropping its
// entry once expired.
func (e *elsewhere) watchedAt(k runKey, now func() time.Time) bool {
	if e.n.Load() == 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	until, ok := e.until[k]
	if ok && !now().Before(until) {
		delete(e.until, k)
		e.n.Store(int64(len(e.until)))
		return false
	}
	return ok
}

// watch records k as watched until until (a later time wins), pruning
// the expired entries at most once a second.
func (e *elsewhere) watch(k runKey, now, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.until == nil {
		e.until = map[runKey]time.Time{}
	}
	if now.Sub(e.pruned) >= time.Second || now.Before(e.pruned) {
		e.pruned = now
		for key, u := range e.until {
			if !now.Before(u) {
				delete(e.until, key)
			}
		}
	}
	if cur, ok := e.until[k]; !ok || until.After(cur) {
		e.until[k] = until
	}
	e.n.Store(int64(len(e.until)))
}

// watched reports whether the tenant's session is watched live: it has a
// subscriber here (Subscribe) or on another server (WatchElsewhere).
// Its turns then write each event as it is recorded rather than in
// batches, so that every watcher gets it at once.
func (r *Recorder) watched(tenant, sessionID string) bool {
	return r.broker.Subscribed(tenant, sessionID) || r.elsewhere.watchedAt(runKey{tenant, sessionID}, r.now)
}

// WatchElsewhere records that the tenant's session is watched live on
// another server sharing the Recorder's store (whose streams read the
// store) for the next d: the session's turns in flight write the events
// they hold at once, and its turns write each event as they record it
// (as for a subscriber here, see Subscribe) until d has passed. The
// server watching repeats its announcement before then, for as long as
// it watches; an announcement lost only delays the events to the end of
// the turn, as without one. It is safe for concurrent use.
func (r *Recorder) WatchElsewhere(ctx context.Context, tenant, sessionID string, d time.Duration) {
	if d <= 0 {
		return
	}
	now := r.now()
	r.elsewhere.watch(runKey{tenant, sessionID}, now, now.Add(d))
	r.bringLive(ctx, runKey{tenant, sessionID})
}

// bringLive makes the session's turns in flight write what they hold
// and record the rest as it comes, oldest first.
func (r *Recorder) bringLive(ctx context.Context, key runKey) {
	r.mu.Lock()
	var turns []*Turn
	for _, t := range r.live {
		if t.session() == key && !t.ended.Load() {
			turns = append(turns, t)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(turns, func(a, b *Turn) int { return a.run.StartedAt.Compare(b.run.StartedAt) })
	for _, t := range turns {
		t.mu.Lock()
		if !t.ended.Load() && !t.live {
			err := t.goLive(ctx)
			if err == nil {
				err = t.flush(ctx, nil)
			}
			if err != nil {
				r.log.WarnContext(ctx, "runtime: bringing a turn live for a watcher failed", "run", t.run.ID, "err", err)
			}
		}
		t.mu.Unlock()
	}
}

// Watched reports whether the turn's session is watched live, by a
// subscriber here (Recorder.Subscribe) or on another server
// (Recorder.WatchElsewhere): its events are then written as they come,
// and a producer that coalesces (a streamed reply's text) should record
// at a watcher's pace.
func (t *Turn) Watched() bool {
	return t.rec.watched(t.run.Tenant, t.run.SessionID)
}
