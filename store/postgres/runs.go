package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/runtime"
)

// RunStore is the Store's runtime.Store: run records and their events,
// in the same database as the sessions, shared by every replica. Get it
// with [Store.Runs]. It implements runtime.Recoverable.
//
// Event ids come from a sequence taken under a transaction-scoped
// advisory lock that every event-writing transaction holds until it
// commits, so ids increase in commit order across replicas: a reader
// resuming after an id (an SSE Last-Event-ID) never misses an event
// committed later with a smaller id.
//
// Errors carry the "postgres:" prefix and wrap runtime.ErrNotFound,
// runtime.ErrInvalidRequest, runtime.ErrConflict, a done context's own
// error, or ErrCorrupt for a stored row that cannot be decoded.
type RunStore struct {
	s *Store
}

var (
	_ runtime.Store       = (*RunStore)(nil)
	_ runtime.Recoverable = (*RunStore)(nil)
	_ runtime.BatchWriter = (*RunStore)(nil)
)

// ErrCorrupt is wrapped by the error of a read that found a stored row
// it cannot decode.
var ErrCorrupt = errors.New("postgres: corrupt row")

// Runs returns the runtime.Store backed by the Store's database.
func (s *Store) Runs() *RunStore { return &RunStore{s: s} }

// eventLockKey is the advisory lock event-writing transactions hold.
const eventLockKey = 0x61726d2d657673 // "arm-evs"

// lockEvents takes the event lock for the rest of the transaction
// (taking it again is free). Event ids and run positions are drawn
// under it, so they increase in commit order. Every transaction takes it
// before any run's row, so that two cannot wait on each other.
func lockEvents(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(eventLockKey))
	return err
}

const runColumns = `pos, tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id, status,
	started_at, ended_at, error_bucket, error_category, error_message, output, conversation_id, message_id`

const eventColumns = `e.id, e.seq, e.type, e.run_id, r.parent_id, e.session_id, r.agent_id, e.tenant, e.time, e.data`

// runFail wraps a database failure of a run operation.
func (rs *RunStore) runFail(ctx context.Context, op, id string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("postgres: %s %q: %w", op, id, ctx.Err())
	}
	return fmt.Errorf("postgres: %s %q: %w", op, id, redact(err))
}

// StartRun records a new started run.
func (rs *RunStore) StartRun(ctx context.Context, run runtime.Run) error {
	const op = "start run"
	if err := runtime.ValidateRun(run); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	err := pgx.BeginFunc(ctx, rs.s.pool, func(tx pgx.Tx) error { return rs.startTx(ctx, tx, run) })
	if err != nil {
		return rs.mapErr(ctx, op, run.ID, err)
	}
	return nil
}

// startTx inserts a started run inside an open transaction. The run's
// position (the order ListRuns pages in) is drawn under the event lock,
// held until the transaction commits, so positions increase in commit
// order across replicas as event ids do: a client paging a session's
// runs newest first never misses one committed behind its cursor.
func (rs *RunStore) startTx(ctx context.Context, tx pgx.Tx, run runtime.Run) error {
	if run.StartedAt.IsZero() {
		run.StartedAt = rs.s.now()
	}
	if err := lockEvents(ctx, tx); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO runs (tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id,
		status, last_seq, started_at, ended_at, conversation_id, owner, message_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'started', 0, $8, 0, $9, $10, $11)
		ON CONFLICT (tenant, id) DO NOTHING`,
		run.Tenant, run.ID, run.SessionID, run.AgentID, run.ParentID, run.CorrelationID, run.InvocationID,
		nanotime.Of(run.StartedAt), run.ConversationID, rs.s.replica, run.MessageID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: start run %q: %w: the run exists", run.ID, runtime.ErrConflict)
	}
	return nil
}

// runHead is what Append and Finish read of a run, locked.
type runHead struct {
	pos, lastSeq                   int64
	status, session, agent, parent string
}

// head reads and locks the run's head and checks that it takes a write
// ending with f (nil: none; runtime.Writable).
func (rs *RunStore) head(ctx context.Context, tx pgx.Tx, op, tenant, id string, f *runtime.FinishRequest) (runHead, error) {
	var (
		h   runHead
		cat string
	)
	switch err := tx.QueryRow(ctx, `SELECT pos, status, coalesce(error_category, ''), last_seq, session_id, agent_id, parent_id
		FROM runs WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&h.pos, &h.status, &cat, &h.lastSeq, &h.session,
		&h.agent, &h.parent); {
	case errors.Is(err, pgx.ErrNoRows):
		return h, fmt.Errorf("postgres: %s %q: %w", op, id, runtime.ErrNotFound)
	case err != nil:
		return h, err
	}
	if !runtime.Writable(runtime.Status(h.status), cat, f) {
		return h, fmt.Errorf("postgres: %s %q: %w: the run is %s", op, id, runtime.ErrConflict, h.status)
	}
	return h, nil
}

