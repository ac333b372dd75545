package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// Group commit. Every write of a Store (sessions, checkpoint and paused
// records, runs, leases) is a writeOp queued to one writer goroutine
// owned by the Store. The goroutine takes the first queued write and
// whatever else is queued behind it (at most maxBatch), runs them in
// one transaction, each inside its own SAVEPOINT so that a write that
// fails is rolled back alone and reported to its own caller, commits
// once, and only then hands every caller its result. An empty queue
// means no waiting: a lone write is committed at once, and batches form
// only from writes that arrive while a commit is in progress. A write
// that finds the writer idle and nothing queued commits on its caller's
// goroutine (the writer is marked busy meanwhile), saving the two
// goroutine handoffs of a lone write.

// maxBatch bounds the writes committed together.
const maxBatch = 128

// writeOp states: a queued op is taken by the writer or canceled by its
// caller, whichever comes first.
const (
	opQueued int32 = iota
	opTaken
	opCanceled
)

// writeOp is one write waiting for, or run by, the writer goroutine.
type writeOp struct {
	ctx    context.Context // the caller's values, without its cancellation
	op, id string          // for error messages
	cat    errcat.Category // of a failed BEGIN or COMMIT
	fn     func(ctx context.Context, tx *sql.Tx) error
	state  atomic.Int32
	err    error      // fn's error, then the transaction's
	done   chan error // receives the outcome once, after the commit
	seq    int64      // the commit's walSyncer sequence (DurabilityFull)
}

// writeQueue is the Store's group-commit state.
type writeQueue struct {
	mu      sync.Mutex
	cond    sync.Cond // signaled when ops are queued or closing is set
	ops     []*writeOp
	closing bool // no more ops are accepted
	abandon bool // Close's ctx ended: fail what is still queued
	busy    bool // a batch (or an inline write) is being committed
	done    chan struct{}

	ckptKick chan struct{} // a commit happened: the WAL grew
	ckptDone chan struct{}

	batches atomic.Int64 // transactions run, for tests
	// onBatch, when set (by tests), runs on the writer goroutine after it
	// took a batch of n writes and before it runs them.
	onBatch atomic.Pointer[func(n int)]
}

// startWriter starts the writer goroutine; Close stops it.
func (s *Store) startWriter() {
	s.wq.cond.L = &s.wq.mu
	s.wq.done = make(chan struct{})
	s.wq.ckptKick, s.wq.ckptDone = make(chan struct{}, 1), make(chan struct{})
	go s.runWriter()
	go s.runCheckpointer()
}

// writerAutoCheckpoint is the WAL size, in pages, at which the writer
// connection checkpoints the WAL itself: a safety net for when the
// checkpointer goroutine falls behind. Normally the checkpointer copies
// the WAL into the database file (and fsyncs it) on its own connection,
// so commits do not wait for it.
const writerAutoCheckpoint = 16384

// checkpointInterval spaces the checkpointer's passes. A page that
// many commits change between two passes (an index's last page, a busy
// session's) is copied to the database file once per pass, so passes
// four times rarer than at 50 ms copy fewer pages per turn (wrk against
// armature serve, alternated: 3–4 % more turns/s, 3–6 % less CPU per
// turn), for a WAL holding up to a fifth of a second of writes.
const checkpointInterval = 200 * time.Millisecond

// runCheckpointer runs passive WAL checkpoints on its own connection
// after commits, at most one per checkpointInterval, until the writer
// stopped. A passive checkpoint never blocks the writer or readers.
func (s *Store) runCheckpointer() {
	q := &s.wq
	defer close(q.ckptDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for range q.ckptKick {
		if _, err := s.ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			s.log.Warn("sqlite: WAL checkpoint failed", "path", s.path, "err", err)
		}
		t.Reset(checkpointInterval)
		select {
		case <-t.C:
		case <-q.done:
		}
	}
}

// stopWriter stops accepting writes and waits until the writer has
// committed everything queued. If ctx ends first, writes not yet taken
// fail with session.ErrClosed; the batch in progress still completes.
func (s *Store) stopWriter(ctx context.Context) {
	if s.wq.done == nil {
		return
	}
	s.wq.mu.Lock()
	s.wq.closing = true
	s.wq.cond.Signal()
	s.wq.mu.Unlock()
	select {
	case <-s.wq.done:
	case <-ctx.Done():
		s.wq.mu.Lock()
		s.wq.abandon = true
		s.wq.mu.Unlock()
		<-s.wq.done
	}
	close(s.wq.ckptKick)
	<-s.wq.ckptDone
}

// write runs fn in a write transaction on the writer goroutine and
// returns once that transaction committed (nil) or fn failed (fn's
// error; its changes are rolled back, the batch's others are not). A
// failed BEGIN or COMMIT is fn's caller's failure too, categorized cat
// (uncategorized when cat is ""). If ctx ends while the write is still
// queued, it is dropped and ctx's error returned; once taken, it runs to
// completion with ctx's values but not its cancellation, and write waits
// for its commit. fn runs on another goroutine: what it sets is visible
// to the caller after write returns.
func (s *Store) write(ctx context.Context, op, id string, cat errcat.Category,
	fn func(ctx context.Context, tx *sql.Tx) error,
) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	w := &writeOp{ctx: ctx, op: op, id: id, cat: cat, fn: fn, done: make(chan error, 1)}
	if ctx.Done() != nil {
		w.ctx = context.WithoutCancel(ctx)
	}
	q := &s.wq
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrClosed)
	}
	if q.claimIdleLocked() {
		// The writer is idle: commit this lone write right here.
		q.mu.Unlock()
		w.state.Store(opTaken)
		if hook := q.onBatch.Load(); hook != nil {
			(*hook)(1)
		}
		s.commitBatch([]*writeOp{w})
		q.release()
		return s.durable(w, w.err)
	}
	q.ops = append(q.ops, w)
	q.cond.Signal()
	q.mu.Unlock()
	select {
	case err := <-w.done:
		return s.durable(w, err)
	case <-ctx.Done():
		if w.state.CompareAndSwap(opQueued, opCanceled) {
			return fmt.Errorf("sqlite: %s %q: %w", op, id, ctx.Err())
		}
		return s.durable(w, <-w.done) // taken: it is applied, or not, with its batch
	}
}

