package runtime

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// MemoryConfig configures a MemoryStore.
type MemoryConfig struct {
	// Now is the clock for defaulted timestamps; default time.Now.
	Now func() time.Time
}

// MemoryStore is an in-memory Store, Recoverable, BatchWriter and Volatile. It is safe for
// concurrent use (one mutex: appends are serialized, so IDs increase in
// the order events become visible); values are copied on the way in
// and out. Its contents vanish with the process: use it for tests,
// examples and development.
type MemoryStore struct {
	now func() time.Time

	mu        sync.Mutex
	nextID    int64
	nextPos   int64
	runs      map[runKey]*memRun
	byTenant  map[string][]*memRun // in start order
	bySession map[runKey][]*memRun // key {tenant, session id}, in start order
	sessEvs   map[runKey][]evRef   // key {tenant, session id}, in ID order
}

// evRef is an event of a session's: the run's i-th. A run's events are
// stored once, on the run.
type evRef struct {
	r *memRun
	i int
}

func (e evRef) event() *Event { return &e.r.events[e.i] }

type runKey struct{ tenant, id string }

type memRun struct {
	run    Run
	pos    int64
	events []Event
}

var (
	_ Store       = (*MemoryStore)(nil)
	_ Recoverable = (*MemoryStore)(nil)
	_ BatchWriter = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &MemoryStore{
		now:       cfg.Now,
		runs:      map[runKey]*memRun{},
		byTenant:  map[string][]*memRun{},
		bySession: map[runKey][]*memRun{},
		sessEvs:   map[runKey][]evRef{},
	}
}

func cloneRun(r Run) Run {
	r.Output = bytes.Clone(r.Output)
	if r.Error != nil {
		e := *r.Error
		r.Error = &e
	}
	return r
}

// cloneEvents returns copies of the events, their data in one new
// buffer.
func cloneEvents(evs []Event) []Event {
	out := slices.Clone(evs)
	copyData(out)
	return out
}

// copyData gives the events' data a new buffer of their own, shared.
func copyData(evs []Event) {
	n := 0
	for i := range evs {
		n += len(evs[i].Data)
	}
	buf := make([]byte, 0, n)
	for i := range evs {
		if d := evs[i].Data; d != nil {
			start := len(buf)
			buf = append(buf, d...)
			evs[i].Data = buf[start:len(buf):len(buf)]
		}
	}
}

// Volatile reports true: the store's records vanish with the process.
func (m *MemoryStore) Volatile() bool { return true }

