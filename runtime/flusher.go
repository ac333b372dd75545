package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file is the Recorder's group commit: turns nobody watches hand
// their records to a FIFO queue, and one flusher goroutine at a time
// writes what is queued in one store transaction.

// queued is one record waiting for the flusher.
type queued struct {
	rec    TurnRecord
	key    runKey    // {tenant, session id}: per-session ordering
	turn   *Turn     // the turn the record is of (nil for none)
	final  bool      // the turn's final record: the turn leaves the live map once written
	at     time.Time // when it was queued (the linger is counted from the oldest)
	seq    uint64    // its position in the queue, from 1
	events int
}

// failure is a record the flusher could not write, kept for Flush.
type failure struct {
	seq uint64
	err error
	run runKey // {tenant, run id}: a redo that writes the run clears it
}

// maxFailures bounds the write failures kept for Flush; older ones are
// only logged.
const maxFailures = 64

// broadcast wakes everyone waiting on the queue; r.qmu is held.
func (r *Recorder) broadcast() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// kickLocked ends the flusher's linger early; r.qmu is held.
func (r *Recorder) kickLocked() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// enqueue hands q to the flusher, waiting while the queue is full (the
// back-pressure: records are never dropped). It reports false, without
// queueing, once the Recorder is closed: the caller then writes itself.
func (r *Recorder) enqueue(q *queued) bool {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	for !r.closed && len(r.queue) >= r.queueTurns {
		r.kickLocked()
		ch := r.changed
		r.qmu.Unlock()
		<-ch
		r.qmu.Lock()
	}
	if r.closed {
		return false
	}
	r.enq++
	q.seq, q.at, q.events = r.enq, time.Now(), len(q.rec.Append.Events)
	r.queue = append(r.queue, q)
	r.queuedEvents += q.events
	r.perSession[q.key]++
	if len(r.queue) >= r.batchTurns || r.queuedEvents >= r.batchEvents {
		r.kickLocked()
	}
	if !r.running {
		r.running = true
		r.flushers.Go(r.flushLoop)
	}
	return true
}

// waitSession waits until no record of the session is queued or being
// written, so that a write on the turn's own path cannot overtake them
// (a session's event IDs increase in the order its turns ran).
func (r *Recorder) waitSession(key runKey) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	for r.perSession[key] > 0 {
		r.flushTo = max(r.flushTo, r.enq)
		r.kickLocked()
		ch := r.changed
		r.qmu.Unlock()
		<-ch
		r.qmu.Lock()
	}
}

// flushLoop is the flusher: it writes batches until the queue is empty,
// then exits (enqueue starts another). r.flushers waits for it.
func (r *Recorder) flushLoop() {
	for {
		batch := r.take()
		if batch == nil {
			return
		}
		r.write(batch)
	}
}

// write writes a batch taken with takeLocked (r.qmu not held), then
// counts it done and wakes the waiters.
func (r *Recorder) write(batch []*queued) {
	var fails []failure
	defer func() {
		// A store that panics fails the batch rather than leave it
		// being written forever (the panic goes on).
		p := recover()
		if p != nil {
			err := fmt.Errorf("runtime: writing run records panicked: %v", p)
			fails = fails[:0]
			for _, q := range batch {
				if q.turn != nil {
					q.turn.writeFailed(err)
				}
				fails = append(fails, failure{q.seq, err, runKey{q.rec.Append.Tenant, q.rec.Append.RunID}})
			}
		}
		r.written(batch, fails)
		if p != nil {
			panic(p)
		}
	}()
	fails = r.writeBatch(batch)
}

// lead writes a batch taken with takeLocked on the caller's goroutine;
// r.qmu is held, released meanwhile, and held again on return, also when
// the store panics (the caller's deferred unlock then holds).
func (r *Recorder) lead(batch []*queued) {
	r.qmu.Unlock()
	defer r.qmu.Lock()
	r.write(batch)
}

// written counts a written batch done, keeps its failures and wakes the
// waiters.
func (r *Recorder) written(batch []*queued, fails []failure) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	for _, q := range batch {
		if r.perSession[q.key]--; r.perSession[q.key] == 0 {
			delete(r.perSession, q.key)
		}
	}
	r.done += uint64(len(batch))
	for _, f := range fails {
		if len(r.failures) == maxFailures {
			r.failures = r.failures[1:]
		}
		r.failures = append(r.failures, f)
	}
	r.writing = false
	r.broadcast()
}

