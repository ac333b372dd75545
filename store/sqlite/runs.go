package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
)

// RunStore is the runtime.Store of a [Store]: run records and their
// events in the runs and run_event_chunks tables of the same file
// (schema migrations 4 and 9), written through the same single writer
// connection and read through the same reader pool. Get it with
// [Store.Runs]; it is closed with its Store. It is safe for concurrent
// use, and implements runtime.Recoverable.
//
// An Append (events plus, optionally, the run's finish) is one write
// transaction, and its events one chunk row. Event ids come from the
// run_event_ids counter, taken under SQLite's write lock, so they
// increase in commit order across every process sharing the file, and
// are never reused.
//
// Errors carry the "sqlite:" prefix and wrap runtime.ErrNotFound,
// runtime.ErrInvalidRequest, runtime.ErrConflict, session.ErrClosed for
// a closed Store, a done context's own error, or [ErrCorrupt] for a
// stored row that cannot be decoded. Database failures are wrapped
// without an errcat category.
type RunStore struct {
	s *Store
}

var (
	_ runtime.Store       = (*RunStore)(nil)
	_ runtime.Recoverable = (*RunStore)(nil)
)

// Runs returns the runtime.Store backed by this Store's file.
func (s *Store) Runs() *RunStore { return &RunStore{s: s} }

// runStatements are the runs statements prepared on Open; ListRuns
// builds its query per filter.
type runStatements struct {
	insert      *sql.Stmt // writer
	head        *sql.Stmt // writer: a run's state for Append / Finish
	ids         *sql.Stmt // writer: takes event ids
	insChunk    *sql.Stmt // writer
	setSeq      *sql.Stmt // writer
	finish      *sql.Stmt // writer
	advance     *sql.Stmt // writer: a batch's events on a run it found as given
	end         *sql.Stmt // writer: advance and finish
	get         *sql.Stmt // reader
	exists      *sql.Stmt // reader
	runEvs      *sql.Stmt // reader
	sessEvs     *sql.Stmt // reader
	unfinished  *sql.Stmt // reader
	listTenant  *sql.Stmt // reader
	listSession *sql.Stmt // reader
	listParent  *sql.Stmt // reader
	listMessage *sql.Stmt // reader: a message id prefix with an end
	listMsgFrom *sql.Stmt // reader: a message id prefix without an end
}

// runColumns are the columns scanRun reads, in order.
const runColumns = `pos, tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id, status,
	started_at, ended_at, error_bucket, error_category, error_message, output, conversation_id, message_id`

// chunkColumns are the columns Events reads, in order (c is
// run_event_chunks, r the run).
const chunkColumns = `c.first_id, c.first_seq, c.n, c.data, c.run_id, r.parent_id, c.session_id, r.agent_id, c.tenant`

