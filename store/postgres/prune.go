package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/runtime"
)

var _ runtime.Pruner = (*RunStore)(nil)

// pruneBatch is how many runs one prune transaction deletes, so that the
// turns' writes interleave with a long prune.
const pruneBatch = 256

// oldestFinished returns the positions of the oldest finished runs whose
// estimated sizes (with their events) add up to excess, at most a batch.
func (rs *RunStore) oldestFinished(ctx context.Context, excess int64) ([]int64, error) {
	rows, err := rs.s.pool.Query(ctx, `SELECT r.pos, `+runSizeExpr+` + coalesce((SELECT sum(`+eventSizeExpr+`) FROM run_events e
			WHERE e.tenant = r.tenant AND e.run_id = r.id), 0)::bigint
		FROM runs r WHERE r.status <> 'started' ORDER BY r.pos LIMIT `+fmt.Sprint(pruneBatch))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	var freed int64
	for rows.Next() && freed < excess {
		var pos, n int64
		if err := rows.Scan(&pos, &n); err != nil {
			return nil, err
		}
		out, freed = append(out, pos), freed+n
	}
	return out, rows.Err()
}

// runSizeSQL and eventSizeSQL estimate the stored size of the runs and
// the events as runtime.RunSize and runtime.EventSize do.
const (
	runSizeExpr = `(160 + octet_length(r.id) + octet_length(r.tenant) + octet_length(r.session_id)
		+ octet_length(r.agent_id) + octet_length(r.parent_id) + octet_length(r.correlation_id) + octet_length(r.conversation_id)
		+ octet_length(r.invocation_id) + coalesce(octet_length(r.output), 0) + coalesce(octet_length(r.error_bucket), 0)
		+ coalesce(octet_length(r.error_category), 0) + coalesce(octet_length(r.error_message), 0))`
	eventSizeExpr = `(64 + octet_length(e.type) + coalesce(octet_length(e.data), 0) + octet_length(e.tenant)
		+ octet_length(e.run_id) + octet_length(e.session_id))`
	runSizeSQL   = `SELECT coalesce(sum(` + runSizeExpr + `), 0)::bigint FROM runs r`
	eventSizeSQL = `SELECT coalesce(sum(` + eventSizeExpr + `), 0)::bigint FROM run_events e`
)

// Prune deletes, oldest first, the finished runs that ended before
// req.EndedBefore, then, while the runs and events take more than
// req.MaxBytes (as estimated from the tables, shared by every replica),
// the oldest finished runs; their events go with them. Runs in status
// started are never pruned. Each batch is its own transaction.
func (rs *RunStore) Prune(ctx context.Context, req runtime.PruneRequest) (runtime.PruneResult, error) {
	const op = "prune runs"
	if err := req.Validate(); err != nil {
		return runtime.PruneResult{}, fmt.Errorf("postgres: %s: %w", op, err)
	}
	var res runtime.PruneResult
	// batch deletes the finished runs victims selects (pos, tenant, id),
	// with their events, in one statement.
	batch := func(victims string, args ...any) (int64, error) {
		var runs, events int64
		err := rs.s.pool.QueryRow(ctx, `WITH victims AS (`+victims+`),
			ev AS (DELETE FROM run_events e USING victims v WHERE e.tenant = v.tenant AND e.run_id = v.id RETURNING 1),
			del AS (DELETE FROM runs r USING victims v WHERE r.pos = v.pos RETURNING 1)
			SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM ev)`, args...).Scan(&runs, &events)
		res.Runs, res.Events = res.Runs+runs, res.Events+events
		return runs, err
	}
	if !req.EndedBefore.IsZero() {
		for {
			n, err := batch(`SELECT pos, tenant, id FROM runs WHERE status <> 'started' AND ended_at > 0 AND ended_at < $1
				ORDER BY pos LIMIT `+fmt.Sprint(pruneBatch), nanotime.Of(req.EndedBefore))
			if err != nil {
				return res, rs.runFail(ctx, op, "", err)
			}
			if n < pruneBatch {
				break
			}
		}
	}
	size := func() (int64, error) {
		var runs, events int64
		if err := rs.s.pool.QueryRow(ctx, runSizeSQL).Scan(&runs); err != nil {
			return 0, err
		}
		if err := rs.s.pool.QueryRow(ctx, eventSizeSQL).Scan(&events); err != nil {
			return 0, err
		}
		return runs + events, nil
	}
	var err error
	if res.Bytes, err = size(); err != nil {
		return res, rs.runFail(ctx, op, "", err)
	}
	for req.MaxBytes > 0 && res.Bytes > req.MaxBytes {
		// The oldest finished runs, each with its estimated size, until
		// deleting them brings the estimate under the bound.
		pos, err := rs.oldestFinished(ctx, res.Bytes-req.MaxBytes)
		if err != nil {
			return res, rs.runFail(ctx, op, "", err)
		}
		if len(pos) == 0 {
			break // only started runs are left
		}
		if _, err := batch(`SELECT pos, tenant, id FROM runs WHERE pos = ANY($1)`, pos); err != nil {
			return res, rs.runFail(ctx, op, "", err)
		}
		if res.Bytes, err = size(); err != nil {
			return res, rs.runFail(ctx, op, "", err)
		}
	}
	return res, nil
}

var _ runtime.SessionPurger = (*RunStore)(nil)

// PurgeSession deletes the session's runs started by req.StartedBy with
// their events, in one statement (runtime.SessionPurger).
func (rs *RunStore) PurgeSession(ctx context.Context, req runtime.PurgeRequest) (runtime.PurgeResult, error) {
	const op = "purge session runs"
	if err := req.Validate(); err != nil {
		return runtime.PurgeResult{}, fmt.Errorf("postgres: %s: %w", op, err)
	}
	by := int64(math.MaxInt64)
	if !req.StartedBy.IsZero() {
		by = nanotime.Of(req.StartedBy)
	}
	keep, only, committed := req.Keep, req.Only, req.Committed
	if keep == nil {
		keep = []string{}
	}
	if only == nil {
		only = []string{}
	}
	if committed == nil {
		committed = []string{}
	}
	var res runtime.PurgeResult
	err := rs.s.pool.QueryRow(ctx, `WITH victims AS (
			SELECT pos, tenant, id FROM runs WHERE tenant = $1 AND session_id = $2 AND ((status <> 'started' AND started_at <= $3) OR id = ANY($6))
				AND NOT (id = ANY($4)) AND (cardinality($5::text[]) = 0 OR id = ANY($5))),
		ev AS (DELETE FROM run_events e USING victims v WHERE e.tenant = v.tenant AND e.run_id = v.id RETURNING 1),
		del AS (DELETE FROM runs r USING victims v WHERE r.pos = v.pos RETURNING 1)
		SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM ev)`, req.Tenant, req.SessionID, by, keep, only, committed).Scan(&res.Runs, &res.Events)
	if err != nil {
		return runtime.PurgeResult{}, rs.runFail(ctx, op, req.SessionID, err)
	}
	return res, nil
}
