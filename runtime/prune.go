package runtime

import (
	"context"
	"fmt"
	"time"
)

// Pruner is the optional capability of a Store that deletes old runs
// with their events, so that run records have a retention period and a
// size cap. Detect it with a type assertion; [Prune] runs it on a
// schedule.
//
// Runs in status started are never pruned (a crash recovery may still
// need them). A pruned run is gone: [Store.Run] answers ErrNotFound and
// its events are no longer listed, so a session's event stream resumed
// from an id that was pruned starts at the oldest event still held.
type Pruner interface {
	// Prune deletes, oldest first (in the order the runs were started),
	// every finished run that ended before req.EndedBefore, then, while
	// the store's runs and events take more than req.MaxBytes, the oldest
	// finished runs. It works in batches, each its own transaction, so
	// that writes of live turns interleave with it.
	Prune(ctx context.Context, req PruneRequest) (PruneResult, error)
}

// PruneRequest is the argument of [Pruner.Prune].
type PruneRequest struct {
	// EndedBefore prunes finished runs that ended before it; zero prunes
	// none by age.
	EndedBefore time.Time
	// MaxBytes is the size the runs and events may take, as estimated by
	// [RunSize] and [EventSize]; 0 means no size bound.
	MaxBytes int64
}

// Validate checks the request.
func (r PruneRequest) Validate() error {
	if r.MaxBytes < 0 {
		return fmt.Errorf("%w: negative MaxBytes %d", ErrInvalidRequest, r.MaxBytes)
	}
	return nil
}

// PruneResult is what a [Pruner.Prune] call deleted and what is left.
type PruneResult struct {
	Runs, Events int64
	// Bytes is the estimated size of the runs and events left.
	Bytes int64
}

// Per-record overheads of the size estimate: ids, timestamps, status and
// index entries, roughly as a SQL store lays them out.
const (
	runOverhead   = 160
	eventOverhead = 64
)

// RunSize is the estimated storage size of a run record: its ids,
// output and error message plus a fixed overhead. Stores use it (with
// [EventSize]) for [PruneRequest.MaxBytes].
func RunSize(r Run) int64 {
	n := runOverhead + len(r.ID) + len(r.Tenant) + len(r.SessionID) + len(r.AgentID) + len(r.ParentID) +
		len(r.CorrelationID) + len(r.ConversationID) + len(r.InvocationID) + len(r.Output)
	if r.Error != nil {
		n += len(r.Error.Bucket) + len(r.Error.Category) + len(r.Error.Message)
	}
	return int64(n)
}

// EventSize is the estimated storage size of an event: its type, data
// and ids plus a fixed overhead.
func EventSize(e Event) int64 {
	return int64(eventOverhead + len(e.Type) + len(e.Data) + len(e.Tenant) + len(e.RunID) + len(e.SessionID))
}

// FinishSize is what finishing a run with f adds to its [RunSize].
func FinishSize(f FinishRequest) int64 {
	n := len(f.Output) + len(f.InvocationID)
	if f.Error != nil {
		n += len(f.Error.Bucket) + len(f.Error.Category) + len(f.Error.Message)
	}
	return int64(n)
}

// PruneConfig schedules [Prune].
type PruneConfig struct {
	// Retention is how long a finished run is kept; 0 keeps runs
	// whatever their age.
	Retention time.Duration
	// MaxBytes caps the runs' and events' estimated size; 0 means no cap.
	MaxBytes int64
	// Interval between passes; default one minute. The first pass runs
	// at once.
	Interval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// OnPass, when set, receives every pass's result or error (logging).
	OnPass func(PruneResult, error)
}

// Prune runs p.Prune every cfg.Interval until ctx is done, deleting the
// runs older than cfg.Retention and the oldest beyond cfg.MaxBytes. It
// returns when ctx is done; run it in its own goroutine. With neither a
// retention nor a size cap it returns at once.
func Prune(ctx context.Context, p Pruner, cfg PruneConfig) {
	if cfg.Retention <= 0 && cfg.MaxBytes <= 0 {
		return
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req := PruneRequest{MaxBytes: max(cfg.MaxBytes, 0)}
		if cfg.Retention > 0 {
			req.EndedBefore = cfg.Now().Add(-cfg.Retention)
		}
		res, err := p.Prune(ctx, req)
		if ctx.Err() != nil {
			return
		}
		if cfg.OnPass != nil {
			cfg.OnPass(res, err)
		}
		t.Reset(cfg.Interval)
	}
}
