package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/runtime"
)

// Group commit (runtime.BatchWriter): many turns' records in one write
// transaction, with multi-row INSERTs. A run started and finished in
// the same batch (the common case: a whole turn) is inserted in its
// final state, so it costs one row and no UPDATE; its events are one
// chunk row, in multi-row INSERTs shared with the other runs of the
// batch.

const (
	// batchRunRows and batchChunkRows are the rows of one multi-row
	// INSERT (17 and 8 bound parameters per row, far below SQLite's
	// 32766).
	batchRunRows   = 32
	batchChunkRows = 64

	batchRunsSQL = `INSERT INTO runs (tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id,
		status, last_seq, started_at, ended_at, error_bucket, error_category, error_message, output, conversation_id, message_id) VALUES `
	batchRunRow    = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	batchRunsTail  = ` ON CONFLICT (tenant, id) DO NOTHING`
	batchChunksSQL = `INSERT INTO run_event_chunks (first_id, tenant, run_id, session_id, first_seq, n, size, data) VALUES `
	batchChunkRow  = `(?, ?, ?, ?, ?, ?, ?, ?)`
	runRowParams   = 17
	chunkRowParams = 8
)

// batchStmts caches the multi-row INSERTs by row count (negative for
// event chunks), prepared on the writer connection on first use; they
// close with it.
type batchStmts struct {
	mu sync.Mutex
	m  map[int]*sql.Stmt
}

// batchStmt returns the multi-row INSERT of rows runs (chunks false)
// or event chunks. It uses the writer connection: call it outside a
// write transaction.
func (s *Store) batchStmt(ctx context.Context, chunks bool, rows int) (*sql.Stmt, error) {
	key := rows
	if chunks {
		key = -rows
	}
	s.bst.mu.Lock()
	defer s.bst.mu.Unlock()
	if st := s.bst.m[key]; st != nil {
		return st, nil
	}
	head, row, tail := batchRunsSQL, batchRunRow, batchRunsTail
	if chunks {
		head, row, tail = batchChunksSQL, batchChunkRow, ""
	}
	st, err := s.writer.PrepareContext(ctx, head+strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ")+tail)
	if err != nil {
		return nil, err
	}
	if s.bst.m == nil {
		s.bst.m = make(map[int]*sql.Stmt, batchRunRows+batchChunkRows)
	}
	s.bst.m[key] = st
	return st, nil
}

var _ runtime.BatchWriter = (*RunStore)(nil)

// batchRun is a run as the batch's records leave it.
type batchRun struct {
	key    [2]string              // tenant, id
	fresh  bool                   // started in this batch: inserted in its final state
	run    runtime.Run            // fresh runs
	head   runHead                // as the batch leaves it
	read   runHead                // existing runs: as the batch found it
	cached bool                   // read comes from the Store's cache of heads
	f      *runtime.FinishRequest // finished in this batch
}

// WriteTurns writes the records in one write transaction (the
// runtime.BatchWriter capability): runs started in the batch with one
// multi-row INSERT per 32 runs, already in their final state when the
// batch also finishes them, and the events of each record as one chunk
// row, with one multi-row INSERT per 64 chunks; event ids, taken for
// the whole batch at once, increase in record order. It is atomic: a
// run that exists (ErrConflict), a record for a run that is not started
// (ErrNotFound, ErrConflict) or an invalid record fails the whole
// batch.
func (rs *RunStore) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	const op = "write turns of run"
	for i, tr := range turns {
		if err := tr.Validate(); err != nil {
			return nil, fmt.Errorf("sqlite: %s %q (record %d): %w", op, tr.Append.RunID, i, err)
		}
	}
	if len(turns) == 0 {
		return nil, nil
	}
	if err := rs.start(ctx, op, turns[0].Append.RunID); err != nil {
		return nil, err
	}
	// Prepare the INSERTs first: the transaction holds the one writer
	// connection.
	nRuns, nChunks := 0, 0
	for _, tr := range turns {
		if tr.Start != nil {
			nRuns++
		}
		if len(tr.Append.Events) > 0 {
			nChunks++
		}
	}
	stmts := map[int]*sql.Stmt{}
	for _, n := range []int{min(nRuns, batchRunRows), nRuns % batchRunRows, -min(nChunks, batchChunkRows), -(nChunks % batchChunkRows)} {
		if n == 0 || stmts[n] != nil {
			continue
		}
		st, err := rs.s.batchStmt(ctx, n < 0, max(n, -n))
		if err != nil {
			return nil, rs.s.fail(ctx, op, turns[0].Append.RunID, "", err)
		}
		stmts[n] = st
	}
	out, runs, err := rs.writeBatch(ctx, op, turns, stmts, true)
	if errors.Is(err, errStaleHead) {
		// A run changed since this Store last wrote it (another Store of
		// the file wrote it): again, with every head read in the
		// transaction.
		rs.s.heads.forget(turns)
		out, runs, err = rs.writeBatch(ctx, op, turns, stmts, false)
	}
	if err != nil {
		rs.s.heads.forget(turns)
		return nil, err
	}
	rs.s.heads.remember(runs)
	var n int64
	for _, tr := range turns {
		if tr.Start != nil {
			n += runtime.RunSize(*tr.Start) - int64(len(tr.Start.Output))
		}
		if tr.Append.Finish != nil {
			n += runtime.FinishSize(*tr.Append.Finish)
		}
	}
	rs.grew(n + appendSize(out, nil))
	return out, nil
}

