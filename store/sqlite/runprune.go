package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/runtime"
)

var _ runtime.Pruner = (*RunStore)(nil)

// runSize keeps the estimated size of the runs and events
// (runtime.RunSize, runtime.EventSize) without scanning them on every
// prune: a count from the tables (base), plus what the writes of this
// process added since (added). The count is redone hourly, and on every
// prune of a Shared store (other processes write too).
type runSize struct {
	shared  bool
	added   atomic.Int64
	mu      sync.Mutex // serializes Prune; guards the rest
	base    int64
	counted time.Time // zero: never
}

// runRecount is how often the size estimate is recounted from the tables.
const runRecount = time.Hour

// pruneBatch is the number of runs a prune deletes per transaction.
const pruneBatch = 256

// The SQL forms of runtime.RunSize and runtime.EventSize (the overheads
// are theirs: 160 and 64 bytes); chunkSizeSQL sums EventSize over a
// chunk's events, whose types and data add up to its size column.
const (
	runSizeSQL = `160 + octet_length(r.tenant) + octet_length(r.id) + octet_length(r.session_id) + octet_length(r.agent_id)
		+ octet_length(r.parent_id) + octet_length(r.correlation_id) + octet_length(r.conversation_id) + octet_length(r.invocation_id)
		+ coalesce(octet_length(r.output), 0) + coalesce(octet_length(r.error_bucket), 0)
		+ coalesce(octet_length(r.error_category), 0) + coalesce(octet_length(r.error_message), 0)`
	chunkSizeSQL = `c.size + c.n * (64 + octet_length(c.tenant) + octet_length(c.run_id) + octet_length(c.session_id))`
	runTotalSQL  = `SELECT (SELECT coalesce(sum(` + runSizeSQL + `), 0) FROM runs r)
		+ (SELECT coalesce(sum(` + chunkSizeSQL + `), 0) FROM run_event_chunks c)`
	// pruneScanSQL reads the next finished runs in start order with their
	// estimated sizes and event counts.
	pruneScanSQL = `SELECT r.pos, r.ended_at, ` + runSizeSQL + `,
		(SELECT coalesce(sum(c.n), 0) FROM run_event_chunks c WHERE c.tenant = r.tenant AND c.run_id = r.id),
		(SELECT coalesce(sum(` + chunkSizeSQL + `), 0) FROM run_event_chunks c WHERE c.tenant = r.tenant AND c.run_id = r.id)
		FROM runs r WHERE r.pos > ? AND r.status != 'started' ORDER BY r.pos LIMIT ?`
)

// grew records what a committed write added.
func (rs *RunStore) grew(n int64) { rs.s.runSize.added.Add(n) }

// total returns the estimated size now, recounting when due. Call it
// with runSize.mu held.
func (rs *RunStore) total(ctx context.Context) (int64, error) {
	z := &rs.s.runSize
	if z.counted.IsZero() || z.shared || rs.s.now().Sub(z.counted) >= runRecount {
		var n int64
		if err := rs.s.reader.QueryRowContext(ctx, runTotalSQL).Scan(&n); err != nil {
			return 0, rs.s.fail(ctx, "prune runs", "", "", err)
		}
		// Writes that committed during the count were counted and added
		// both; the error is at most those few, and the next recount
		// clears it.
		z.base, z.counted = n-z.added.Load(), rs.s.now()
	}
	return z.base + z.added.Load(), nil
}

// Prune deletes finished runs that ended before req.EndedBefore, then
// the oldest finished runs while the runs and events take more than
// req.MaxBytes (runtime.Pruner), a batch of runs per write transaction;
// their events go with them. Age pruning walks the runs in start order
// and stops at the first finished run that ended after the cutoff, so a
// long-running old run can hold back a few younger ones until it ages
// out too.
func (rs *RunStore) Prune(ctx context.Context, req runtime.PruneRequest) (runtime.PruneResult, error) {
	const op = "prune runs"
	if err := req.Validate(); err != nil {
		return runtime.PruneResult{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := rs.start(ctx, op, ""); err != nil {
		return runtime.PruneResult{}, err
	}
	z := &rs.s.runSize
	z.mu.Lock()
	defer z.mu.Unlock()
	var res runtime.PruneResult
	total, err := rs.total(ctx)
	if err != nil {
		return res, err
	}
	cutoff := int64(-1)
	if !req.EndedBefore.IsZero() {
		cutoff = nanotime.Of(req.EndedBefore)
	}
	var after int64
	for {
		type cand struct{ pos, ended, size, events int64 }
		var batch []cand
		rows, err := rs.s.reader.QueryContext(ctx, pruneScanSQL, after, pruneBatch)
		if err != nil {
			return res, rs.s.fail(ctx, op, "", "", err)
		}
		for rows.Next() {
			var c cand
			var evSize int64
			if err := rows.Scan(&c.pos, &c.ended, &c.size, &c.events, &evSize); err != nil {
				rows.Close()
				return res, rs.s.fail(ctx, op, "", "", err)
			}
			c.size += evSize
			batch = append(batch, c)
		}
		if err := rows.Close(); err != nil {
			return res, rs.s.fail(ctx, op, "", "", err)
		}
		if err := rows.Err(); err != nil {
			return res, rs.s.fail(ctx, op, "", "", err)
		}
		var del []cand
		done := len(batch) < pruneBatch
		for _, c := range batch {
			old := c.ended < cutoff
			if !old && (req.MaxBytes == 0 || total <= req.MaxBytes) {
				done = true
				break
			}
			del = append(del, c)
			total -= c.size
		}
		if len(del) > 0 {
			var q strings.Builder
			q.WriteString(`DELETE FROM runs WHERE pos IN (`)
			args := make([]any, len(del))
			var size, events int64
			for i, c := range del {
				if i > 0 {
					q.WriteByte(',')
				}
				q.WriteByte('?')
				args[i] = c.pos
				size += c.size
				events += c.events
			}
			q.WriteByte(')')
			if err := rs.write(ctx, op, "", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, q.String(), args...)
				return err
			}); err != nil {
				return res, err
			}
			z.base -= size
			res.Runs += int64(len(del))
			res.Events += events
			after = del[len(del)-1].pos
		}
		if done || ctx.Err() != nil {
			break
		}
	}
	res.Bytes = z.base + z.added.Load()
	return res, ctx.Err()
}

