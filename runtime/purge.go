package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// SessionPurger is the optional capability of a Store that deletes one
// session's runs with their events: what a server does when a user
// deletes a conversation, so that its messages, tool calls and replies
// do not outlive it in the run records. Detect it with a type
// assertion; [Recorder.PurgeSession] calls it once the session's queued
// records are written.
//
// A purged run is gone as a pruned one is (see [Pruner]): [Store.Run]
// answers ErrNotFound and its events are no longer listed. Event IDs are
// not reused.
type SessionPurger interface {
	// PurgeSession deletes the tenant's finished runs of the session
	// that started at or before req.StartedBy (every finished run of the
	// session when it is zero), but those req.Keep names, with their
	// events, in one transaction. A run in status started is kept: a
	// turn in flight (on any replica: one that waited for the delete
	// begins a new session), or one a crash left, which reconciliation
	// ends and retention prunes. A started run req.Committed names is
	// purged all the same. Purging a session without runs is not an
	// error.
	PurgeSession(ctx context.Context, req PurgeRequest) (PurgeResult, error)
}

// PurgeRequest is the argument of [SessionPurger.PurgeSession].
type PurgeRequest struct {
	Tenant    string
	SessionID string
	// StartedBy keeps the runs started after it: a turn the session
	// began after the delete is a new conversation's. Zero purges every
	// run of the session.
	StartedBy time.Time
	// Keep names runs (their ids) the purge keeps whenever they started:
	// turns still in flight, which run after the delete.
	Keep []string
	// Only, when not empty, limits the purge to the runs it names (their
	// ids), the other conditions still applying: a run found to belong
	// to a conversation already deleted (one that recorded how a deleted
	// suspension ended, or a resume that waited for the delete and
	// resumed nothing).
	Only []string
	// Committed names runs (their ids) that committed to the
	// conversation being deleted (found in its history's records, on
	// whichever process ran them): they are purged even while started,
	// as their ends are still to be written by the processes that ran
	// them (which then find them gone), and whenever they started (by
	// another process's clock, which StartedBy's may be behind); the
	// other conditions (Keep, Only, tenant and session) still apply.
	Committed []string
}

// Validate checks the request: a session id is required.
func (r PurgeRequest) Validate() error {
	if err := checkIDs("tenant", r.Tenant); err != nil {
		return err
	}
	for _, ids := range [][]string{r.Keep, r.Only, r.Committed} {
		for _, id := range ids {
			if err := checkID("run id", id, false); err != nil {
				return err
			}
		}
	}
	return checkID("session id", r.SessionID, false)
}

// PurgeResult is what a purge deleted.
type PurgeResult struct {
	Runs, Events int64
}

// PurgeSession deletes a session and its run records: it calls
// deleteHistory (nil for none: the caller's deletion of the session's
// history, which waits for the session's running turn), then deletes
// the runs the tenant's session started so far, with their events
// ([SessionPurger]). Before deleting it waits for the session's records
// still queued for the flusher, so that a turn that ended just before is
// purged too rather than written after the purge. The runs of the
// session's turns still in flight once the history is deleted are kept:
// they waited for the delete, and their message begins a new
// conversation.
//
// deleteHistory's error is returned as it is, and nothing is purged. A
// store without the capability fails with ErrInvalidConfig before
// deleteHistory is called. A caller may also purge first, with a nil
// deleteHistory, and delete the history after (armature serve does,
// under the session's lock: a process killed in between then leaves the
// session, not its runs).
//
// A turn that ran before the delete but whose run has not ended by the
// time its history is deleted (its end is recorded microseconds after
// its session is released) is purged with it when the turn was settled
// ([Turn.Settle]) before deleteHistory took the session: the purge
// waits for its end, at most the Recorder's write timeout or until ctx
// ends, and keeps it as in flight past that. So is a turn whose end is
// being written. A turn this Recorder does not know (one that ran in
// another process sharing the store) and has not ended is kept as in
// flight, unless committed names it: the runs the caller found
// committed to the conversation (PurgeRequest.Committed; a server reads
// them from the session's history records, under the session's lock,
// before deleting it), which are purged even while started. The process
// that ran such a turn then finds its run gone when it writes its end,
// and gives the record up.
func (r *Recorder) PurgeSession(ctx context.Context, tenant, sessionID string, deleteHistory func(context.Context) error, committed ...string) (PurgeResult, error) {
	req := PurgeRequest{Tenant: tenant, SessionID: sessionID, Committed: committed}
	if err := req.Validate(); err != nil {
		return PurgeResult{}, fmt.Errorf("runtime: purge session: %w", err)
	}
	p, ok := r.store.(SessionPurger)
	if !ok {
		return PurgeResult{}, fmt.Errorf("runtime: purge session: %w: the run store cannot delete a session's runs", ErrInvalidConfig)
	}
	if deleteHistory != nil {
		if err := deleteHistory(ctx); err != nil {
			return PurgeResult{}, err
		}
	}
	key := runKey{tenant, sessionID}
	ps := &purging{}
	r.mu.Lock()
	prev := r.purging[key]
	r.purging[key] = ps
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if prev != nil {
			r.purging[key] = prev
		} else {
			delete(r.purging, key)
		}
		r.mu.Unlock()
	}()
	req.StartedBy = r.now()
	r.awaitSettled(ctx, key, nil)
	r.mu.Lock()
	for _, t := range r.live {
		if t.session() == key && !t.ended.Load() {
			req.Keep = append(req.Keep, t.run.ID)
		}
	}
	r.mu.Unlock()
	r.waitSession(key)
	r.settleRefused(key)
	res, err := p.PurgeSession(ctx, req)
	if err != nil {
		return res, fmt.Errorf("runtime: purge session %q: %w", sessionID, err)
	}
	// A turn of the session that settled meanwhile never took the
	// session (the purge's caller holds it): a resume refused before it
	// did, whose suspension the delete removed, or the record of how a
	// suspension ended, begun since the scan above (live still, or
	// retired since the purge began). It belongs to the deleted
	// conversation, and goes once its end is written. (One that settles
	// from now on finds its parent purged, and is purged by its caller:
	// Recorder.PurgeRuns.)
	r.mu.Lock()
	kept := ps.settled
	for _, t := range r.live {
		if t.session() == key && t.settled.Load() && !slices.Contains(kept, t) {
			kept = append(kept, t)
		}
	}
	r.mu.Unlock()
	if len(kept) > 0 {
		r.awaitSettled(ctx, key, kept)
		late := make([]string, len(kept))
		for i, t := range kept {
			late[i] = t.run.ID
		}
		r.settleRefused(key, late...)
		more, err := p.PurgeSession(ctx, PurgeRequest{Tenant: tenant, SessionID: sessionID, Only: late})
		if err != nil {
			return res, fmt.Errorf("runtime: purge session %q: %w", sessionID, err)
		}
		res.Runs, res.Events = res.Runs+more.Runs, res.Events+more.Events
	}
	return res, nil
}

