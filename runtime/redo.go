package runtime

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the Recorder's redo of refused writes: the records of a
// run that the store refused (a full disk, a database that went away,
// a write that timed out) are kept, and once the run has ended they are
// written again, with backoff, until the store takes them. Without it
// an ended run whose end was refused would show as started, and could
// not be cancelled, until Reconcile at the next start of the process:
// on a store shared by replicas its owner is alive, so no other replica
// reconciles it either.

// maxRedoRuns and maxRedoBytes bound the runs kept for a redo, and the
// bytes of their events' data: past either the oldest is dropped (and
// logged), and stays as the store has it until Reconcile.
const (
	maxRedoRuns  = 4096
	maxRedoBytes = 64 << 20
)

// maxRedoWait is the longest wait between two attempts, unless the
// first is longer; maxRedoAge is how long a run is tried again before
// it is given up (left to Reconcile).
const (
	maxRedoWait = time.Minute
	maxRedoAge  = time.Hour
)

// redo holds the refused records of the Recorder's runs.
type redo struct {
	first time.Duration // the wait before the first attempt; 0: no redo
	count atomic.Int32  // len(runs), read without mu on the write paths

	mu      sync.Mutex
	runs    map[runKey]*redoRun // by {tenant, run id}
	order   []runKey            // in the order they were first kept
	bytes   int                 // of the kept events' data
	running bool                // a redo goroutine runs
	stop    chan struct{}       // closed by Close
	ctx     context.Context     // the redo's writes; cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	gone atomic.Pointer[func(context.Context, Run) bool] // SetConversationGone
	last error                                           // the last refusal (mu)
}

// lastErr is the store's last refusal of a redo.
func (d *redo) lastErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// redoRun is what the store has not taken of one run.
type redoRun struct {
	session runKey
	run     Run  // the run's identity, when known (for the gone check)
	purge   bool // its conversation was deleted: end it and purge it
	start   *Run // the run's start, when it was refused too
	events  []Event
	finish  *FinishRequest // the run's end: the run is due once set
	since   time.Time      // when it was first kept
	bytes   int            // of its events' data
	// startEvents counts the events at the head of events that came
	// with the start: a start the store took after all (ErrConflict on
	// the redo's StartRun) took them with it.
	startEvents int
}

// keepRefused keeps a record of a run of session that the store
// refused; the run is written again once its end is kept too. A record
// from the middle of a turn is kept only when it starts the run (the
// end needs the start): the events of any other are lost, as the turn
// goes on and writes its later events first (and the store may have
// taken the refused ones after all, when the write failed after its
// commit).
func (r *Recorder) keepRefused(rec TurnRecord, session runKey, t *Turn) {
	d := &r.redo
	if d.first <= 0 || (rec.Start == nil && rec.Append.Finish == nil) {
		return
	}
	k := runKey{rec.Append.Tenant, rec.Append.RunID}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.runs == nil {
		d.runs = map[runKey]*redoRun{}
		d.stop = make(chan struct{})
		d.ctx, d.cancel = context.WithCancel(context.Background())
	}
	e := d.runs[k]
	if e == nil {
		e = &redoRun{session: session, since: r.now()}
		switch {
		case rec.Start != nil:
			e.run = *rec.Start
		case t != nil:
			e.run = t.run
		}
		d.runs[k] = e
		d.order = append(d.order, k)
	}
	if rec.Start != nil && e.start == nil && len(e.events) == 0 {
		run := *rec.Start
		e.start = &run
		e.startEvents = len(rec.Append.Events)
	}
	if rec.Start != nil || rec.Append.Finish != nil {
		// The events are copied: a store may keep the record's buffer.
		e.events = append(e.events, rec.Append.Events...)
		for _, ev := range rec.Append.Events {
			e.bytes += len(ev.Data)
			d.bytes += len(ev.Data)
		}
	}
	for len(d.order) > 1 && (len(d.order) > maxRedoRuns || d.bytes > maxRedoBytes) {
		old := d.order[0]
		d.removeLocked(old)
		r.log.Error("runtime: too many runs wait for a refused write; one is given up until Reconcile", "run", old.id)
	}
	d.count.Store(int32(len(d.runs)))
	if rec.Append.Finish != nil && d.runs[k] == e {
		f := *rec.Append.Finish
		e.finish = &f
		if !d.running && !r.closing.Load() {
			d.running = true
			d.wg.Add(1)
			go r.redoLoop()
		}
	}
}

// written tells the redo that the store took the end of run k: what it
// kept of the run (events the store refused earlier) is given up, as
// the run is finished without them.
func (d *redo) written(k runKey) {
	if d.count.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removeLocked(k)
}