// take returns the next batch, or nil (and marks the flusher stopped)
// when the queue is empty. Unless the batch is full, a flush is waited
// for, or the Recorder is closing, it first lingers until the oldest
// record has waited r.linger.
func (r *Recorder) take() []*queued {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if len(r.queue) == 0 {
		r.running = false
		return nil
	}
	if wait := time.Until(r.queue[0].at.Add(r.linger)); wait > 0 && !r.closed && r.flushTo <= r.done &&
		len(r.queue) < r.batchTurns && r.queuedEvents < r.batchEvents {
		r.qmu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.kick:
		}
		t.Stop()
		r.qmu.Lock()
	}
	select { // a kick for this batch must not cut the next one's linger
	case <-r.kick:
	default:
	}
	// A waiter may have written the queue itself meanwhile, or be
	// writing a batch now: one batch at a time, in queue order.
	for r.writing {
		ch := r.changed
		r.qmu.Unlock()
		<-ch
		r.qmu.Lock()
	}
	if len(r.queue) == 0 {
		r.running = false
		return nil
	}
	return r.takeLocked()
}

// takeLocked takes the next batch off the queue and marks it being
// written; r.qmu is held and no batch is being written.
func (r *Recorder) takeLocked() []*queued {
	r.writing = true
	n, events := 0, 0
	for n < len(r.queue) && n < r.batchTurns && (n == 0 || events+r.queue[n].events <= r.batchEvents) {
		events += r.queue[n].events
		n++
	}
	batch := r.queue[:n:n]
	r.queue = r.queue[n:]
	if len(r.queue) == 0 {
		r.queue = nil
	}
	r.queuedEvents -= events
	return batch
}

// writeBatch writes the batch in one WriteTurns when the store is a
// BatchWriter, and record by record otherwise or when that fails for a
// record (ErrInvalidRequest, ErrConflict, ErrNotFound: so that one bad
// record does not lose the others); a failure of the store itself fails
// every record at once, each kept for the redo. It then publishes the
// stored events and retires the ended turns, and returns the records it
// could not write.
func (r *Recorder) writeBatch(batch []*queued) []failure {
	defer func() {
		r.mu.Lock()
		for _, q := range batch {
			if q.final && q.turn != nil {
				r.retireLocked(q.turn)
			}
		}
		r.mu.Unlock()
	}()
	if bw, ok := r.store.(BatchWriter); ok {
		recs := make([]TurnRecord, len(batch))
		keys := make([]runKey, len(batch))
		for i, q := range batch {
			recs[i], keys[i] = q.rec, q.key
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.writeTimeout)
		unlock := r.pub.lock(keys...)
		var err error
		if m, ok := bw.(*MemoryStore); ok {
			// The records' buffers are the store's now, their events
			// stored in place. (Only the store itself: a type that
			// embeds it has its own WriteTurns to run.)
			if err = m.adoptTurns(ctx, recs); err == nil {
				for _, rec := range recs {
					r.broker.Publish(rec.Append.Events...)
				}
			}
		} else {
			var stored []Event
			if stored, err = bw.WriteTurns(ctx, recs); err == nil {
				r.broker.Publish(stored...)
			}
		}
		unlock()
		cancel()
		if err == nil {
			if r.redo.count.Load() > 0 { // no loop over the batch unless runs wait
				for _, q := range batch {
					if q.rec.Append.Finish != nil {
						r.redo.written(runKey{q.rec.Append.Tenant, q.rec.Append.RunID})
					}
				}
			}
			return nil
		}
		if len(batch) > 1 && !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
			// Not one record's fault (the store down, full, or hung): one
			// by one, each would fail the same way, one after another
			// (each its write timeout, when the store hangs). All fail
			// now, kept for the redo, which writes them run by run.
			r.log.Error("runtime: recording runs failed", "turns", len(batch), "err", err)
			fails := make([]failure, 0, len(batch))
			for _, q := range batch {
				k := runKey{q.rec.Append.Tenant, q.rec.Append.RunID}
				qerr := fmt.Errorf("runtime: record run %q: %w", k.id, err)
				if q.turn != nil {
					q.turn.writeFailed(qerr)
				}
				r.keepRefused(q.rec, q.key, q.turn)
				fails = append(fails, failure{q.seq, qerr, k})
			}
			return fails
		}
		switch {
		case len(batch) > 1 && errors.Is(err, ErrNotFound):
			// A run purged with its session (see runGone): the record
			// is given up below, quietly.
			r.log.Debug("runtime: a group commit failed on a record; writing its turns one by one", "turns", len(batch), "err", err)
		case len(batch) > 1:
			r.log.Warn("runtime: a group commit failed on a record; writing its turns one by one", "turns", len(batch), "err", err)
		case r.runGone(batch[0], err, nil):
			return nil
		default:
			r.log.Error("runtime: recording a run failed", "run", batch[0].rec.Append.RunID, "err", err)
			err = fmt.Errorf("runtime: record run %q: %w", batch[0].rec.Append.RunID, err)
			if t := batch[0].turn; t != nil {
				t.writeFailed(err)
			}
			r.keepRefused(batch[0].rec, batch[0].key, batch[0].turn)
			return []failure{{batch[0].seq, err, runKey{batch[0].rec.Append.Tenant, batch[0].rec.Append.RunID}}}
		}
	}
	var (
		fails  []failure
		broken = map[runKey]bool{} // runs whose start failed: their later records are skipped
		gone   map[runKey]bool     // runs purged with their sessions: their records are given up
	)
	for _, q := range batch {
		k := runKey{q.rec.Append.Tenant, q.rec.Append.RunID}
		var err error
		if broken[k] {
			err = errors.New("its start was not recorded")
		} else if err = r.writeRecord(q.rec, q.key); err != nil && q.rec.Start != nil {
			broken[k] = true
		}
		if err != nil && (gone[k] || r.runGone(q, err, gone)) {
			if gone == nil {
				gone = map[runKey]bool{}
			}
			gone[k] = true
			continue
		}
		if err != nil {
			err = fmt.Errorf("runtime: record run %q: %w", k.id, err)
			r.log.Error("runtime: recording a run failed", "run", k.id, "err", err)
			if q.turn != nil {
				q.turn.writeFailed(err)
			}
			r.keepRefused(q.rec, q.key, q.turn)
			fails = append(fails, failure{q.seq, err, k})
		} else if q.rec.Append.Finish != nil {
			r.redo.written(k)
		}
	}
	return fails
}