// finishTx records the run's final status.
func (rs *RunStore) finishTx(ctx context.Context, tx pgx.Tx, pos int64, f runtime.FinishRequest) error {
	if f.EndedAt.IsZero() {
		f.EndedAt = rs.s.now()
	}
	var bucket, cat, msg *string
	if e := f.Error; e != nil {
		bucket, cat, msg = &e.Bucket, &e.Category, &e.Message
	}
	var output []byte
	if len(f.Output) > 0 {
		output = f.Output
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET status = $1, output = $2, error_bucket = $3, error_category = $4,
		error_message = $5, invocation_id = $6, ended_at = $7 WHERE pos = $8`,
		string(f.Status), output, bucket, cat, msg, f.InvocationID, nanotime.Of(f.EndedAt), pos)
	return err
}

// Append stores the events and, with req.Finish, finishes the run, in
// one transaction.
func (rs *RunStore) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	const op = "append to run"
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	var out []runtime.Event
	err := pgx.BeginFunc(ctx, rs.s.pool, func(tx pgx.Tx) (err error) {
		out, err = rs.appendTx(ctx, tx, req)
		return err
	})
	if err != nil {
		return nil, rs.mapErr(ctx, op, req.RunID, err)
	}
	return out, nil
}

// appendTx is Append inside an open transaction.
func (rs *RunStore) appendTx(ctx context.Context, tx pgx.Tx, req runtime.AppendRequest) ([]runtime.Event, error) {
	const op = "append to run"
	var out []runtime.Event
	if len(req.Events) > 0 {
		// The event lock before the run's row, as every transaction
		// takes them (see lockEvents).
		if err := lockEvents(ctx, tx); err != nil {
			return nil, err
		}
	}
	h, err := rs.head(ctx, tx, op, req.Tenant, req.RunID, req.Finish)
	if err != nil {
		return nil, err
	}
	now := rs.s.now()
	out = make([]runtime.Event, len(req.Events))
	for i, e := range req.Events {
		e.Seq = h.lastSeq + int64(i) + 1
		e.RunID, e.Tenant, e.SessionID, e.AgentID, e.ParentRequestID = req.RunID, req.Tenant, h.session, h.agent, h.parent
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = nanotime.Time(nanotime.Of(e.Time)) // as it will read back
		var data []byte
		if len(e.Data) > 0 {
			data = e.Data
		}
		if err := tx.QueryRow(ctx, `INSERT INTO run_events (id, tenant, run_id, seq, session_id, type, time, data)
			VALUES (nextval('run_event_ids'), $1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			req.Tenant, req.RunID, e.Seq, h.session, e.Type, nanotime.Of(e.Time), data).Scan(&e.ID); err != nil {
			return nil, err
		}
		if len(e.Data) > 0 {
			e.Data = append([]byte(nil), e.Data...)
		} else {
			e.Data = nil
		}
		out[i] = e
	}
	if len(req.Events) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE runs SET last_seq = $1 WHERE pos = $2`, h.lastSeq+int64(len(req.Events)), h.pos); err != nil {
			return nil, err
		}
		// Listeners on every replica hear of the events when they
		// commit (Store.Listen).
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, rs.s.events, req.Tenant+notifySep+h.session); err != nil {
			return nil, err
		}
	}
	if req.Finish != nil {
		f := *req.Finish
		f.RunID = req.RunID
		if f.EndedAt.IsZero() {
			f.EndedAt = now
		}
		return out, rs.finishTx(ctx, tx, h.pos, f)
	}
	return out, nil
}

// WriteTurns applies the records in order in one transaction (the
// Recorder's group commit): each record's start, then its events and
// finish. On any error nothing is stored.
func (rs *RunStore) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	const op = "write turns of run"
	for i, tr := range turns {
		if err := tr.Validate(); err != nil {
			return nil, fmt.Errorf("postgres: %s %q (record %d): %w", op, tr.Append.RunID, i, err)
		}
	}
	if len(turns) == 0 {
		return nil, nil
	}
	lock := slices.ContainsFunc(turns, func(tr runtime.TurnRecord) bool { return tr.Start != nil || len(tr.Append.Events) > 0 })
	var out []runtime.Event
	err := pgx.BeginFunc(ctx, rs.s.pool, func(tx pgx.Tx) error {
		out = nil
		if lock {
			// Before any run's row (a record that only finishes a run
			// locks its row first otherwise).
			if err := lockEvents(ctx, tx); err != nil {
				return err
			}
		}
		for _, tr := range turns {
			if tr.Start != nil {
				if err := rs.startTx(ctx, tx, *tr.Start); err != nil {
					return err
				}
				if !tr.Appends() {
					continue
				}
			}
			evs, err := rs.appendTx(ctx, tx, tr.Append)
			if err != nil {
				return err
			}
			out = append(out, evs...)
		}
		return nil
	})
	if err != nil {
		return nil, rs.mapErr(ctx, op, turns[0].Append.RunID, err)
	}
	return out, nil
}

// mapErr passes the store's own errors and wraps database failures.
func (rs *RunStore) mapErr(ctx context.Context, op, id string, err error) error {
	if errors.Is(err, runtime.ErrNotFound) || errors.Is(err, runtime.ErrConflict) || errors.Is(err, runtime.ErrInvalidRequest) {
		return err
	}
	return rs.runFail(ctx, op, id, err)
}

// Finish moves a started run to a final status.
func (rs *RunStore) Finish(ctx context.Context, req runtime.FinishRequest) error {
	const op = "finish run"
	if err := req.Validate(); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	err := pgx.BeginFunc(ctx, rs.s.pool, func(tx pgx.Tx) error {
		h, err := rs.head(ctx, tx, op, req.Tenant, req.RunID, &req)
		if err != nil {
			return err
		}
		return rs.finishTx(ctx, tx, h.pos, req)
	})
	if err != nil {
		return rs.mapErr(ctx, op, req.RunID, err)
	}
	return nil
}

// scanRun decodes a runColumns row, returning its pos too.
func scanRun(row pgx.Row, op string) (runtime.Run, int64, error) {
	var (
		r                    runtime.Run
		pos, started, ended  int64
		status               string
		bucket, cat, message *string
		output               []byte
	)
	if err := row.Scan(&pos, &r.Tenant, &r.ID, &r.SessionID, &r.AgentID, &r.ParentID, &r.CorrelationID, &r.InvocationID,
		&status, &started, &ended, &bucket, &cat, &message, &output, &r.ConversationID, &r.MessageID); err != nil {
		return r, 0, err
	}
	r.Status = runtime.Status(status)
	if r.Status != runtime.StatusStarted && !r.Status.Final() {
		return r, 0, fmt.Errorf("postgres: %s %q: %w: unknown status %q", op, r.ID, ErrCorrupt, status)
	}
	if len(output) > 0 {
		if !jsonvalid.Valid(output) {
			return r, 0, fmt.Errorf("postgres: %s %q: %w: output is not valid JSON", op, r.ID, ErrCorrupt)
		}
		r.Output = output
	}
	if bucket != nil || cat != nil || message != nil {
		e := &runtime.RunError{}
		for _, f := range []struct {
			dst *string
			src *string
		}{{&e.Bucket, bucket}, {&e.Category, cat}, {&e.Message, message}} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		r.Error = e
	}
	r.StartedAt = nanotime.Time(started)
	if ended != 0 {
		r.EndedAt = nanotime.Time(ended)
	}
	return r, pos, nil
}

// Run returns the run.
func (rs *RunStore) Run(ctx context.Context, tenant, id string) (*runtime.Run, error) {
	const op = "get run"
	if id == "" {
		return nil, fmt.Errorf("postgres: %s: %w: empty run id", op, runtime.ErrInvalidRequest)
	}
	r, _, err := scanRun(rs.s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE tenant = $1 AND id = $2`, tenant, id), op)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("postgres: %s %q: %w", op, id, runtime.ErrNotFound)
	case errors.Is(err, ErrCorrupt):
		return nil, err
	case err != nil:
		return nil, rs.runFail(ctx, op, id, err)
	}
	return &r, nil
}

