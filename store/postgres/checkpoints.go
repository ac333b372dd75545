package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

// CheckpointStore is the Store's checkpoint.Store for checkpoint and
// paused-invocation records, in the same database as the sessions: it is
// also a checkpoint.SessionWriter, so a suspension's session write and
// its paused record commit together, as do a resume's session write and
// the record's deletion. Get it with [Store.Checkpoints].
type CheckpointStore struct {
	s *Store
}

var (
	_ checkpoint.Store         = (*CheckpointStore)(nil)
	_ checkpoint.SessionWriter = (*CheckpointStore)(nil)
)

// Checkpoints returns the store of checkpoint and paused-invocation
// records that shares the Store's database and transactions.
func (s *Store) Checkpoints() *CheckpointStore { return &CheckpointStore{s: s} }

// SessionStore returns the session store the records' session writes go
// to (checkpoint.SessionWriter).
func (c *CheckpointStore) SessionStore() session.Store { return c.s }

const cpColumns = `invocation_id, kind, correlation_id, session_id, signal_id, schema_version,
	completed_node_count, saved_at, data`

func validKind(k checkpoint.Kind) bool {
	return k == checkpoint.KindCheckpoint || k == checkpoint.KindSuspended
}

// validateKey mirrors the checks of checkpoint.MemoryStore.
func validateKey(verb string, k checkpoint.Key) error {
	if err := session.ValidateID(k.InvocationID); err != nil {
		return fmt.Errorf("postgres: %s: %w: invocation id: %v", verb, checkpoint.ErrInvalidRequest, err)
	}
	if !validKind(k.Kind) {
		return fmt.Errorf("postgres: %s: %w: unknown record kind %q", verb, checkpoint.ErrInvalidRequest, k.Kind)
	}
	return nil
}

// cpOp names an operation on a record kind, for error messages.
func cpOp(verb string, k checkpoint.Kind) string { return verb + " " + string(k) + " record" }

// scanCheckpoint reads one row of cpColumns; a row that cannot be a
// record is checkpoint_record_invalid.
func scanCheckpoint(row pgx.Row) (*checkpoint.Record, error) {
	var (
		r              checkpoint.Record
		kind           string
		count, savedAt int64
		data           []byte
	)
	if err := row.Scan(&r.InvocationID, &kind, &r.CorrelationID, &r.SessionID, &r.SignalID, &r.SchemaVersion,
		&count, &savedAt, &data); err != nil {
		return nil, err
	}
	r.Kind = checkpoint.Kind(kind)
	if !validKind(r.Kind) || count < 0 || !jsonvalid.Valid(data) {
		return nil, errcat.Wrap(errcat.CheckpointRecordInvalid, "postgres: checkpoint record",
			fmt.Errorf("stored record %q of kind %q is malformed", r.InvocationID, kind))
	}
	r.CompletedNodeCount, r.SavedAt, r.Data = int(count), nanotime.Time(savedAt), data
	return &r, nil
}

// upsertTx writes r inside an open transaction.
func (c *CheckpointStore) upsertTx(ctx context.Context, tx pgx.Tx, r checkpoint.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO checkpoint_records (`+cpColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (kind, invocation_id) DO UPDATE SET
			correlation_id = excluded.correlation_id, session_id = excluded.session_id,
			signal_id = excluded.signal_id, schema_version = excluded.schema_version,
			completed_node_count = excluded.completed_node_count, saved_at = excluded.saved_at,
			data = excluded.data`,
		r.InvocationID, string(r.Kind), r.CorrelationID, r.SessionID, r.SignalID, r.SchemaVersion,
		int64(r.CompletedNodeCount), nanotime.Of(r.SavedAt), []byte(r.Data))
	return err
}

// prepare checks a record to write and stamps its SavedAt.
func (c *CheckpointStore) prepare(r *checkpoint.Record) error {
	k := checkpoint.Key{InvocationID: r.InvocationID, Kind: r.Kind}
	if err := validateKey("save", k); err != nil {
		return err
	}
	if !jsonvalid.Valid(r.Data) {
		return fmt.Errorf("postgres: %s %q: %w: record data is not valid JSON", cpOp("save", k.Kind), k.InvocationID, checkpoint.ErrInvalidRequest)
	}
	if err := r.ValidateFields(); err != nil {
		return fmt.Errorf("postgres: %s %q: %w", cpOp("save", k.Kind), k.InvocationID, err)
	}
	if r.SavedAt.IsZero() {
		r.SavedAt = c.s.now()
	}
	return nil
}