// writeBatch writes the records in one write transaction and returns
// the stored events and the batch's runs as it left them. With cached
// set, a run this Store started and last wrote is not read: its head
// comes from the Store's cache (runHeads), and the UPDATE that ends the
// batch's writes to it checks that the row is still as cached, failing
// with errStaleHead otherwise.
func (rs *RunStore) writeBatch(ctx context.Context, op string, turns []runtime.TurnRecord, stmts map[int]*sql.Stmt,
	cached bool) ([]runtime.Event, []*batchRun, error) {
	nChunks, nEvents, dataLen := 0, 0, 0
	for _, tr := range turns {
		if len(tr.Append.Events) > 0 {
			nChunks++
		}
		nEvents += len(tr.Append.Events)
		for _, e := range tr.Append.Events {
			dataLen += len(e.Data)
		}
	}
	var (
		out  []runtime.Event
		list []*batchRun // the batch's runs, in first-record order
	)
	err := rs.write(ctx, op, turns[0].Append.RunID, func(ctx context.Context, tx *sql.Tx) error {
		// The stored events, and their data copied into one buffer.
		out = make([]runtime.Event, 0, nEvents)
		list = list[:0]
		chunks := make([]int, 0, nChunks+1) // chunk i is out[chunks[i]:chunks[i+1]]
		data := make([]byte, 0, dataLen)
		now := rs.s.now()
		runs := make(map[[2]string]*batchRun, len(turns))
		var fresh, existing []*batchRun
		for _, tr := range turns {
			id := tr.Append.RunID
			k := [2]string{tr.Append.Tenant, id}
			br := runs[k]
			switch {
			case tr.Start != nil && br != nil:
				return fmt.Errorf("sqlite: %s %q: %w: the run exists", op, id, runtime.ErrConflict)
			case tr.Start != nil:
				run := *tr.Start
				if run.StartedAt.IsZero() {
					run.StartedAt = now
				}
				br = &batchRun{key: k, fresh: true, run: run, head: runHead{status: string(runtime.StatusStarted),
					session: run.SessionID, agent: run.AgentID, parent: run.ParentID}}
				runs[k] = br
				fresh = append(fresh, br)
				list = append(list, br)
			case br == nil && tr.Appends():
				h, ok := runHead{}, false
				if cached {
					h, ok = rs.s.heads.get(k)
				}
				if !ok {
					var err error
					if h, err = rs.head(ctx, tx, op, tr.Append.Tenant, id, tr.Append.Finish); err != nil {
						return err
					}
				}
				br = &batchRun{key: k, head: h, read: h, cached: ok}
				runs[k] = br
				existing = append(existing, br)
				list = append(list, br)
			}
			if !tr.Appends() {
				continue
			}
			if !runtime.Writable(runtime.Status(br.head.status), br.head.category, tr.Append.Finish) {
				return fmt.Errorf("sqlite: %s %q: %w: the run is %s", op, id, runtime.ErrConflict, br.head.status)
			}
			if len(tr.Append.Events) > 0 {
				chunks = append(chunks, len(out))
			}
			for _, e := range tr.Append.Events {
				br.head.lastSeq++
				e, data = stamp(e, tr.Append.Tenant, id, br.head, br.head.lastSeq, now, data)
				out = append(out, e)
			}
			if f := tr.Append.Finish; f != nil {
				g := *f
				g.Tenant, g.RunID = tr.Append.Tenant, id
				if g.EndedAt.IsZero() {
					g.EndedAt = now
				}
				br.f = &g
				br.head.status, br.head.category = string(g.Status), ""
				if g.Error != nil {
					br.head.category = g.Error.Category
				}
			}
		}
		if err := rs.insertRuns(ctx, tx, op, stmts, fresh); err != nil {
			return err
		}
		// The runs that existed first: a stale cached head fails before
		// its events collide with the run's.
		for _, br := range existing {
			if err := rs.updateRun(ctx, tx, op, br); err != nil {
				return err
			}
		}
		return rs.insertEvents(ctx, tx, op, stmts, out, append(chunks, len(out)))
	})
	return out, list, err
}