// PurgeRuns deletes the named runs of the tenant's session with their
// events, those finished ([SessionPurger], PurgeRequest.Only), once the
// session's queued records are written: runs found to belong to a
// conversation already deleted. A store without the capability fails
// with ErrInvalidConfig.
func (r *Recorder) PurgeRuns(ctx context.Context, tenant, sessionID string, runIDs ...string) (PurgeResult, error) {
	req := PurgeRequest{Tenant: tenant, SessionID: sessionID, Only: runIDs}
	if err := req.Validate(); err != nil {
		return PurgeResult{}, fmt.Errorf("runtime: purge runs: %w", err)
	}
	p, ok := r.store.(SessionPurger)
	if !ok {
		return PurgeResult{}, fmt.Errorf("runtime: purge runs: %w: the run store cannot delete a session's runs", ErrInvalidConfig)
	}
	if len(runIDs) == 0 {
		return PurgeResult{}, nil
	}
	r.waitSession(runKey{tenant, sessionID})
	r.settleRefused(runKey{tenant, sessionID}, runIDs...)
	res, err := p.PurgeSession(ctx, req)
	if err != nil {
		return res, fmt.Errorf("runtime: purge runs of session %q: %w", sessionID, err)
	}
	return res, nil
}

// awaitSettled waits until no turn of the session that is settled or
// ended is live (of only, when not nil): their ends are then in the
// store, where the purge sees them finished. It waits at most the write
// timeout, or until ctx ends.
func (r *Recorder) awaitSettled(ctx context.Context, key runKey, only []*Turn) {
	r.settling.Add(1)
	defer r.settling.Add(-1)
	var timeout <-chan time.Time
	for {
		r.mu.Lock()
		pending := false
		for _, t := range r.live {
			if t.session() == key && (t.settled.Load() || t.ended.Load()) && (only == nil || slices.Contains(only, t)) {
				pending = true
				break
			}
		}
		if !pending {
			r.mu.Unlock()
			return
		}
		if r.retired == nil {
			r.retired = make(chan struct{})
		}
		ch := r.retired
		r.mu.Unlock()
		// What the session's ended turns queued is written now (no
		// linger), which retires them; a turn that ends from now on
		// wakes this wait (settling).
		r.waitSession(key)
		if timeout == nil {
			timer := time.NewTimer(r.writeTimeout)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-timeout:
			return
		}
	}
}

// purging is the state of a purge of one session (Recorder.purging):
// the settled turns of the session that retired while it ran.
type purging struct{ settled []*Turn }

// retireLocked removes an ended turn from live and wakes awaitSettled.
// r.mu is held.
func (r *Recorder) retireLocked(t *Turn) {
	delete(r.live, runKey{t.run.Tenant, t.run.ID})
	if ps := r.purging[t.session()]; ps != nil && t.settled.Load() {
		ps.settled = append(ps.settled, t)
	}
	r.wakeLocked()
}

// wakeSettling wakes awaitSettled.
func (r *Recorder) wakeSettling() {
	r.mu.Lock()
	r.wakeLocked()
	r.mu.Unlock()
}

// wakeLocked wakes awaitSettled. r.mu is held.
func (r *Recorder) wakeLocked() {
	if r.retired != nil {
		close(r.retired)
		r.retired = nil
	}
}