// StartRun records a new started run.
func (m *MemoryStore) StartRun(ctx context.Context, run Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateRun(run); err != nil {
		return fmt.Errorf("runtime: start run: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[runKey{run.Tenant, run.ID}]; ok {
		return fmt.Errorf("runtime: start run %q: %w: the run exists", run.ID, ErrConflict)
	}
	m.start(run)
	return nil
}

// start adds a validated run that does not exist; m.mu is held.
func (m *MemoryStore) start(run Run) {
	run = cloneRun(run)
	run.Status = StatusStarted
	if run.StartedAt.IsZero() {
		run.StartedAt = m.now()
	}
	m.nextPos++
	r := &memRun{run: run, pos: m.nextPos}
	m.runs[runKey{run.Tenant, run.ID}] = r
	m.byTenant[run.Tenant] = append(m.byTenant[run.Tenant], r)
	sk := runKey{run.Tenant, run.SessionID}
	m.bySession[sk] = append(m.bySession[sk], r)
}

// started returns the started run, or ErrNotFound / ErrConflict.
func (m *MemoryStore) started(op, tenant, id string) (*memRun, error) {
	r, ok := m.runs[runKey{tenant, id}]
	if !ok {
		return nil, fmt.Errorf("runtime: %s %q: %w", op, id, ErrNotFound)
	}
	if r.run.Status != StatusStarted {
		return nil, fmt.Errorf("runtime: %s %q: %w: the run is %s", op, id, ErrConflict, r.run.Status)
	}
	return r, nil
}

// Append stores events and, with req.Finish, finishes the run, atomically.
func (m *MemoryStore) Append(ctx context.Context, req AppendRequest) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("runtime: append: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.started("append to run", req.Tenant, req.RunID)
	if err != nil {
		return nil, err
	}
	out, _ := m.append(make([]Event, 0, len(req.Events)), nil, r, req)
	copyData(out)
	return out, nil
}

// append stores a validated request's events on the started run r, their
// data copied to the end of data (a new buffer when it has no room), and
// finishes it with req.Finish; m.mu is held. It returns out and data
// with the stored events appended, their data shared with the store's.
func (m *MemoryStore) append(out []Event, data []byte, r *memRun, req AppendRequest) ([]Event, []byte) {
	now := m.now()
	sk := runKey{r.run.Tenant, r.run.SessionID}
	refs := m.sessEvs[sk]
	need := 0
	for _, e := range req.Events {
		need += len(e.Data)
	}
	if cap(data)-len(data) < need {
		data = make([]byte, 0, need)
	}
	r.events = slices.Grow(r.events, len(req.Events))
	refs = slices.Grow(refs, len(req.Events))
	for _, e := range req.Events {
		m.nextID++
		e.ID = m.nextID
		e.Seq = int64(len(r.events) + 1)
		e.RunID, e.Tenant, e.SessionID, e.AgentID = r.run.ID, r.run.Tenant, r.run.SessionID, r.run.AgentID
		e.ParentRequestID = r.run.ParentID
		if e.Time.IsZero() {
			e.Time = now
		}
		if e.Data != nil {
			start := len(data)
			data = append(data, e.Data...)
			e.Data = data[start:len(data):len(data)]
		}
		refs = append(refs, evRef{r, len(r.events)})
		r.events = append(r.events, e)
		out = append(out, e)
	}
	m.sessEvs[sk] = refs
	if f := req.Finish; f != nil {
		m.finish(r, *f, now)
	}
	return out, data
}

// WriteTurns applies the records atomically under one lock (the
// [BatchWriter] capability): it checks every record against the runs as
// the earlier records leave them, and changes nothing if one fails.
func (m *MemoryStore) WriteTurns(ctx context.Context, turns []TurnRecord) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, t := range turns {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("runtime: write turns: record %d: %w", i, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The runs as the records checked so far leave them: a batch holds
	// few runs, a list is cheaper than a map.
	type runStatus struct {
		k  runKey
		st Status
	}
	var small [16]runStatus
	status := small[:0]
	for i, t := range turns {
		k := runKey{t.Append.Tenant, t.Append.RunID}
		j := slices.IndexFunc(status, func(s runStatus) bool { return s.k == k })
		var (
			st Status
			ok = j >= 0
		)
		if ok {
			st = status[j].st
		} else {
			if r := m.runs[k]; r != nil {
				st, ok = r.run.Status, true
			}
		}
		if t.Start != nil {
			if ok {
				return nil, fmt.Errorf("runtime: write turns: record %d: start run %q: %w: the run exists", i, k.id, ErrConflict)
			}
			st, ok = StatusStarted, true
		}
		if t.Appends() {
			switch {
			case !ok:
				return nil, fmt.Errorf("runtime: write turns: record %d: append to run %q: %w", i, k.id, ErrNotFound)
			case st != StatusStarted:
				return nil, fmt.Errorf("runtime: write turns: record %d: append to run %q: %w: the run is %s", i, k.id, ErrConflict, st)
			case t.Append.Finish != nil:
				st = t.Append.Finish.Status
			}
		}
		if j < 0 {
			status = append(status, runStatus{k, st})
		} else {
			status[j].st = st
		}
	}
	n, size := 0, 0
	for _, t := range turns {
		n += len(t.Append.Events)
		for _, e := range t.Append.Events {
			size += len(e.Data)
		}
	}
	out, data := make([]Event, 0, n), make([]byte, 0, size)
	for _, t := range turns {
		if t.Start != nil {
			m.start(*t.Start)
		}
		if t.Appends() {
			out, data = m.append(out, data, m.runs[runKey{t.Append.Tenant, t.Append.RunID}], t.Append)
		}
	}
	copyData(out)
	return out, nil
}

func (m *MemoryStore) finish(r *memRun, f FinishRequest, now time.Time) {
	r.run.Status = f.Status
	r.run.Output = bytes.Clone(f.Output)
	r.run.Error = nil
	if f.Error != nil {
		e := *f.Error
		r.run.Error = &e
	}
	r.run.InvocationID = f.InvocationID
	r.run.EndedAt = f.EndedAt
	if r.run.EndedAt.IsZero() {
		r.run.EndedAt = now
	}
}

// Finish moves a started run to a final status.
func (m *MemoryStore) Finish(ctx context.Context, req FinishRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("runtime: finish: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.started("finish run", req.Tenant, req.RunID)
	if err != nil {
		return err
	}
	m.finish(r, req, m.now())
	return nil
}

// Run returns a copy of the run.
func (m *MemoryStore) Run(ctx context.Context, tenant, id string) (*Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID("run id", id, false); err != nil {
		return nil, fmt.Errorf("runtime: get run: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[runKey{tenant, id}]
	if !ok {
		return nil, fmt.Errorf("runtime: get run %q: %w", id, ErrNotFound)
	}
	run := cloneRun(r.run)
	return &run, nil
}

// Events returns copies of the events after req.AfterID.
func (m *MemoryStore) Events(ctx context.Context, req EventsRequest) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req, err := req.Validate()
	if err != nil {
		return nil, fmt.Errorf("runtime: events: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var evs []Event
	if req.RunID != "" {
		r, ok := m.runs[runKey{req.Tenant, req.RunID}]
		if !ok {
			return nil, fmt.Errorf("runtime: events of run %q: %w", req.RunID, ErrNotFound)
		}
		evs = r.events
		i := sort.Search(len(evs), func(i int) bool { return evs[i].ID > req.AfterID })
		evs = evs[i:]
		return cloneEvents(evs[:min(len(evs), req.Limit)]), nil
	}
	refs := m.sessEvs[runKey{req.Tenant, req.SessionID}]
	i := sort.Search(len(refs), func(i int) bool { return refs[i].event().ID > req.AfterID })
	refs = refs[i:]
	refs = refs[:min(len(refs), req.Limit)]
	evs = make([]Event, len(refs))
	for i, ref := range refs {
		evs[i] = *ref.event()
	}
	copyData(evs)
	return evs, nil
}

// ListRuns returns a page of runs, newest first.
func (m *MemoryStore) ListRuns(ctx context.Context, req ListRunsRequest) (ListRunsResponse, error) {
	if err := ctx.Err(); err != nil {
		return ListRunsResponse{}, err
	}
	req, pos, err := req.Validate()
	if err != nil {
		return ListRunsResponse{}, fmt.Errorf("runtime: list runs: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	runs := m.byTenant[req.Tenant]
	if req.SessionID != "" {
		runs = m.bySession[runKey{req.Tenant, req.SessionID}]
	}
	end := len(runs) // runs[:end] are before the token's position
	if pos > 0 {
		end = sort.Search(len(runs), func(i int) bool { return runs[i].pos >= pos })
	}
	var resp ListRunsResponse
	for i := end - 1; i >= 0 && len(resp.Runs) < req.PageSize; i-- {
		resp.Runs = append(resp.Runs, cloneRun(runs[i].run))
		if len(resp.Runs) == req.PageSize && i > 0 {
			resp.NextPageToken = PageToken(runs[i].pos)
		}
	}
	return resp, nil
}

// UnfinishedRuns returns started runs that started before
// req.StartedBefore, oldest first.
func (m *MemoryStore) UnfinishedRuns(ctx context.Context, req UnfinishedRequest) ([]Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Limit < 0 {
		return nil, fmt.Errorf("runtime: unfinished runs: %w: negative limit", ErrInvalidRequest)
	}
	limit := clamp(req.Limit, DefaultPageSize, MaxPageSize)
	if req.Abandoned {
		return nil, nil // one process owns a MemoryStore
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []*memRun
	for _, r := range m.runs {
		if r.run.Status == StatusStarted && r.run.StartedAt.Before(req.StartedBefore) {
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b *memRun) int { return cmp.Compare(a.pos, b.pos) })
	out := make([]Run, 0, min(len(all), limit))
	for _, r := range all[:min(len(all), limit)] {
		out = append(out, cloneRun(r.run))
	}
	return out, nil
}

var _ Pruner = (*MemoryStore)(nil)

// Prune deletes old finished runs and their events (see [Pruner]). The
// memory store computes sizes on each call, in one pass under its lock.
func (m *MemoryStore) Prune(ctx context.Context, req PruneRequest) (PruneResult, error) {
	if err := ctx.Err(); err != nil {
		return PruneResult{}, err
	}
	if err := req.Validate(); err != nil {
		return PruneResult{}, fmt.Errorf("runtime: prune: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	all := make([]*memRun, 0, len(m.runs))
	sizes := make(map[*memRun]int64, len(m.runs))
	var res PruneResult
	for _, r := range m.runs {
		all = append(all, r)
		n := RunSize(r.run)
		for _, e := range r.events {
			n += EventSize(e)
		}
		sizes[r] = n
		res.Bytes += n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].pos < all[j].pos })
	gone := map[*memRun]bool{}
	for _, r := range all {
		if r.run.Status == StatusStarted {
			continue
		}
		old := !req.EndedBefore.IsZero() && r.run.EndedAt.Before(req.EndedBefore)
		over := req.MaxBytes > 0 && res.Bytes > req.MaxBytes
		if !old && !over {
			continue
		}
		gone[r] = true
		res.Runs++
		res.Events += int64(len(r.events))
		res.Bytes -= sizes[r]
	}
	if len(gone) == 0 {
		return res, nil
	}
	keep := func(rs []*memRun) []*memRun {
		return slices.DeleteFunc(rs, func(r *memRun) bool { return gone[r] })
	}
	for r := range gone {
		delete(m.runs, runKey{r.run.Tenant, r.run.ID})
	}
	for k, rs := range m.byTenant {
		if m.byTenant[k] = keep(rs); len(m.byTenant[k]) == 0 {
			delete(m.byTenant, k)
		}
	}
	for k, rs := range m.bySession {
		if m.bySession[k] = keep(rs); len(m.bySession[k]) == 0 {
			delete(m.bySession, k)
		}
	}
	for k, refs := range m.sessEvs {
		refs = slices.DeleteFunc(refs, func(e evRef) bool { return gone[e.r] })
		if m.sessEvs[k] = refs; len(refs) == 0 {
			delete(m.sessEvs, k)
		}
	}
	return res, nil
}

var _ SessionPurger = (*MemoryStore)(nil)

// PurgeSession deletes the session's runs started by req.StartedBy with
// their events (see [SessionPurger]).
func (m *MemoryStore) PurgeSession(ctx context.Context, req PurgeRequest) (PurgeResult, error) {
	if err := ctx.Err(); err != nil {
		return PurgeResult{}, err
	}
	if err := req.Validate(); err != nil {
		return PurgeResult{}, fmt.Errorf("runtime: purge session: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := runKey{req.Tenant, req.SessionID}
	var res PurgeResult
	gone := func(r *memRun) bool {
		return r.run.Status != StatusStarted && (req.StartedBy.IsZero() || !r.run.StartedAt.After(req.StartedBy)) &&
			!slices.Contains(req.Keep, r.run.ID)
	}
	runs := m.bySession[key]
	for _, r := range runs {
		if gone(r) {
			delete(m.runs, runKey{r.run.Tenant, r.run.ID})
			res.Runs++
			res.Events += int64(len(r.events))
		}
	}
	if res.Runs == 0 {
		return res, nil
	}
	if m.bySession[key] = slices.DeleteFunc(runs, gone); len(m.bySession[key]) == 0 {
		delete(m.bySession, key)
	}
	if m.sessEvs[key] = slices.DeleteFunc(m.sessEvs[key], func(e evRef) bool { return gone(e.r) }); len(m.sessEvs[key]) == 0 {
		delete(m.sessEvs, key)
	}
	if m.byTenant[req.Tenant] = slices.DeleteFunc(m.byTenant[req.Tenant], func(r *memRun) bool {
		return r.run.SessionID == req.SessionID && gone(r)
	}); len(m.byTenant[req.Tenant]) == 0 {
		delete(m.byTenant, req.Tenant)
	}
	return res, nil
}