// runGone reports whether the store refused q's record because its run
// is gone (ErrNotFound on a record that does not start the run): purged
// with its session, which a delete did while the turn's end was still
// to be written (PurgeRequest.Committed, typically on another process
// sharing the store). The record is given up then, quietly: no failure
// for Flush, nothing kept for the redo, one Info line per run (logged
// tells which runs were logged already, when not nil).
func (r *Recorder) runGone(q *queued, err error, logged map[runKey]bool) bool {
	k := runKey{q.rec.Append.Tenant, q.rec.Append.RunID}
	if q.rec.Start != nil || !errors.Is(err, ErrNotFound) || r.redo.holdsStart(k) || (q.turn != nil && !q.turn.wroteAll()) {
		// Not known to be purged: its start may never have been stored
		// (refused, and not kept for the redo: none, or past its bounds).
		return false
	}
	r.redo.written(k) // anything kept of it goes too
	if !logged[k] {
		r.log.Info("runtime: a run's records were given up: the run is gone, its session deleted", "run", k.id)
	}
	return true
}

// holdsStart reports whether the redo keeps the refused start of run k:
// the store does not have the run because it never took its start, not
// because it was purged.
func (d *redo) holdsStart(k runKey) bool {
	if d.count.Load() == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.runs[k]
	return e != nil && e.start != nil
}

// writeRecord writes one record with StartRun and Append and publishes
// its events.
func (r *Recorder) writeRecord(rec TurnRecord, key runKey) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.writeTimeout)
	defer cancel()
	defer r.pub.lock(key)()
	if bw, ok := r.store.(BatchWriter); ok && rec.Start != nil {
		// A start with its events in one transaction: a refused record
		// leaves no run started without its first events (which a later
		// record's write would then finish without them).
		stored, err := bw.WriteTurns(ctx, []TurnRecord{rec})
		if err != nil {
			return err
		}
		r.broker.Publish(stored...)
		return nil
	}
	if rec.Start != nil {
		if err := r.store.StartRun(ctx, *rec.Start); err != nil {
			return err
		}
	}
	if !rec.Appends() {
		return nil
	}
	stored, err := r.store.Append(ctx, rec.Append)
	if err != nil {
		return err
	}
	r.broker.Publish(stored...)
	return nil
}