var _ runtime.SessionPurger = (*RunStore)(nil)

// purgeScopeSQL selects the runs a purge deletes: the tenant's runs of
// the session finished and started at or before ?3, or committed (?6)
// whenever they started.
const (
	purgeWhereSQL = `r.tenant = ?1 AND r.session_id = ?2
		AND ((r.status != 'started' AND r.started_at <= ?3) OR r.id IN (SELECT value FROM json_each(?6)))
		AND r.id NOT IN (SELECT value FROM json_each(?4))
		AND (json_array_length(?5) = 0 OR r.id IN (SELECT value FROM json_each(?5)))`
	purgeScopeSQL = `FROM runs r WHERE ` + purgeWhereSQL
	// purgeChunksSQL selects the chunks of those runs. A chunk carries
	// its run's session: naming it lets the planner search
	// run_event_chunks_session on (tenant, session_id) whatever the
	// statistics say. Without it, on a database that has none yet (they
	// are gathered at close), the planner searched that index on the
	// tenant alone: every delete read all the tenant's chunks, holding
	// the writer for as long (100 ms at 15,000 runs).
	purgeChunksSQL = `JOIN runs r ON r.tenant = c.tenant AND r.id = c.run_id WHERE c.tenant = ?1 AND c.session_id = ?2 AND ` + purgeWhereSQL
)

// PurgeSession deletes the session's runs started by req.StartedBy with
// their events, in one write transaction (runtime.SessionPurger).
func (rs *RunStore) PurgeSession(ctx context.Context, req runtime.PurgeRequest) (runtime.PurgeResult, error) {
	const op = "purge session runs"
	if err := req.Validate(); err != nil {
		return runtime.PurgeResult{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := rs.start(ctx, op, req.SessionID); err != nil {
		return runtime.PurgeResult{}, err
	}
	by := int64(math.MaxInt64)
	if !req.StartedBy.IsZero() {
		by = nanotime.Of(req.StartedBy)
	}
	// The kept ids as a JSON array, in text (SQLite reads a blob as
	// JSONB).
	b, err := json.Marshal(append([]string{}, req.Keep...))
	if err != nil {
		return runtime.PurgeResult{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	keep := string(b)
	if b, err = json.Marshal(append([]string{}, req.Only...)); err != nil {
		return runtime.PurgeResult{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	only := string(b)
	if b, err = json.Marshal(append([]string{}, req.Committed...)); err != nil {
		return runtime.PurgeResult{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	committed := string(b)
	var (
		res  runtime.PurgeResult
		size int64
		ids  []string
	)
	err = rs.write(ctx, op, req.SessionID, func(ctx context.Context, tx *sql.Tx) error {
		res, size, ids = runtime.PurgeResult{}, 0, ids[:0]
		var evSize int64
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) `+purgeScopeSQL+`),
			(SELECT coalesce(sum(`+runSizeSQL+`), 0) `+purgeScopeSQL+`),
			(SELECT coalesce(sum(c.n), 0) FROM run_event_chunks c `+purgeChunksSQL+`),
			(SELECT coalesce(sum(`+chunkSizeSQL+`), 0) FROM run_event_chunks c `+purgeChunksSQL+`)`,
			req.Tenant, req.SessionID, by, keep, only, committed).Scan(&res.Runs, &size, &res.Events, &evSize); err != nil {
			return rs.s.fail(ctx, op, req.SessionID, "", err)
		}
		size += evSize
		if res.Runs == 0 {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `DELETE FROM runs AS r WHERE `+purgeWhereSQL+` RETURNING id`,
			req.Tenant, req.SessionID, by, keep, only, committed)
		if err != nil {
			return rs.s.fail(ctx, op, req.SessionID, "", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return rs.s.fail(ctx, op, req.SessionID, "", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return rs.s.fail(ctx, op, req.SessionID, "", err)
		}
		return nil
	})
	if err != nil {
		return runtime.PurgeResult{}, err
	}
	// The deleted runs' cached heads (a started run's) are stale now.
	for _, id := range ids {
		rs.s.heads.drop(req.Tenant, id)
	}
	rs.grew(-size)
	return res, nil
}