// Save writes r, replacing the record with the same invocation id and
// kind. A zero SavedAt is set to the Store's clock.
func (c *CheckpointStore) Save(ctx context.Context, r checkpoint.Record) error {
	if err := c.prepare(&r); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, c.s.pool, func(tx pgx.Tx) error { return c.upsertTx(ctx, tx, r) })
	if err != nil {
		return c.s.fail(ctx, cpOp("save", r.Kind), r.InvocationID, errcat.CheckpointSaveFailed, err)
	}
	return nil
}

// Load returns the record, or an error wrapping checkpoint.ErrNotFound.
func (c *CheckpointStore) Load(ctx context.Context, k checkpoint.Key) (*checkpoint.Record, error) {
	if err := validateKey("load", k); err != nil {
		return nil, err
	}
	r, err := scanCheckpoint(c.s.pool.QueryRow(ctx, `SELECT `+cpColumns+` FROM checkpoint_records WHERE kind = $1 AND invocation_id = $2`,
		string(k.Kind), k.InvocationID))
	return c.answer(ctx, "load", k, r, err)
}

// answer maps a single-record read's outcome.
func (c *CheckpointStore) answer(ctx context.Context, verb string, k checkpoint.Key, r *checkpoint.Record, err error) (*checkpoint.Record, error) {
	op := cpOp(verb, k.Kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("postgres: %s %q: %w", op, k.InvocationID, checkpoint.ErrNotFound)
	case errcat.Of(err) == errcat.CheckpointRecordInvalid:
		return nil, fmt.Errorf("postgres: %s %q: %w", op, k.InvocationID, err)
	case err != nil:
		return nil, c.s.fail(ctx, op, k.InvocationID, errcat.CheckpointSaveFailed, err)
	}
	return r, nil
}

// Take deletes the record and returns it in one statement: of concurrent
// takers (on any replica) exactly one gets it, the others
// checkpoint.ErrNotFound. A record that cannot be decoded stays in place
// and is reported as checkpoint_record_invalid.
func (c *CheckpointStore) Take(ctx context.Context, k checkpoint.Key) (*checkpoint.Record, error) {
	if err := validateKey("take", k); err != nil {
		return nil, err
	}
	var r *checkpoint.Record
	err := pgx.BeginFunc(ctx, c.s.pool, func(tx pgx.Tx) (err error) {
		r, err = scanCheckpoint(tx.QueryRow(ctx, `DELETE FROM checkpoint_records WHERE kind = $1 AND invocation_id = $2 RETURNING `+cpColumns,
			string(k.Kind), k.InvocationID))
		return err // a malformed record rolls back: it stays
	})
	return c.answer(ctx, "take", k, r, err)
}

// Delete removes the record; deleting a missing record succeeds.
func (c *CheckpointStore) Delete(ctx context.Context, k checkpoint.Key) error {
	if err := validateKey("delete", k); err != nil {
		return err
	}
	if _, err := c.s.pool.Exec(ctx, `DELETE FROM checkpoint_records WHERE kind = $1 AND invocation_id = $2`, string(k.Kind), k.InvocationID); err != nil {
		return c.s.fail(ctx, cpOp("delete", k.Kind), k.InvocationID, errcat.CheckpointSaveFailed, err)
	}
	return nil
}

// List returns a page of summaries of one kind in ascending invocation-id
// order, optionally filtered by signal, session and correlation id (each
// served by a partial index). Pages are keyed by invocation id.
func (c *CheckpointStore) List(ctx context.Context, req checkpoint.ListRequest) (checkpoint.ListResponse, error) {
	op := "list " + string(req.Kind) + " records"
	after, size, err := req.Page()
	if err != nil {
		return checkpoint.ListResponse{}, fmt.Errorf("postgres: %s: %w", op, err)
	}
	where, args := []string{"kind = $1", "invocation_id > $2"}, []any{string(req.Kind), after}
	for _, f := range []struct{ col, val string }{
		{"signal_id", req.SignalID}, {"session_id", req.SessionID}, {"correlation_id", req.CorrelationID},
	} {
		if f.val != "" {
			args = append(args, f.val)
			where = append(where, fmt.Sprintf("%s = $%d AND %s <> ''", f.col, len(args), f.col))
		}
	}
	args = append(args, size+1)
	q := `SELECT invocation_id, kind, correlation_id, session_id, signal_id, completed_node_count, saved_at
		FROM checkpoint_records WHERE ` + strings.Join(where, " AND ") + fmt.Sprintf(` ORDER BY invocation_id LIMIT $%d`, len(args))
	rows, err := c.s.pool.Query(ctx, q, args...)
	if err != nil {
		return checkpoint.ListResponse{}, c.s.fail(ctx, op, after, errcat.CheckpointSaveFailed, err)
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
			return checkpoint.ListResponse{}, c.s.fail(ctx, op, after, errcat.CheckpointSaveFailed, err)
		}
		if len(resp.Records) == size {
			resp.NextPageToken = session.EncodePageToken(resp.Records[size-1].InvocationID)
			break
		}
		sum.Kind, sum.CompletedNodeCount, sum.SavedAt = checkpoint.Kind(kind), int(count), nanotime.Time(savedAt)
		resp.Records = append(resp.Records, sum)
	}
	if err := rows.Err(); err != nil {
		return checkpoint.ListResponse{}, c.s.fail(ctx, op, after, errcat.CheckpointSaveFailed, err)
	}
	return resp, nil
}