// settleRefused settles what is kept of the session's runs, or of the
// named ones only, for a purge of them: a run the store has as started
// gets its end written now, so that the purge deletes it as the
// finished run it is (a purge keeps started runs, as turns in flight);
// one whose start the store never took is given up. Once it returns, no
// redo writes them back (one under way has ended).
func (r *Recorder) settleRefused(session runKey, runIDs ...string) {
	d := &r.redo
	if d.count.Load() == 0 {
		return
	}
	var started []runKey
	d.mu.Lock()
	for k, e := range d.runs {
		if e.session != session || (len(runIDs) > 0 && !slices.Contains(runIDs, k.id)) {
			continue
		}
		if e.start == nil && e.finish != nil {
			started = append(started, k) // ended, and in the store as started
		} else {
			d.removeLocked(k) // not in the store, or its turn goes on
		}
	}
	d.mu.Unlock()
	for _, k := range started {
		if !r.redoRun(context.Background(), k) {
			// Refused again: the purge keeps it as started. The redo ends
			// it and purges it once the store takes writes.
			d.mu.Lock()
			if e := d.runs[k]; e != nil {
				e.purge = true
			}
			d.mu.Unlock()
		}
	}
	r.pub.lock(session)() // a redo of the session under way holds it
}

func (d *redo) removeLocked(k runKey) {
	e, ok := d.runs[k]
	if !ok {
		return
	}
	d.bytes -= e.bytes
	delete(d.runs, k)
	d.order = slices.DeleteFunc(d.order, func(o runKey) bool { return o == k })
	d.count.Store(int32(len(d.runs)))
}