// Events returns the events after req.AfterID in ID order (a run's also
// in Seq order). For a run, its existence and its events are read in one
// snapshot.
func (rs *RunStore) Events(ctx context.Context, req runtime.EventsRequest) ([]runtime.Event, error) {
	const op = "read events of"
	req, err := req.Validate()
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	id, key := req.RunID, req.RunID
	q := `SELECT ` + eventColumns + ` FROM run_events e JOIN runs r ON r.tenant = e.tenant AND r.id = e.run_id
		WHERE e.tenant = $1 AND e.run_id = $2 AND e.id > $3 ORDER BY e.seq LIMIT $4`
	if id == "" {
		id, key = "session "+req.SessionID, req.SessionID
		q = `SELECT ` + eventColumns + ` FROM run_events e JOIN runs r ON r.tenant = e.tenant AND r.id = e.run_id
			WHERE e.tenant = $1 AND e.session_id = $2 AND e.id > $3 ORDER BY e.id LIMIT $4`
	}
	var out []runtime.Event
	err = pgx.BeginTxFunc(ctx, rs.s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if req.RunID != "" {
			var one int
			switch err := tx.QueryRow(ctx, `SELECT 1 FROM runs WHERE tenant = $1 AND id = $2`, req.Tenant, req.RunID).Scan(&one); {
			case errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("postgres: %s %q: %w", op, id, runtime.ErrNotFound)
			case err != nil:
				return err
			}
		}
		rows, err := tx.Query(ctx, q, req.Tenant, key, req.AfterID, req.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e    runtime.Event
				at   int64
				data []byte
			)
			if err := rows.Scan(&e.ID, &e.Seq, &e.Type, &e.RunID, &e.ParentRequestID, &e.SessionID, &e.AgentID,
				&e.Tenant, &at, &data); err != nil {
				return err
			}
			if len(data) > 0 {
				if !jsonvalid.Valid(data) {
					return fmt.Errorf("postgres: %s %q: %w: event %d data is not valid JSON", op, id, ErrCorrupt, e.ID)
				}
				e.Data = data
			}
			e.Time = nanotime.Time(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, rs.mapErr(ctx, op, id, err)
	}
	return out, nil
}

// ListRuns returns a page of the tenant's runs, newest first.
func (rs *RunStore) ListRuns(ctx context.Context, req runtime.ListRunsRequest) (runtime.ListRunsResponse, error) {
	const op = "list runs of tenant"
	req, pos, err := req.Validate()
	if err != nil {
		return runtime.ListRunsResponse{}, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if pos == 0 {
		pos = math.MaxInt64
	}
	q, args := `SELECT `+runColumns+` FROM runs WHERE tenant = $1 AND pos < $2 ORDER BY pos DESC LIMIT $3`,
		[]any{req.Tenant, pos, req.PageSize + 1}
	switch {
	case req.MessageIDPrefix != "":
		// Through runs_message, a partial index (the literal
		// message_id <> '' lets the planner use it): the key range
		// [prefix, end) in byte order (the column is COLLATE "C"),
		// sorted by pos. end is valid UTF-8 (runtime.PrefixEnd of a
		// validated prefix), as PostgreSQL's text requires.
		end, ok := runtime.PrefixEnd(req.MessageIDPrefix)
		upper := `message_id < $3`
		if !ok {
			upper = `$3 = ''`
		}
		q, args = `SELECT `+runColumns+` FROM runs WHERE tenant = $1 AND message_id >= $2 AND `+upper+`
			AND message_id <> '' AND ($4 = '' OR session_id = $4) AND ($5 = '' OR parent_id = $5)
			AND pos < $6 ORDER BY pos DESC LIMIT $7`,
			[]any{req.Tenant, req.MessageIDPrefix, end, req.SessionID, req.ParentID, pos, req.PageSize + 1}
	case req.ParentID != "":
		// Through runs_parent, a partial index: the literal
		// parent_id <> '' lets the planner use it.
		q, args = `SELECT `+runColumns+` FROM runs WHERE tenant = $1 AND parent_id = $2 AND parent_id <> ''
			AND ($3 = '' OR session_id = $3) AND pos < $4 ORDER BY pos DESC LIMIT $5`,
			[]any{req.Tenant, req.ParentID, req.SessionID, pos, req.PageSize + 1}
	case req.SessionID != "":
		q, args = `SELECT `+runColumns+` FROM runs WHERE tenant = $1 AND session_id = $2 AND pos < $3 ORDER BY pos DESC LIMIT $4`,
			[]any{req.Tenant, req.SessionID, pos, req.PageSize + 1}
	}
	runs, positions, err := rs.queryRuns(ctx, op, req.Tenant, q, args...)
	if err != nil {
		return runtime.ListRunsResponse{}, err
	}
	return runtime.ListPage(runs, positions, req.PageSize), nil
}

func (rs *RunStore) queryRuns(ctx context.Context, op, id, q string, args ...any) ([]runtime.Run, []int64, error) {
	rows, err := rs.s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, rs.runFail(ctx, op, id, err)
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
			return nil, nil, rs.runFail(ctx, op, id, err)
		}
		runs = append(runs, r)
		positions = append(positions, pos)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, rs.runFail(ctx, op, id, err)
	}
	return runs, positions, nil
}