// sessionWrite validates the session half of a combined write.
func sessionWrite(op string, save *session.SaveRequest, app *session.AppendRequest) error {
	if (save == nil) == (app == nil) {
		return fmt.Errorf("postgres: %s: %w: set exactly one of Save and Append", op, checkpoint.ErrInvalidRequest)
	}
	if save != nil {
		if err := save.Validate(); err != nil {
			return fmt.Errorf("postgres: %s %q: %w", op, save.SessionID, err)
		}
		return nil
	}
	if err := app.Validate(); err != nil {
		return fmt.Errorf("postgres: %s %q: %w", op, app.SessionID, err)
	}
	return nil
}

// applyTx applies the session half of a combined write.
func (c *CheckpointStore) applyTx(ctx context.Context, tx pgx.Tx, save *session.SaveRequest, app *session.AppendRequest) (session.WriteResult, error) {
	if save != nil {
		return c.s.saveTx(ctx, tx, *save)
	}
	return c.s.appendTx(ctx, tx, *app)
}

// combinedErr maps a combined write's error: the session half's conflict
// is session_write_conflict, a missing record wraps
// checkpoint.ErrNotFound, anything else checkpoint_save_failed.
func (c *CheckpointStore) combinedErr(ctx context.Context, op, id string, save *session.SaveRequest, app *session.AppendRequest, err error) error {
	if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, session.ErrInvalidRequest) || errors.Is(err, checkpoint.ErrInvalidRequest) {
		return err
	}
	sid, expected := "", (*int64)(nil)
	if save != nil {
		sid, expected = save.SessionID, save.ExpectedVersion
	} else {
		sid, expected = app.SessionID, &app.ExpectedVersion
	}
	if we := c.s.writeErr(ctx, op, sid, expected, err); errors.Is(we, session.ErrWriteConflict) {
		return we
	}
	return c.s.fail(ctx, op, id, errcat.CheckpointSaveFailed, err)
}

// WriteSuspended writes a suspended invocation's session state and its
// paused-invocation record in one transaction (suspension §8.6): a crash
// leaves both or neither.
func (c *CheckpointStore) WriteSuspended(ctx context.Context, w checkpoint.SuspendWrite) (session.WriteResult, error) {
	r := w.Record
	if err := c.prepare(&r); err != nil {
		return session.WriteResult{}, err
	}
	op := cpOp("save", r.Kind)
	if err := sessionWrite(op, w.Save, w.Append); err != nil {
		return session.WriteResult{}, err
	}
	var res session.WriteResult
	err := pgx.BeginFunc(ctx, c.s.pool, func(tx pgx.Tx) (err error) {
		if res, err = c.applyTx(ctx, tx, w.Save, w.Append); err != nil {
			return err
		}
		return c.upsertTx(ctx, tx, r)
	})
	if err != nil {
		return session.WriteResult{}, c.combinedErr(ctx, op, r.InvocationID, w.Save, w.Append, err)
	}
	return res, nil
}

// WriteResumed applies the session write and deletes the paused record in
// one transaction. If the record is gone (another replica completed the
// resume), nothing is written and the error wraps checkpoint.ErrNotFound.
func (c *CheckpointStore) WriteResumed(ctx context.Context, w checkpoint.ResumeWrite) (session.WriteResult, error) {
	k := w.Key
	if err := validateKey("delete", k); err != nil {
		return session.WriteResult{}, err
	}
	op := cpOp("delete", k.Kind)
	if err := sessionWrite(op, w.Save, w.Append); err != nil {
		return session.WriteResult{}, err
	}
	var res session.WriteResult
	err := pgx.BeginFunc(ctx, c.s.pool, func(tx pgx.Tx) (err error) {
		tag, err := tx.Exec(ctx, `DELETE FROM checkpoint_records WHERE kind = $1 AND invocation_id = $2`, string(k.Kind), k.InvocationID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("postgres: %s %q: %w", op, k.InvocationID, checkpoint.ErrNotFound)
		}
		res, err = c.applyTx(ctx, tx, w.Save, w.Append)
		return err
	})
	if err != nil {
		return session.WriteResult{}, c.combinedErr(ctx, op, k.InvocationID, w.Save, w.Append, err)
	}
	return res, nil
}