// Flush waits until every record queued before the call is written to
// the store (and its events published), cutting the flusher's linger
// short. It returns ctx's error if ctx ends first, and otherwise the
// write failures of those records that no earlier Flush or Close
// returned (they are logged as well; a bounded number is kept). It
// returns at once when nothing is queued. As [Turn.Flush], it writes
// queued records itself when no write is under way.
func (r *Recorder) Flush(ctx context.Context) error {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	target, err := r.waitLocked(ctx)
	if err != nil {
		return err
	}
	var errs []error
	kept := r.failures[:0]
	for _, f := range r.failures {
		if f.seq <= target {
			errs = append(errs, f.err)
		} else {
			kept = append(kept, f)
		}
	}
	r.failures = kept
	return errors.Join(errs...)
}

// waitLocked waits until the records queued so far are written, and
// returns the last one's seq; r.qmu is held (and released meanwhile).
func (r *Recorder) waitLocked(ctx context.Context) (uint64, error) {
	target := r.enq
	return target, r.waitSeqLocked(ctx, target)
}

// waitSeq waits until the records up to queue position seq are written
// (or failed), cutting the linger short: when no batch is being written,
// the caller writes the next one itself rather than wake the flusher and
// wait to be woken. A write it began is not abandoned when ctx ends (it
// is bounded by the write timeout); ctx is checked before each.
func (r *Recorder) waitSeq(ctx context.Context, seq uint64) error {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	return r.waitSeqLocked(ctx, seq)
}

// waitSeqLocked is waitSeq; r.qmu is held (and released meanwhile).
func (r *Recorder) waitSeqLocked(ctx context.Context, seq uint64) error {
	for r.done < seq {
		if !r.writing && len(r.queue) > 0 && ctx.Err() == nil {
			// Nobody is writing: write the next batch here rather than
			// wake the flusher and wait to be woken (the flusher may be
			// lingering; under load a batch is being written and the
			// records queued meanwhile make the next one).
			r.lead(r.takeLocked())
			continue
		}
		ch := r.changed
		r.qmu.Unlock()
		select {
		case <-ch:
			r.qmu.Lock()
		case <-ctx.Done():
			r.qmu.Lock()
			return fmt.Errorf("runtime: flush: %w", context.Cause(ctx))
		}
	}
	return nil
}

// wait is Flush without its failures, for readers.
func (r *Recorder) wait(ctx context.Context) error {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	_, err := r.waitLocked(ctx)
	return err
}

// readStore is the Store that Recorder.Store returns.
type readStore struct {
	Store
	r *Recorder
}

func (s readStore) Run(ctx context.Context, tenant, id string) (*Run, error) {
	if err := s.r.wait(ctx); err != nil {
		return nil, err
	}
	run, err := s.Store.Run(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		s.r.mu.Lock()
		t := s.r.live[runKey{tenant, id}]
		s.r.mu.Unlock()
		if t != nil {
			started := t.run
			return &started, nil
		}
	}
	return run, err
}

func (s readStore) Events(ctx context.Context, req EventsRequest) ([]Event, error) {
	if err := s.r.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.Events(ctx, req)
}

func (s readStore) ListRuns(ctx context.Context, req ListRunsRequest) (ListRunsResponse, error) {
	if err := s.r.wait(ctx); err != nil {
		return ListRunsResponse{}, err
	}
	return s.Store.ListRuns(ctx, req)
}

// Close drains the queue: it waits, up to ctx, until every queued record
// is written and the flusher has stopped, and returns what [Flush]
// would. Turns that end after Close write on their own path, as with
// [RecorderConfig.Synchronous]. Close is idempotent and does not close
// the Broker; call it once the server stops accepting turns.
func (r *Recorder) Close(ctx context.Context) error {
	r.qmu.Lock()
	if !r.closed {
		r.closed = true
		r.closing.Store(true)
		r.broadcast()  // ends waits for room: those turns write themselves
		r.kickLocked() // ends a linger: a flusher whose records a Flush wrote exits
	}
	r.qmu.Unlock()
	err := r.Flush(ctx)
	if ctx.Err() == nil {
		r.flushers.Wait()
	}
	r.closeRedo(ctx)
	return err
}