// goneOwners returns the other replicas that own runs started before
// before and whose lock is free: the probe's locks are released at
// once, in the same statement.
func (rs *RunStore) goneOwners(ctx context.Context, before int64) ([]int64, error) {
	rows, err := rs.s.pool.Query(ctx, `WITH owners AS (
			SELECT DISTINCT owner FROM runs WHERE status = 'started' AND started_at < $1 AND owner <> 0 AND owner <> $2)
		SELECT owner FROM owners WHERE pg_try_advisory_lock(owner) AND pg_advisory_unlock(owner)`, before, rs.s.replica)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// UnfinishedRuns returns runs in status started that started before
// req.StartedBefore, of every tenant, oldest first: this Store's own and
// those of replicas that are gone. A run of another replica (another
// Store) that still holds its advisory lock is in flight, not left
// behind, and is not listed. A replica counts as gone when its lock is
// free twice, Config.OwnerGrace apart: one whose lock's connection was
// lost takes the lock again meanwhile, and the runs it is running are
// not ended under it. With req.Abandoned, this Store's own runs are not
// listed either: only those of replicas that are gone.
func (rs *RunStore) UnfinishedRuns(ctx context.Context, req runtime.UnfinishedRequest) ([]runtime.Run, error) {
	const op = "list unfinished runs"
	limit, err := req.EffectiveLimit()
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	before := nanotime.Of(req.StartedBefore)
	gone, err := rs.goneOwners(ctx, before)
	if err != nil {
		return nil, rs.runFail(ctx, op, "", err)
	}
	if len(gone) > 0 && rs.s.ownerGrace > 0 {
		select {
		case <-ctx.Done():
			return nil, rs.runFail(ctx, op, "", ctx.Err())
		case <-time.After(rs.s.ownerGrace):
		}
		again, err := rs.goneOwners(ctx, before)
		if err != nil {
			return nil, rs.runFail(ctx, op, "", err)
		}
		gone = slices.DeleteFunc(gone, func(o int64) bool { return !slices.Contains(again, o) })
	}
	conn, err := rs.s.pool.Acquire(ctx)
	if err != nil {
		return nil, rs.runFail(ctx, op, "", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE status = 'started' AND started_at < $1
			AND ((NOT $4 AND (owner = 0 OR owner = $2)) OR owner = ANY($5)) ORDER BY pos LIMIT $3`,
		before, rs.s.replica, limit, req.Abandoned, gone)
	if err != nil {
		return nil, rs.runFail(ctx, op, "", err)
	}
	defer rows.Close()
	var runs []runtime.Run
	for rows.Next() {
		r, _, err := scanRun(rows, op)
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		} else if err != nil {
			return nil, rs.runFail(ctx, op, "", err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, rs.runFail(ctx, op, "", err)
	}
	return runs, nil
}