// updateRun writes what the batch did to a run that existed before it
// (its last seq and, when the batch finished it, its end) with one
// UPDATE of the row as the batch found it: no row matches when the run
// changed since its head was read or cached (errStaleHead).
func (rs *RunStore) updateRun(ctx context.Context, tx *sql.Tx, op string, br *batchRun) error {
	id, r := br.key[1], br.read
	var (
		res sql.Result
		err error
	)
	if f := br.f; f != nil {
		var e runtime.RunError
		if f.Error != nil {
			e = *f.Error
		}
		has := f.Error != nil
		res, err = tx.StmtContext(ctx, rs.s.rst.end).ExecContext(ctx, br.head.lastSeq, string(f.Status), nullBytes(f.Output),
			nullString(e.Bucket, has), nullString(e.Category, has), nullString(e.Message, has), f.InvocationID,
			nanotime.Of(f.EndedAt), br.key[0], id, r.lastSeq, r.session, r.agent, r.parent)
	} else {
		res, err = tx.StmtContext(ctx, rs.s.rst.advance).ExecContext(ctx, br.head.lastSeq,
			br.key[0], id, r.lastSeq, r.session, r.agent, r.parent)
	}
	if err != nil {
		return rs.s.fail(ctx, op, id, "", err)
	}
	switch n, err := res.RowsAffected(); {
	case err != nil:
		return rs.s.fail(ctx, op, id, "", err)
	case n == 1:
		return nil
	case br.cached:
		return errStaleHead
	default: // read in this transaction: cannot happen
		return fmt.Errorf("sqlite: %s %q: the run changed in its own transaction", op, id)
	}
}

// insertRuns inserts the batch's new runs, in order, in the state the
// batch leaves them.
func (rs *RunStore) insertRuns(ctx context.Context, tx *sql.Tx, op string, stmts map[int]*sql.Stmt, runs []*batchRun) error {
	args := make([]any, 0, min(len(runs), batchRunRows)*runRowParams)
	for len(runs) > 0 {
		chunk := runs[:min(len(runs), batchRunRows)]
		runs = runs[len(chunk):]
		args = args[:0]
		for _, br := range chunk {
			r := br.run
			status, invocation, ended := runtime.StatusStarted, r.InvocationID, int64(0)
			var (
				e      runtime.RunError
				has    bool
				output []byte
			)
			if f := br.f; f != nil {
				status, invocation, ended, output = f.Status, f.InvocationID, nanotime.Of(f.EndedAt), f.Output
				if f.Error != nil {
					e, has = *f.Error, true
				}
			}
			args = append(args, r.Tenant, r.ID, r.SessionID, r.AgentID, r.ParentID, r.CorrelationID, invocation,
				string(status), br.head.lastSeq, nanotime.Of(r.StartedAt), ended,
				nullString(e.Bucket, has), nullString(e.Category, has), nullString(e.Message, has), nullBytes(output),
				r.ConversationID, r.MessageID)
		}
		res, err := tx.StmtContext(ctx, stmts[len(chunk)]).ExecContext(ctx, args...)
		if err != nil {
			return rs.s.fail(ctx, op, chunk[0].run.ID, "", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return rs.s.fail(ctx, op, chunk[0].run.ID, "", err)
		} else if n != int64(len(chunk)) {
			return fmt.Errorf("sqlite: %s %q: %w: a run of the batch exists", op, chunk[0].run.ID, runtime.ErrConflict)
		}
	}
	return nil
}

// insertEvents stores the events as chunks, chunk i being
// evs[bounds[i]:bounds[i+1]] (one run's consecutive seqs), and sets
// their ids: all taken at once, in order.
func (rs *RunStore) insertEvents(ctx context.Context, tx *sql.Tx, op string, stmts map[int]*sql.Stmt, evs []runtime.Event,
	bounds []int) error {
	if len(evs) == 0 {
		return nil
	}
	first, err := rs.takeIDs(ctx, tx, int64(len(evs)))
	if err != nil {
		return rs.s.fail(ctx, op, evs[0].RunID, "", err)
	}
	for i := range evs {
		evs[i].ID = first + int64(i)
	}
	// Encode every chunk into one buffer, then bind slices of it.
	nc := len(bounds) - 1
	enc := make([]byte, 0, chunkLen(evs)+nc)
	type encoded struct {
		start, end int
		size       int64
	}
	chunks := make([]encoded, nc)
	for i := range chunks {
		c := &chunks[i]
		c.start = len(enc)
		enc, c.size = appendChunk(enc, evs[bounds[i]:bounds[i+1]])
		c.end = len(enc)
	}
	args := make([]any, 0, min(nc, batchChunkRows)*chunkRowParams)
	for c := 0; c < nc; {
		rows := min(nc-c, batchChunkRows)
		args = args[:0]
		for i := c; i < c+rows; i++ {
			e, ch := evs[bounds[i]], chunks[i]
			args = append(args, e.ID, e.Tenant, e.RunID, e.SessionID, e.Seq, bounds[i+1]-bounds[i], ch.size,
				enc[ch.start:ch.end:ch.end])
		}
		if _, err := tx.StmtContext(ctx, stmts[-rows]).ExecContext(ctx, args...); err != nil {
			return rs.s.fail(ctx, op, evs[bounds[c]].RunID, "", err)
		}
		c += rows
	}
	return nil
}
