package postgres

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/runtime"
)

var _ runtime.Pruner = (*RunStore)(nil)

// pruneBatch is how many runs one prune transaction deletes, so that the
// turns' writes interleave with a long prune.
const pruneBatch = 256

// runSizeSQL and eventSizeSQL estimate the stored size of the runs and
// the events as runtime.RunSize and runtime.EventSize do.
const (
	runSizeSQL = `SELECT coalesce(sum(160 + octet_length(id) + octet_length(tenant) + octet_length(session_id)
		+ octet_length(agent_id) + octet_length(parent_id) + octet_length(correlation_id) + octet_length(conversation_id)
		+ octet_length(invocation_id) + coalesce(octet_length(output), 0) + coalesce(octet_length(error_bucket), 0)
		+ coalesce(octet_length(error_category), 0) + coalesce(octet_length(error_message), 0)), 0)::bigint FROM runs`
	eventSizeSQL = `SELECT coalesce(sum(64 + octet_length(type) + coalesce(octet_length(data), 0) + octet_length(tenant)
		+ octet_length(run_id) + octet_length(session_id)), 0)::bigint FROM run_events`
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
	batch := func(cond string, args ...any) (int64, error) {
		var runs, events int64
		err := rs.s.pool.QueryRow(ctx, `WITH victims AS (
				SELECT pos, tenant, id FROM runs WHERE status <> 'started' `+cond+` ORDER BY pos LIMIT `+fmt.Sprint(pruneBatch)+`),
			ev AS (DELETE FROM run_events e USING victims v WHERE e.tenant = v.tenant AND e.run_id = v.id RETURNING 1),
			del AS (DELETE FROM runs r USING victims v WHERE r.pos = v.pos RETURNING 1)
			SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM ev)`, args...).Scan(&runs, &events)
		res.Runs, res.Events = res.Runs+runs, res.Events+events
		return runs, err
	}
	if !req.EndedBefore.IsZero() {
		for {
			n, err := batch(`AND ended_at > 0 AND ended_at < $1`, unixNano(req.EndedBefore))
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
		n, err := batch(``)
		if err != nil {
			return res, rs.runFail(ctx, op, "", err)
		}
		if res.Bytes, err = size(); err != nil {
			return res, rs.runFail(ctx, op, "", err)
		}
		if n == 0 {
			break // only started runs are left
		}
	}
	return res, nil
}