const (
	runInsertSQL = `INSERT INTO runs (tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id,
		status, last_seq, started_at, ended_at, conversation_id, message_id) VALUES (?, ?, ?, ?, ?, ?, ?, 'started', 0, ?, 0, ?, ?)
		ON CONFLICT (tenant, id) DO NOTHING`
	runHeadSQL = `SELECT pos, status, coalesce(error_category, ''), last_seq, session_id, agent_id, parent_id FROM runs
		WHERE tenant = ? AND id = ?`
	// runIDsSQL takes ?1 event ids and returns the first.
	runIDsSQL      = `UPDATE run_event_ids SET next = next + ?1 WHERE id = 1 RETURNING next - ?1`
	runInsChunkSQL = `INSERT INTO run_event_chunks (first_id, tenant, run_id, session_id, first_seq, n, size, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	runSetSeqSQL = `UPDATE runs SET last_seq = ? WHERE pos = ?`
	runFinishSQL = `UPDATE runs SET status = ?, output = ?, error_bucket = ?, error_category = ?, error_message = ?,
		invocation_id = ?, ended_at = ? WHERE pos = ?`
	// runAdvanceSQL and runEndSQL update a run a batch wrote to (its
	// last seq, and its end) if it is still as the batch found it.
	runAdvanceSQL = `UPDATE runs SET last_seq = ? WHERE ` + runAsFound
	runEndSQL     = `UPDATE runs SET last_seq = ?, status = ?, output = ?, error_bucket = ?, error_category = ?,
		error_message = ?, invocation_id = ?, ended_at = ? WHERE ` + runAsFound
	// A run is as found when its status is, too: started, or failed as
	// interrupted by reconciliation (runtime.Writable).
	runAsFound = `tenant = ? AND id = ? AND (status = 'started' OR (status = 'failed' AND error_category = '` +
		runtime.CategoryInterrupted + `')) AND last_seq = ? AND session_id = ? AND agent_id = ? AND parent_id = ?`
	runGetSQL    = `SELECT ` + runColumns + ` FROM runs WHERE tenant = ? AND id = ?`
	runExistsSQL = `SELECT 1 FROM runs WHERE tenant = ? AND id = ?`
	// runEventsSQL reads the run's chunks holding an event after id ?3,
	// in seq order. Events pages through them, stopping at its limit.
	runEventsSQL = `SELECT ` + chunkColumns + ` FROM run_event_chunks c JOIN runs r ON r.tenant = c.tenant AND r.id = c.run_id
		WHERE c.tenant = ?1 AND c.run_id = ?2 AND c.first_id + c.n - 1 > ?3 ORDER BY c.first_seq`
	// sessEventsSQL reads the session's chunks holding an event after id
	// ?3, in id order: from the last chunk starting at or before it (an
	// index probe), since chunks' id ranges do not overlap.
	sessEventsSQL = `SELECT ` + chunkColumns + ` FROM run_event_chunks c JOIN runs r ON r.tenant = c.tenant AND r.id = c.run_id
		WHERE c.tenant = ?1 AND c.session_id = ?2 AND c.first_id + c.n - 1 > ?3
		AND c.first_id >= coalesce((SELECT max(first_id) FROM run_event_chunks
			WHERE tenant = ?1 AND session_id = ?2 AND first_id <= ?3), 0)
		ORDER BY c.first_id`
	unfinishedSQL  = `SELECT ` + runColumns + ` FROM runs WHERE status = 'started' AND started_at < ? ORDER BY pos LIMIT ?`
	listTenantSQL  = `SELECT ` + runColumns + ` FROM runs WHERE tenant = ? AND pos < ? ORDER BY pos DESC LIMIT ?`
	listSessionSQL = `SELECT ` + runColumns + ` FROM runs WHERE tenant = ? AND session_id = ? AND pos < ?
		ORDER BY pos DESC LIMIT ?`
	// listParentSQL reads the runs of a parent (and session, when ?3 is
	// not empty) through runs_parent, a partial index: the literal
	// parent_id <> '' lets the planner use it.
	listParentSQL = `SELECT ` + runColumns + ` FROM runs WHERE tenant = ?1 AND parent_id = ?2 AND parent_id <> ''
		AND (?3 = '' OR session_id = ?3) AND pos < ?4 ORDER BY pos DESC LIMIT ?5`
	// listMessageSQL reads the runs whose message id begins with ?2
	// (and of session ?4, parent ?5, when not empty): the key range
	// [?2, ?3) of runs_message, a partial index (the literal
	// message_id <> '' lets it serve), named so that no plan walks the
	// tenant's every run instead. The range is a byte range (BINARY
	// collation); its runs are then sorted by pos, newest first.
	// listMsgFromSQL is the range without an end (runtime.PrefixEnd).
	listMessageSQL = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_message WHERE tenant = ?1
		AND message_id >= ?2 AND message_id < ?3 AND message_id <> '' ` + listMessageTail
	listMsgFromSQL = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_message WHERE tenant = ?1
		AND message_id >= ?2 AND ?3 = '' AND message_id <> '' ` + listMessageTail
	listMessageTail = `AND (?4 = '' OR session_id = ?4) AND (?5 = '' OR parent_id = ?5) AND pos < ?6
		ORDER BY pos DESC LIMIT ?7`
)

func (s *Store) prepareRuns(p func(*sql.DB, string) *sql.Stmt) runStatements {
	w, r := s.writer, s.reader
	return runStatements{
		insert:      p(w, runInsertSQL),
		head:        p(w, runHeadSQL),
		ids:         p(w, runIDsSQL),
		insChunk:    p(w, runInsChunkSQL),
		setSeq:      p(w, runSetSeqSQL),
		finish:      p(w, runFinishSQL),
		advance:     p(w, runAdvanceSQL),
		end:         p(w, runEndSQL),
		get:         p(r, runGetSQL),
		exists:      p(r, runExistsSQL),
		runEvs:      p(r, runEventsSQL),
		sessEvs:     p(r, sessEventsSQL),
		unfinished:  p(r, unfinishedSQL),
		listTenant:  p(r, listTenantSQL),
		listSession: p(r, listSessionSQL),
		listParent:  p(r, listParentSQL),
		listMessage: p(r, listMessageSQL),
		listMsgFrom: p(r, listMsgFromSQL),
	}
}

// start checks that the store is open and ctx live.
func (rs *RunStore) start(ctx context.Context, op, id string) error {
	if rs.s.closed.Load() {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	return nil
}

// write runs fn in a write transaction through the Store's writer (see
// [Store.write]) and returns once it committed.
func (rs *RunStore) write(ctx context.Context, op, id string, fn func(context.Context, *sql.Tx) error) error {
	return rs.s.write(ctx, op, id, "", fn)
}

func nullString(s string, ok bool) sql.NullString { return sql.NullString{String: s, Valid: ok} }

// nullBytes stores empty JSON as NULL.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// StartRun records a new started run.
func (rs *RunStore) StartRun(ctx context.Context, run runtime.Run) error {
	const op = "start run"
	if err := runtime.ValidateRun(run); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if run.StartedAt.IsZero() {
		run.StartedAt = rs.s.now()
	}
	err := rs.write(ctx, op, run.ID, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, rs.s.rst.insert).ExecContext(ctx, run.Tenant, run.ID, run.SessionID, run.AgentID,
			run.ParentID, run.CorrelationID, run.InvocationID, nanotime.Of(run.StartedAt), run.ConversationID, run.MessageID)
		if err != nil {
			return rs.s.fail(ctx, op, run.ID, "", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return rs.s.fail(ctx, op, run.ID, "", err)
		} else if n == 0 {
			return fmt.Errorf("sqlite: %s %q: %w: the run exists", op, run.ID, runtime.ErrConflict)
		}
		return nil
	})
	if err == nil {
		rs.grew(runtime.RunSize(runtime.Run{ID: run.ID, Tenant: run.Tenant, SessionID: run.SessionID, AgentID: run.AgentID,
			ParentID: run.ParentID, CorrelationID: run.CorrelationID, InvocationID: run.InvocationID,
			ConversationID: run.ConversationID}))
	}
	return err
}

// runHead is what Append and Finish read of a run in their transaction.
type runHead struct {
	pos, lastSeq                   int64
	status, session, agent, parent string
	category                       string // a failed run's error category
}

// head reads the run's head and checks that it takes a write ending
// with f (nil: none; runtime.Writable).
func (rs *RunStore) head(ctx context.Context, tx *sql.Tx, op, tenant, id string, f *runtime.FinishRequest) (runHead, error) {
	var h runHead
	switch err := tx.StmtContext(ctx, rs.s.rst.head).QueryRowContext(ctx, tenant, id).
		Scan(&h.pos, &h.status, &h.category, &h.lastSeq, &h.session, &h.agent, &h.parent); {
	case errors.Is(err, sql.ErrNoRows):
		return h, fmt.Errorf("sqlite: %s %q: %w", op, id, runtime.ErrNotFound)
	case err != nil:
		return h, rs.s.fail(ctx, op, id, "", err)
	}
	if !runtime.Writable(runtime.Status(h.status), h.category, f) {
		return h, fmt.Errorf("sqlite: %s %q: %w: the run is %s", op, id, runtime.ErrConflict, h.status)
	}
	return h, nil
}

func (rs *RunStore) finishTx(ctx context.Context, tx *sql.Tx, op string, pos int64, f runtime.FinishRequest) error {
	if f.EndedAt.IsZero() {
		f.EndedAt = rs.s.now()
	}
	var e runtime.RunError
	if f.Error != nil {
		e = *f.Error
	}
	has := f.Error != nil
	if _, err := tx.StmtContext(ctx, rs.s.rst.finish).ExecContext(ctx, string(f.Status), nullBytes(f.Output),
		nullString(e.Bucket, has), nullString(e.Category, has), nullString(e.Message, has),
		f.InvocationID, nanotime.Of(f.EndedAt), pos); err != nil {
		return rs.s.fail(ctx, op, f.RunID, "", err)
	}
	return nil
}

// Append stores the events and, with req.Finish, finishes the run, in
// one transaction.
func (rs *RunStore) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	const op = "append to run"
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	var out []runtime.Event
	rs.s.heads.drop(req.Tenant, req.RunID)
	err := rs.write(ctx, op, req.RunID, func(ctx context.Context, tx *sql.Tx) error {
		h, err := rs.head(ctx, tx, op, req.Tenant, req.RunID, req.Finish)
		if err != nil {
			return err
		}
		now := rs.s.now()
		if len(req.Events) > 0 {
			if out, err = rs.appendEvents(ctx, tx, op, req, h, now); err != nil {
				return err
			}
		}
		if req.Finish != nil {
			f := *req.Finish
			f.RunID = req.RunID
			if f.EndedAt.IsZero() {
				f.EndedAt = now
			}
			return rs.finishTx(ctx, tx, op, h.pos, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rs.grew(appendSize(out, req.Finish))
	return out, nil
}

// appendEvents stores req.Events, the run's next events, as one chunk,
// and returns them as stored.
func (rs *RunStore) appendEvents(ctx context.Context, tx *sql.Tx, op string, req runtime.AppendRequest, h runHead,
	now time.Time) ([]runtime.Event, error) {
	n := int64(len(req.Events))
	first, err := rs.takeIDs(ctx, tx, n)
	if err != nil {
		return nil, rs.s.fail(ctx, op, req.RunID, "", err)
	}
	out := make([]runtime.Event, n)
	dataLen := 0
	for _, e := range req.Events {
		dataLen += len(e.Data)
	}
	data := make([]byte, 0, dataLen) // the events' data, copied
	for i, e := range req.Events {
		out[i], data = stamp(e, req.Tenant, req.RunID, h, h.lastSeq+int64(i)+1, now, data)
		out[i].ID = first + int64(i)
	}
	enc, size := appendChunk(make([]byte, 0, chunkLen(out)), out)
	if _, err := tx.StmtContext(ctx, rs.s.rst.insChunk).ExecContext(ctx, first, req.Tenant, req.RunID, h.session,
		h.lastSeq+1, n, size, enc); err != nil {
		return nil, rs.s.fail(ctx, op, req.RunID, "", err)
	}
	if _, err := tx.StmtContext(ctx, rs.s.rst.setSeq).ExecContext(ctx, h.lastSeq+n, h.pos); err != nil {
		return nil, rs.s.fail(ctx, op, req.RunID, "", err)
	}
	return out, nil
}

// takeIDs takes n event ids in the write transaction tx and returns the
// first: ids increase in commit order, across the processes sharing the
// file too, and are never reused.
func (rs *RunStore) takeIDs(ctx context.Context, tx *sql.Tx, n int64) (int64, error) {
	var first int64
	err := tx.StmtContext(ctx, rs.s.rst.ids).QueryRowContext(ctx, n).Scan(&first)
	return first, err
}

// stamp returns e as the store keeps it: the run's seq-th event, with
// the run's identity fields, its time defaulted to now and truncated to
// what reads back, and its data copied to the end of data (which it
// returns).
func stamp(e runtime.Event, tenant, run string, h runHead, seq int64, now time.Time, data []byte) (runtime.Event, []byte) {
	e.ID, e.Seq = 0, seq
	e.RunID, e.Tenant, e.SessionID, e.AgentID, e.ParentRequestID = run, tenant, h.session, h.agent, h.parent
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Time = nanotime.Time(nanotime.Of(e.Time)) // as it will read back
	if len(e.Data) > 0 {
		data = append(data, e.Data...)
		e.Data = data[len(data)-len(e.Data) : len(data) : len(data)]
	} else {
		e.Data = nil
	}
	return e, data
}

// appendSize is the estimated size an append adds (runtime.EventSize,
// runtime.FinishSize).
func appendSize(evs []runtime.Event, f *runtime.FinishRequest) int64 {
	var n int64
	for _, e := range evs {
		n += runtime.EventSize(e)
	}
	if f != nil {
		n += runtime.FinishSize(*f)
	}
	return n
}

// Finish moves a started run to a final status.
func (rs *RunStore) Finish(ctx context.Context, req runtime.FinishRequest) error {
	const op = "finish run"
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	rs.s.heads.drop(req.Tenant, req.RunID)
	err := rs.write(ctx, op, req.RunID, func(ctx context.Context, tx *sql.Tx) error {
		h, err := rs.head(ctx, tx, op, req.Tenant, req.RunID, &req)
		if err != nil {
			return err
		}
		return rs.finishTx(ctx, tx, op, h.pos, req)
	})
	if err == nil {
		rs.grew(runtime.FinishSize(req))
	}
	return err
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanRun decodes a runColumns row, returning its pos too.
func scanRun(sc scanner, op string) (runtime.Run, int64, error) {
	var (
		r                    runtime.Run
		pos, started, ended  int64
		status               string
		bucket, cat, message sql.NullString
		output               []byte
	)
	if err := sc.Scan(&pos, &r.Tenant, &r.ID, &r.SessionID, &r.AgentID, &r.ParentID, &r.CorrelationID, &r.InvocationID,
		&status, &started, &ended, &bucket, &cat, &message, &output, &r.ConversationID, &r.MessageID); err != nil {
		return r, 0, err
	}
	r.Status = runtime.Status(status)
	if r.Status != runtime.StatusStarted && !r.Status.Final() {
		return r, 0, runCorrupt(op, r.ID, "unknown status %q", status)
	}
	if len(output) > 0 {
		if !jsonvalid.Valid(output) {
			return r, 0, runCorrupt(op, r.ID, "output is not valid JSON")
		}
		r.Output = output
	}
	if bucket.Valid || cat.Valid || message.Valid {
		r.Error = &runtime.RunError{Bucket: bucket.String, Category: cat.String, Message: message.String}
	}
	r.StartedAt = nanotime.Time(started)
	if ended != 0 {
		r.EndedAt = nanotime.Time(ended)
	}
	return r, pos, nil
}

func runCorrupt(op, id, format string, args ...any) error {
	return fmt.Errorf("sqlite: %s %q: %w: %s", op, id, ErrCorrupt, fmt.Sprintf(format, args...))
}

// Run returns the run.
func (rs *RunStore) Run(ctx context.Context, tenant, id string) (*runtime.Run, error) {
	const op = "get run"
	if id == "" {
		return nil, fmt.Errorf("sqlite: %s: %w: empty run id", op, runtime.ErrInvalidRequest)
	}
	if err := rs.start(ctx, op, id); err != nil {
		return nil, err
	}
	r, _, err := scanRun(rs.s.rst.get.QueryRowContext(ctx, tenant, id), op)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, runtime.ErrNotFound)
	case errors.Is(err, ErrCorrupt):
		return nil, err
	case err != nil:
		return nil, rs.s.fail(ctx, op, id, "", err)
	}
	return &r, nil
}

// Events returns the events after req.AfterID in ID order. For a run,
// the run's existence and its events are read in one read transaction.
func (rs *RunStore) Events(ctx context.Context, req runtime.EventsRequest) ([]runtime.Event, error) {
	const op = "read events of"
	req, err := req.Validate()
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	id, stmt, key := req.RunID, rs.s.rst.runEvs, req.RunID
	if id == "" {
		id, stmt, key = "session "+req.SessionID, rs.s.rst.sessEvs, req.SessionID
	}
	if err := rs.start(ctx, op, id); err != nil {
		return nil, err
	}
	tx, err := rs.s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, rs.s.fail(ctx, op, id, "", err)
	}
	defer func() { _ = tx.Rollback() }()
	if req.RunID != "" {
		var one int
		switch err := tx.StmtContext(ctx, rs.s.rst.exists).QueryRowContext(ctx, req.Tenant, req.RunID).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, runtime.ErrNotFound)
		case err != nil:
			return nil, rs.s.fail(ctx, op, id, "", err)
		}
	}
	rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, req.Tenant, key, req.AfterID)
	if err != nil {
		return nil, rs.s.fail(ctx, op, id, "", err)
	}
	defer rows.Close()
	var out []runtime.Event
	for len(out) < req.Limit && rows.Next() {
		var (
			first, seq, n int64
			data          []byte
			e             runtime.Event
		)
		if err := rows.Scan(&first, &seq, &n, &data, &e.RunID, &e.ParentRequestID, &e.SessionID, &e.AgentID,
			&e.Tenant); err != nil {
			return nil, rs.s.fail(ctx, op, id, "", err)
		}
		if out, err = readChunk(out, req.Limit, req.AfterID, e, first, seq, n, data); err != nil {
			return nil, runCorrupt(op, id, "%v", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, rs.s.fail(ctx, op, id, "", err)
	}
	return out, nil
}

// readChunk appends to out the events of the chunk whose row holds
// first, seq, n and data that come after id after, until out holds
// limit events. e carries the identity fields every event of the chunk
// shares; the events' data are slices of data.
func readChunk(out []runtime.Event, limit int, after int64, e runtime.Event, first, seq, n int64,
	data []byte) ([]runtime.Event, error) {
	r, err := newChunkReader(data, n)
	if err != nil {
		return out, fmt.Errorf("event chunk %d: %w", first, err)
	}
	for i := int64(0); len(out) < limit; i++ {
		typ, at, d, ok, err := r.next()
		if err != nil {
			return out, fmt.Errorf("event chunk %d: %w", first, err)
		}
		if !ok {
			break
		}
		e.ID, e.Seq = first+i, seq+i
		if e.ID <= after {
			continue
		}
		if d != nil && !jsonvalid.Valid(d) {
			return out, fmt.Errorf("event %d data is not valid JSON", e.ID)
		}
		e.Type, e.Time, e.Data = eventType(typ), nanotime.Time(at), d
		out = append(out, e)
	}
	return out, nil
}

// ListRuns returns a page of the tenant's runs, newest first.
func (rs *RunStore) ListRuns(ctx context.Context, req runtime.ListRunsRequest) (runtime.ListRunsResponse, error) {
	const op = "list runs of tenant"
	req, pos, err := req.Validate()
	if err != nil {
		return runtime.ListRunsResponse{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := rs.start(ctx, op, req.Tenant); err != nil {
		return runtime.ListRunsResponse{}, err
	}
	if pos == 0 {
		pos = math.MaxInt64
	}
	stmt, args := rs.s.rst.listTenant, []any{req.Tenant, pos, req.PageSize + 1}
	switch {
	case req.MessageIDPrefix != "":
		end, ok := runtime.PrefixEnd(req.MessageIDPrefix)
		stmt = rs.s.rst.listMessage
		if !ok {
			stmt = rs.s.rst.listMsgFrom
		}
		args = []any{req.Tenant, req.MessageIDPrefix, end, req.SessionID, req.ParentID, pos, req.PageSize + 1}
	case req.ParentID != "":
		stmt, args = rs.s.rst.listParent, []any{req.Tenant, req.ParentID, req.SessionID, pos, req.PageSize + 1}
	case req.SessionID != "":
		stmt, args = rs.s.rst.listSession, []any{req.Tenant, req.SessionID, pos, req.PageSize + 1}
	}
	runs, positions, err := rs.queryRuns(ctx, op, req.Tenant, stmt, args...)
	if err != nil {
		return runtime.ListRunsResponse{}, err
	}
	return runtime.ListPage(runs, positions, req.PageSize), nil
}

func (rs *RunStore) queryRuns(ctx context.Context, op, id string, stmt *sql.Stmt, args ...any) ([]runtime.Run, []int64, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, nil, rs.s.fail(ctx, op, id, "", err)
	}
	defer rows.Close()
	var (
		runs      []runtime.Run
		positions []int64
	)
	for rows.Next() {
		r, pos, err := scanRun(rows, op)
		if errors.Is(err, ErrCorrupt) {
			return nil, nil, err
		} else if err != nil {
			return nil, nil, rs.s.fail(ctx, op, id, "", err)
		}
		runs = append(runs, r)
		positions = append(positions, pos)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, rs.s.fail(ctx, op, id, "", err)
	}
	return runs, positions, nil
}

// UnfinishedRuns returns runs in status started that started before
// req.StartedBefore, of every tenant, oldest first. One process owns
// the file, so none is req.Abandoned.
func (rs *RunStore) UnfinishedRuns(ctx context.Context, req runtime.UnfinishedRequest) ([]runtime.Run, error) {
	const op = "list unfinished runs"
	limit, err := req.EffectiveLimit()
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if req.Abandoned {
		return nil, nil
	}
	if err := rs.start(ctx, op, ""); err != nil {
		return nil, err
	}
	runs, _, err := rs.queryRuns(ctx, op, "", rs.s.rst.unfinished, nanotime.Of(req.StartedBefore), limit)
	return runs, err
}