// durable returns err, after waiting, under DurabilityFull, until the
// commit of a write that succeeded is on the disk (walSyncer). A failed
// fsync fails the write in its category: it committed, but its
// durability is unknown.
func (s *Store) durable(w *writeOp, err error) error {
	if err != nil || s.wal == nil || w.seq == 0 {
		return err
	}
	if err := s.wal.wait(w.seq); err != nil {
		s.log.Error("sqlite: fsync of the WAL failed", "path", s.path, "err", err)
		return s.fail(w.ctx, w.op, w.id, w.cat, err)
	}
	return nil
}

// claimIdleLocked gives the caller the write connection when the writer
// is idle, nothing is queued and the Store is not closing: it marks the
// writer busy (the writer goroutine then waits, as for a batch) and
// reports true; the caller must call release when done. q.mu is held.
func (q *writeQueue) claimIdleLocked() bool {
	if q.busy || len(q.ops) > 0 || q.closing {
		return false
	}
	q.busy = true
	return true
}

// release ends a claimIdleLocked claim; writes queued meanwhile, or
// Close, wake the writer.
func (q *writeQueue) release() {
	q.mu.Lock()
	q.busy = false
	q.cond.Broadcast()
	q.mu.Unlock()
}

// runWriter is the writer goroutine: it commits queued writes in
// batches until the Store closes and the queue is empty.
func (s *Store) runWriter() {
	q := &s.wq
	defer close(q.done)
	batch := make([]*writeOp, 0, maxBatch)
	for {
		q.mu.Lock()
		for (len(q.ops) == 0 && !q.closing) || q.busy {
			q.cond.Wait()
		}
		if len(q.ops) == 0 {
			q.mu.Unlock()
			return
		}
		q.busy = true
		abandon := q.abandon
		n := 0
		for _, w := range q.ops {
			if len(batch) == maxBatch {
				break
			}
			n++
			if w.state.CompareAndSwap(opQueued, opTaken) {
				batch = append(batch, w)
			}
		}
		rest := copy(q.ops, q.ops[n:])
		clear(q.ops[rest:])
		q.ops = q.ops[:rest]
		q.mu.Unlock()

		switch {
		case len(batch) == 0: // all canceled
		case abandon:
			for _, w := range batch {
				w.done <- fmt.Errorf("sqlite: %s %q: %w", w.op, w.id, session.ErrClosed)
			}
		default:
			if hook := q.onBatch.Load(); hook != nil {
				(*hook)(len(batch))
			}
			s.commitBatch(batch)
			for _, w := range batch {
				w.done <- w.err
			}
		}
		clear(batch)
		batch = batch[:0]
		q.mu.Lock()
		q.busy = false
		q.mu.Unlock()
	}
}

// commitBatch runs the batch's writes in one transaction and sets each
// op's err. A lone write needs no savepoint: if it fails, the whole
// transaction is rolled back. A failure of the transaction itself
// (BEGIN, a savepoint statement, COMMIT) fails every write of the batch
// that had not failed on its own.
func (s *Store) commitBatch(batch []*writeOp) {
	s.wq.batches.Add(1)
	bg := context.Background()
	tx, err := s.writer.BeginTx(bg, nil)
	if err != nil {
		s.failBatch(batch, err)
		return
	}
	lone := len(batch) == 1
	applied := 0
	// A sole writer's version effects (versions.pending) of the writes
	// that fail are dropped; those of a transaction that commits are
	// applied before any of its writers returns.
	defer s.vers.discard(0)
	for _, w := range batch {
		mark := len(s.vers.pending)
		if lone {
			if w.err = w.fn(w.ctx, tx); w.err == nil {
				applied++
			}
			continue
		}
		if _, err := tx.StmtContext(bg, s.st.savepoint).ExecContext(bg); err != nil {
			_ = tx.Rollback()
			s.failBatch(batch, err)
			return
		}
		if w.err = w.fn(w.ctx, tx); w.err != nil {
			s.vers.discard(mark)
			_, err = tx.StmtContext(bg, s.st.rollbackTo).ExecContext(bg)
		} else {
			applied++
		}
		if err == nil {
			_, err = tx.StmtContext(bg, s.st.release).ExecContext(bg)
		}
		if err != nil { // the transaction is gone (SQLite rolled it back)
			_ = tx.Rollback()
			s.failBatch(batch, err)
			return
		}
	}
	if applied == 0 {
		_ = tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		s.failBatch(batch, err)
		return
	}
	s.vers.applied()
	if s.wal != nil {
		seq := s.wal.commit()
		for _, w := range batch {
			w.seq = seq
		}
	}
	select {
	case s.wq.ckptKick <- struct{}{}:
	default:
	}
}

// failBatch fails every write of the batch that has not failed on its
// own with err, the failure of the batch's transaction.
func (s *Store) failBatch(batch []*writeOp, err error) {
	for _, w := range batch {
		if w.err == nil {
			w.err = s.fail(w.ctx, w.op, w.id, w.cat, err)
		}
	}
}
