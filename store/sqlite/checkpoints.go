package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

// CheckpointStore is the checkpoint.Store of a [Store]: checkpoint
// records (pipeline-utilities §10) and paused-invocation records
// (suspension §2) in the checkpoint_records table of the same file,
// written through the same single writer connection and read through the
// same reader pool. Get it with [Store.Checkpoints]; it is closed with
// its Store. It is safe for concurrent use.
//
// Record.Data must be JSON (this backend stores JSON-native state only,
// in the spec's §10.1 terms); it is stored and returned byte for byte.
// SavedAt is stored as UTC unix nanoseconds, clamped to the years
// 1677..2262, and loaded in UTC.
//
// [CheckpointStore.Take] is one write transaction (BEGIN IMMEDIATE, then
// DELETE ... RETURNING), so of any number of concurrent takers, in this
// process or in others sharing the file, exactly one gets the record.
//
// Errors carry the "sqlite:" prefix. Invalid keys, records and requests
// wrap checkpoint.ErrInvalidRequest, missing records
// checkpoint.ErrNotFound, operations on a closed Store session.ErrClosed
// and a done context its own error. Failed writes (Save, Take, Delete)
// are categorized checkpoint_save_failed. A stored row that cannot be
// decoded wraps [ErrCorrupt] in category checkpoint_record_invalid.
// Failed reads (Load, List) are wrapped without a category: the spec has
// no checkpoint load-failure category, and checkpoint_record_invalid
// means the record itself is unusable, which an I/O error does not show.
type CheckpointStore struct {
	s *Store
}

var _ checkpoint.Store = (*CheckpointStore)(nil)

// Checkpoints returns the checkpoint.Store backed by this Store's file.
// (Store itself cannot implement checkpoint.Store: its session.Store
// methods have the same names.)
func (s *Store) Checkpoints() *CheckpointStore { return &CheckpointStore{s: s} }

// checkpointStatements are the checkpoint_records statements prepared on
// Open; List builds its query per filter combination.
type checkpointStatements struct {
	upsert *sql.Stmt // writer
	take   *sql.Stmt // writer: DELETE ... RETURNING
	del    *sql.Stmt // writer
	load   *sql.Stmt // reader
	// bySessionR and bySessionW are List's query for one session's
	// records (the chat harness asks it at a turn that may supersede a
	// suspension), on a reader and on the idle writer's warm cache.
	bySessionR, bySessionW *sql.Stmt
}

// cpBySessionSQL is listCheckpointsQuery's query for a kind and a session,
// without a page token: the statement bySessionR/W prepare.
var cpBySessionSQL, _ = listCheckpointsQuery(checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: "s"}, "", 1)

// cpColumns are the columns decodeCheckpoint reads, in order.
const cpColumns = `invocation_id, kind, correlation_id, session_id, signal_id, schema_version,
	completed_node_count, saved_at, data`