// redoLoop writes the due runs again, waiting d.first before the first
// attempt and twice as long after each round that left some unwritten
// (at most maxRedoWait), until none is due or the Recorder closes.
func (r *Recorder) redoLoop() {
	d := &r.redo
	defer d.wg.Done()
	wait := d.first
	for {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-d.stop:
			t.Stop()
			d.mu.Lock()
			d.running = false
			d.mu.Unlock()
			return
		}
		if r.redoRound() {
			wait = d.first
		} else {
			wait = min(2*wait, max(maxRedoWait, d.first))
		}
		d.mu.Lock()
		due := false
		for _, e := range d.runs {
			if e.finish != nil {
				due = true
				break
			}
		}
		if !due || r.closing.Load() {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// due returns the runs whose end is kept (due for a write), oldest
// first.
func (d *redo) due() []runKey {
	d.mu.Lock()
	defer d.mu.Unlock()
	var due []runKey
	for _, k := range d.order {
		if d.runs[k].finish != nil {
			due = append(due, k)
		}
	}
	return due
}

// redoRound writes each due run once, oldest first; it reports whether
// the store took them all.
func (r *Recorder) redoRound() bool {
	d := &r.redo
	due := d.due()
	refused, inARow := 0, 0
	for i, k := range due {
		select {
		case <-d.stop:
			return false
		default:
		}
		if r.redoRun(d.ctx, k) {
			inARow = 0
			continue
		}
		// Refused: to the back of the order, so that a record the store
		// refuses for itself does not hold the others back.
		d.mu.Lock()
		if i := slices.Index(d.order, k); i >= 0 {
			d.order = append(slices.Delete(d.order, i, i+1), k)
		}
		d.mu.Unlock()
		if inARow++; inARow == 3 {
			// The store itself refuses: the rest would wait for it too (a
			// hung database, each its write timeout). The next round.
			refused += len(due) - i
			break
		}
		refused++
	}
	if refused > 0 {
		// One line a round, however many runs wait.
		r.log.Warn("runtime: the store refused the runs' records again; they are tried again", "runs", refused, "err", d.lastErr())
	}
	return refused == 0
}

// redoRun writes the kept records of run k under its session's
// publication lock (which a purge takes after giving up the session's
// runs, so that a purged run is not written back); it reports false
// when the store refused them again.
func (r *Recorder) redoRun(base context.Context, k runKey) bool {
	d := &r.redo
	d.mu.Lock()
	e := d.runs[k]
	d.mu.Unlock()
	if e == nil {
		return true
	}
	unlock := r.pub.lock(e.session)
	defer unlock()
	d.mu.Lock()
	if d.runs[k] != e { // given up meanwhile (a purge, the end written)
		d.mu.Unlock()
		return true
	}
	start, events, finish, purge, run := e.start, e.events, e.finish, e.purge, e.run
	d.mu.Unlock()
	if finish == nil {
		return true // its turn goes on: its end brings it back
	}
	ctx, cancel := context.WithTimeout(base, r.writeTimeout)
	defer cancel()
	if !purge && run.ID != "" {
		if gone := d.gone.Load(); gone != nil && (*gone)(ctx, run) {
			purge = true
		}
	}
	if purge {
		return r.redoGone(ctx, k, e, start != nil, finish)
	}
	if start != nil {
		err := r.store.StartRun(ctx, *start)
		if err != nil && !errors.Is(err, ErrConflict) {
			return r.redoFailed(k, e, err)
		}
		d.mu.Lock()
		if err != nil {
			// The refused start had committed: with its events.
			e.events = e.events[e.startEvents:]
			events = e.events
		}
		e.start, e.startEvents = nil, 0
		d.mu.Unlock()
	}
	stored, err := r.store.Append(ctx, AppendRequest{Tenant: k.tenant, RunID: k.id, Events: events, Finish: finish})
	if err != nil {
		return r.redoFailed(k, e, err)
	}
	r.broker.Publish(stored...)
	d.mu.Lock()
	if d.runs[k] == e {
		d.removeLocked(k)
	}
	d.mu.Unlock()
	r.writtenAfterAll(k)
	r.log.Info("runtime: a refused write of a run's end was written", "run", k.id, "status", finish.Status)
	return true
}

// writtenAfterAll forgets the write failures of run k kept for Flush
// and Close: the redo wrote the run after all.
func (r *Recorder) writtenAfterAll(k runKey) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	r.failures = slices.DeleteFunc(r.failures, func(f failure) bool { return f.run == k })
}

// redoGone settles a kept run whose conversation was deleted (by a purge
// here, or on another replica): one the store never had is given up;
// one it has as started (which a purge keeps, as a turn in flight) gets
// its end, and is purged.
func (r *Recorder) redoGone(ctx context.Context, k runKey, e *redoRun, unstarted bool, finish *FinishRequest) bool {
	d := &r.redo
	if !unstarted {
		p, ok := r.store.(SessionPurger)
		if !ok {
			return r.redoFailed(k, e, ErrInvalidConfig)
		}
		if _, err := r.store.Append(ctx, AppendRequest{Tenant: k.tenant, RunID: k.id, Finish: finish}); err != nil && !errors.Is(err, ErrConflict) {
			return r.redoFailed(k, e, err)
		}
		if _, err := p.PurgeSession(ctx, PurgeRequest{Tenant: k.tenant, SessionID: e.session.id, Only: []string{k.id}}); err != nil {
			return r.redoFailed(k, e, err)
		}
	}
	d.mu.Lock()
	if d.runs[k] == e {
		d.removeLocked(k)
	}
	d.mu.Unlock()
	r.log.Info("runtime: a refused run was given up: its conversation does not exist (deleted, or never stored: a first turn that failed)",
		"run", k.id)
	return true
}

// SetConversationGone sets how the Recorder tells that the conversation
// of a run whose records the store refused was deleted meanwhile (its
// session gone, or begun again after the run started by another turn:
// not the session the run's own turn created), typically on
// another replica: such a run is not written back when the store takes
// writes again (a run the store has as started gets its end and is
// purged). A server sets it before it takes turns; nil (the default)
// writes every refused run back.
func (r *Recorder) SetConversationGone(gone func(ctx context.Context, run Run) bool) {
	if gone == nil {
		r.redo.gone.Store(nil)
		return
	}
	r.redo.gone.Store(&gone)
}

// redoFailed handles a refused redo of run k: a run the store no longer
// has (purged) or has finished, or a record it can never take, is given
// up; anything else is tried again.
func (r *Recorder) redoFailed(k runKey, e *redoRun, err error) bool {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalidRequest) || r.now().Sub(e.since) > maxRedoAge {
		d := &r.redo
		d.mu.Lock()
		if d.runs[k] == e {
			d.removeLocked(k)
		}
		d.mu.Unlock()
		if errors.Is(err, ErrNotFound) {
			// Purged meanwhile, with its session (PurgeRequest.Committed).
			r.log.Info("runtime: a refused write of a run's end is given up: the run is gone, its session deleted", "run", k.id)
			return true
		}
		r.log.Warn("runtime: a refused write of a run's end is given up", "run", k.id, "err", err)
		return true
	}
	r.redo.mu.Lock()
	r.redo.last = err
	r.redo.mu.Unlock()
	return false
}

// closeRedo stops the redo goroutine, cutting a write under way short,
// and waits for it while ctx lasts, then tries the due runs once more
// while ctx lasts (the store may take writes again by now): the runs it
// still keeps stay as the store has them, for Reconcile at the next
// start (a run whose start it never took is lost).
func (r *Recorder) closeRedo(ctx context.Context) {
	d := &r.redo
	d.mu.Lock()
	if d.stop != nil {
		select {
		case <-d.stop:
		default:
			close(d.stop)
			d.cancel()
		}
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	due := d.due()
	for _, k := range due {
		if ctx.Err() != nil {
			break
		}
		r.redoRun(ctx, k)
	}
	d.mu.Lock()
	n := len(d.runs)
	d.mu.Unlock()
	if n > 0 {
		r.log.Error("runtime: runs whose end the store refused are left for Reconcile", "runs", n)
	}
}