const (
	cpUpsertSQL = `INSERT INTO checkpoint_records (` + cpColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (kind, invocation_id) DO UPDATE SET
			correlation_id = excluded.correlation_id, session_id = excluded.session_id,
			signal_id = excluded.signal_id, schema_version = excluded.schema_version,
			completed_node_count = excluded.completed_node_count, saved_at = excluded.saved_at,
			data = excluded.data`
	cpTakeSQL   = `DELETE FROM checkpoint_records WHERE kind = ? AND invocation_id = ? RETURNING ` + cpColumns
	cpDeleteSQL = `DELETE FROM checkpoint_records WHERE kind = ? AND invocation_id = ?`
	cpLoadSQL   = `SELECT ` + cpColumns + ` FROM checkpoint_records WHERE kind = ? AND invocation_id = ?`
)

// validKind reports whether k is a record kind this code knows.
func validKind(k checkpoint.Kind) bool {
	return k == checkpoint.KindCheckpoint || k == checkpoint.KindSuspended
}

// validateKey mirrors the checks of checkpoint.MemoryStore.
func validateKey(k checkpoint.Key) error {
	if err := session.ValidateID(k.InvocationID); err != nil {
		return fmt.Errorf("%w: invocation id: %v", checkpoint.ErrInvalidRequest, err)
	}
	if !validKind(k.Kind) {
		return fmt.Errorf("%w: unknown record kind %q", checkpoint.ErrInvalidRequest, k.Kind)
	}
	return nil
}

// cpOp names an operation on a record kind, for error messages.
func cpOp(verb string, k checkpoint.Kind) string { return verb + " " + string(k) + " record" }

// start checks the key, that the store is open and that ctx is live.
func (c *CheckpointStore) start(ctx context.Context, verb string, k checkpoint.Key) error {
	if err := validateKey(k); err != nil {
		return fmt.Errorf("sqlite: %s: %w", verb, err)
	}
	if c.s.closed.Load() {
		return fmt.Errorf("sqlite: %s %q: %w", cpOp(verb, k.Kind), k.InvocationID, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", cpOp(verb, k.Kind), k.InvocationID, err)
	}
	return nil
}

// Save writes r, replacing the record with the same invocation id and
// kind. A zero SavedAt is set to the Store's clock.
func (c *CheckpointStore) Save(ctx context.Context, r checkpoint.Record) error {
	k := checkpoint.Key{InvocationID: r.InvocationID, Kind: r.Kind}
	if err := c.start(ctx, "save", k); err != nil {
		return err
	}
	op := cpOp("save", k.Kind)
	if !jsonvalid.Valid(r.Data) {
		return fmt.Errorf("sqlite: %s %q: %w: record data is not valid JSON", op, k.InvocationID, checkpoint.ErrInvalidRequest)
	}
	if err := r.ValidateFields(); err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, err)
	}
	if r.SavedAt.IsZero() {
		r.SavedAt = c.s.now()
	}
	return c.s.write(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, func(ctx context.Context, tx *sql.Tx) error {
		return c.upsertTx(ctx, tx, op, r)
	})
}

// upsertTx writes r inside an open write transaction.
func (c *CheckpointStore) upsertTx(ctx context.Context, tx *sql.Tx, op string, r checkpoint.Record) error {
	if _, err := tx.StmtContext(ctx, c.s.cst.upsert).ExecContext(ctx,
		r.InvocationID, string(r.Kind), r.CorrelationID, r.SessionID, r.SignalID, r.SchemaVersion,
		int64(r.CompletedNodeCount), nanotime.Of(r.SavedAt), []byte(r.Data)); err != nil {
		return c.s.fail(ctx, op, r.InvocationID, errcat.CheckpointSaveFailed, err)
	}
	return nil
}

// Load returns the record, or an error wrapping checkpoint.ErrNotFound.
func (c *CheckpointStore) Load(ctx context.Context, k checkpoint.Key) (*checkpoint.Record, error) {
	if err := c.start(ctx, "load", k); err != nil {
		return nil, err
	}
	op := cpOp("load", k.Kind)
	r, err := decodeCheckpoint(c.s.cst.load.QueryRowContext(ctx, string(k.Kind), k.InvocationID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, checkpoint.ErrNotFound)
	case errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, err)
	case err != nil:
		return nil, c.s.fail(ctx, op, k.InvocationID, "", err)
	}
	return r, nil
}

// Take deletes the record and returns it, in one write transaction: of
// concurrent takers (in any process using the file) exactly one gets the
// record and the others checkpoint.ErrNotFound. A record that cannot be
// decoded is left in place and reported as checkpoint_record_invalid.
func (c *CheckpointStore) Take(ctx context.Context, k checkpoint.Key) (*checkpoint.Record, error) {
	if err := c.start(ctx, "take", k); err != nil {
		return nil, err
	}
	op := cpOp("take", k.Kind)
	var r *checkpoint.Record
	if err := c.s.write(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, func(ctx context.Context, tx *sql.Tx) (err error) {
		r, err = decodeCheckpoint(tx.StmtContext(ctx, c.s.cst.take).QueryRowContext(ctx, string(k.Kind), k.InvocationID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, checkpoint.ErrNotFound)
		case errors.Is(err, ErrCorrupt):
			return fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, err) // rolled back: the row stays
		case err != nil:
			return c.s.fail(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// Delete removes the record; deleting a missing record succeeds.
func (c *CheckpointStore) Delete(ctx context.Context, k checkpoint.Key) error {
	if err := c.start(ctx, "delete", k); err != nil {
		return err
	}
	op := cpOp("delete", k.Kind)
	return c.s.write(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, c.s.cst.del).ExecContext(ctx, string(k.Kind), k.InvocationID); err != nil {
			return c.s.fail(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, err)
		}
		return nil
	})
}

// List returns a page of summaries of one kind in ascending invocation-id
// order, optionally filtered by signal, session and correlation id.
// Pages are keyed by invocation id (a page token is the last id of the
// previous page), so records saved or deleted between pages neither
// shift nor repeat the rest of the listing. Each filter is served by its
// own index.
func (c *CheckpointStore) List(ctx context.Context, req checkpoint.ListRequest) (checkpoint.ListResponse, error) {
	op := "list " + string(req.Kind) + " records"
	after, size, err := req.Page()
	if err != nil {
		return checkpoint.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if c.s.closed.Load() {
		return checkpoint.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return checkpoint.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	q, args := listCheckpointsQuery(req, after, size+1)
	var rows *sql.Rows
	if q == cpBySessionSQL {
		// The common shape runs prepared, warm when the writer is idle.
		stmt, release := c.s.warm(c.s.cst.bySessionR, c.s.cst.bySessionW)
		rows, err = stmt.QueryContext(ctx, args...)
		defer release()
	} else {
		rows, err = c.s.reader.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return checkpoint.ListResponse{}, c.s.fail(ctx, op, after, "", err)
	}
	defer rows.Close()
	var resp checkpoint.ListResponse
	for rows.Next() {
		var (
			sum            checkpoint.Summary
			kind           string
			count, savedAt int64
		)
		if err := rows.Scan(&sum.InvocationID, &kind, &sum.CorrelationID, &sum.SessionID, &sum.SignalID, &count, &savedAt); err != nil {
			return checkpoint.ListResponse{}, c.s.fail(ctx, op, after, "", err)
		}
		sum.Kind = checkpoint.Kind(kind)
		if sum.CompletedNodeCount, err = checkRow(sum.InvocationID, sum.Kind, count); err != nil {
			return checkpoint.ListResponse{}, fmt.Errorf("sqlite: %s: %w", op, err)
		}
		if len(resp.Records) == size {
			resp.NextPageToken = session.EncodePageToken(resp.Records[size-1].InvocationID)
			break
		}
		sum.SavedAt = nanotime.Time(savedAt)
		resp.Records = append(resp.Records, sum)
	}
	if err := rows.Err(); err != nil {
		return checkpoint.ListResponse{}, c.s.fail(ctx, op, after, "", err)
	}
	return resp, nil
}

// listCheckpointsQuery returns List's query: req's filters, invocation
// ids after after, at most limit rows.
func listCheckpointsQuery(req checkpoint.ListRequest, after string, limit int) (string, []any) {
	where, args := []string{"kind = ?"}, []any{string(req.Kind)}
	if after != "" {
		where, args = append(where, "invocation_id > ?"), append(args, after)
	}
	// The literal "<> ''" lets the planner use the partial indexes; it
	// holds whenever the filter is set.
	for _, f := range []struct{ col, val string }{
		{"signal_id", req.SignalID}, {"session_id", req.SessionID}, {"correlation_id", req.CorrelationID},
	} {
		if f.val != "" {
			where, args = append(where, f.col+" = ? AND "+f.col+" <> ''"), append(args, f.val)
		}
	}
	q := `SELECT invocation_id, kind, correlation_id, session_id, signal_id, completed_node_count, saved_at
		FROM checkpoint_records WHERE ` + strings.Join(where, " AND ") + ` ORDER BY invocation_id LIMIT ?`
	return q, append(args, limit)
}

// decodeCheckpoint scans one row of cpColumns. It returns sql.ErrNoRows
// when there is none, an error wrapping ErrCorrupt (categorized
// checkpoint_record_invalid) when the row cannot be a record, and the
// driver's error otherwise.
func decodeCheckpoint(row *sql.Row) (*checkpoint.Record, error) {
	var (
		r              checkpoint.Record
		kind           string
		count, savedAt int64
		data           []byte // Scan copies: the record does not alias driver memory
	)
	if err := row.Scan(&r.InvocationID, &kind, &r.CorrelationID, &r.SessionID, &r.SignalID, &r.SchemaVersion,
		&count, &savedAt, &data); err != nil {
		return nil, err
	}
	r.Kind = checkpoint.Kind(kind)
	var err error
	if r.CompletedNodeCount, err = checkRow(r.InvocationID, r.Kind, count); err != nil {
		return nil, err
	}
	if !jsonvalid.Valid(data) {
		return nil, cpCorrupt("record data is not valid JSON")
	}
	r.Data = json.RawMessage(data)
	r.SavedAt = nanotime.Time(savedAt)
	return &r, nil
}

// checkRow validates the metadata of a stored record and converts its
// node count.
func checkRow(id string, kind checkpoint.Kind, count int64) (int, error) {
	if err := session.ValidateID(id); err != nil {
		return 0, cpCorrupt("stored invocation id %q: %v", id, err)
	}
	if !validKind(kind) {
		return 0, cpCorrupt("record %q has unknown kind %q", id, kind)
	}
	if int64(int(count)) != count { // a 32-bit platform
		return 0, cpCorrupt("record %q: completed node count %d out of range", id, count)
	}
	return int(count), nil
}

// cpCorrupt returns ErrCorrupt categorized checkpoint_record_invalid.
func cpCorrupt(format string, args ...any) error {
	return errcat.Wrap(errcat.CheckpointRecordInvalid, fmt.Sprintf(format, args...), ErrCorrupt)
}

var _ checkpoint.SessionWriter = (*CheckpointStore)(nil)

// SessionStore returns the session store sharing this file: the one whose
// records WriteSuspended writes.
func (c *CheckpointStore) SessionStore() session.Store { return c.s }

// WriteSuspended writes a suspended invocation's session state and its
// paused-invocation record in one transaction (suspension §8.6): a crash
// leaves both or neither.
func (c *CheckpointStore) WriteSuspended(ctx context.Context, w checkpoint.SuspendWrite) (session.WriteResult, error) {
	r := w.Record
	k := checkpoint.Key{InvocationID: r.InvocationID, Kind: r.Kind}
	if err := c.start(ctx, "save", k); err != nil {
		return session.WriteResult{}, err
	}
	op := cpOp("save", k.Kind)
	if !jsonvalid.Valid(r.Data) {
		return session.WriteResult{}, fmt.Errorf("sqlite: %s %q: %w: record data is not valid JSON", op, k.InvocationID, checkpoint.ErrInvalidRequest)
	}
	if err := r.ValidateFields(); err != nil {
		return session.WriteResult{}, fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, err)
	}
	if err := validateSessionWrite(op, w.Save, w.Append); err != nil {
		return session.WriteResult{}, err
	}
	if r.SavedAt.IsZero() {
		r.SavedAt = c.s.now()
	}
	var res session.WriteResult
	var out appendOut
	if err := c.s.write(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, func(ctx context.Context, tx *sql.Tx) (err error) {
		if res, err = c.s.sessionWriteTx(ctx, tx, w.Save, w.Append, &out); err != nil {
			return err
		}
		return c.upsertTx(ctx, tx, op, r)
	}); err != nil {
		return session.WriteResult{}, err
	}
	c.s.indexWrite(w.Save, w.Append, res, out)
	return res, nil
}

// WriteResumed applies the session write and deletes the paused record in
// one transaction. If the record is gone (another worker completed the
// resume), nothing is written and the error wraps checkpoint.ErrNotFound.
func (c *CheckpointStore) WriteResumed(ctx context.Context, w checkpoint.ResumeWrite) (session.WriteResult, error) {
	k := w.Key
	if err := c.start(ctx, "delete", k); err != nil {
		return session.WriteResult{}, err
	}
	op := cpOp("delete", k.Kind)
	if err := validateSessionWrite(op, w.Save, w.Append); err != nil {
		return session.WriteResult{}, err
	}
	var res session.WriteResult
	var out appendOut
	if err := c.s.write(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, func(ctx context.Context, tx *sql.Tx) (err error) {
		del, err := tx.StmtContext(ctx, c.s.cst.del).ExecContext(ctx, string(k.Kind), k.InvocationID)
		if err != nil {
			return c.s.fail(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, err)
		}
		if n, err := del.RowsAffected(); err != nil {
			return c.s.fail(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, err)
		} else if n == 0 {
			return fmt.Errorf("sqlite: %s %q: %w", op, k.InvocationID, checkpoint.ErrNotFound)
		}
		res, err = c.s.sessionWriteTx(ctx, tx, w.Save, w.Append, &out)
		return err
	}); err != nil {
		return session.WriteResult{}, err
	}
	c.s.indexWrite(w.Save, w.Append, res, out)
	return res, nil
}

// validateSessionWrite checks the session half of a combined write.
func validateSessionWrite(op string, save *session.SaveRequest, app *session.AppendRequest) error {
	if (save == nil) == (app == nil) {
		return fmt.Errorf("sqlite: %s: %w: set exactly one of Save and Append", op, checkpoint.ErrInvalidRequest)
	}
	if save != nil {
		if err := session.ValidateID(save.SessionID); err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		if err := session.ValidateState(save.State); err != nil {
			return fmt.Errorf("sqlite: %s %q: %w", op, save.SessionID, err)
		}
		if err := session.ValidateMarks(save.Marks); err != nil {
			return fmt.Errorf("sqlite: %s %q: %w", op, save.SessionID, err)
		}
		return nil
	}
	if err := app.Validate(); err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", op, app.SessionID, err)
	}
	return nil
}
