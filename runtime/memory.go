package runtime

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
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

// evRef is an event of a session's, stored on its run r. A run's events
// are stored once, on the run.
type evRef struct {
	r *memRun
	e *Event
}

func (e evRef) event() *Event { return e.e }

type runKey struct{ tenant, id string }

type memRun struct {
	run Run
	pos int64
	// segs are the run's events, in ID order, one segment per write: a
	// segment is never appended to or changed once stored, so an evRef's
	// pointer stays valid, and a Recorder's buffer is stored as it is
	// (see adoptTurns). segBuf holds the first two (a queued turn's
	// start, then the rest of its events).
	segs   [][]Event
	n      int // the events in segs
	segBuf [2][]Event
}

// add stores seg, which nothing else will change, as the run's next
// events.
func (r *memRun) add(seg []Event) {
	if r.segs == nil {
		r.segs = r.segBuf[:0]
	}
	r.segs = append(r.segs, seg)
	r.n += len(seg)
}

// events returns the run's events in one slice: the store's own when
// they are one segment (the caller copies what it returns), else a new
// one.
func (r *memRun) events() []Event {
	if len(r.segs) == 1 {
		return r.segs[0]
	}
	out := make([]Event, 0, r.n)
	for _, seg := range r.segs {
		out = append(out, seg...)
	}
	return out
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

// writable returns the run if it takes a write ending with f (nil: none;
// see [Writable]), or ErrNotFound / ErrConflict.
func (m *MemoryStore) writable(op, tenant, id string, f *FinishRequest) (*memRun, error) {
	r, ok := m.runs[runKey{tenant, id}]
	if !ok {
		return nil, fmt.Errorf("runtime: %s %q: %w", op, id, ErrNotFound)
	}
	if !Writable(r.run.Status, errorCategory(r.run.Error), f) {
		return nil, fmt.Errorf("runtime: %s %q: %w: the run is %s", op, id, ErrConflict, r.run.Status)
	}
	return r, nil
}

// errorCategory is e's category, "" for nil.
func errorCategory(e *RunError) string {
	if e == nil {
		return ""
	}
	return e.Category
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
	r, err := m.writable("append to run", req.Tenant, req.RunID, req.Finish)
	if err != nil {
		return nil, err
	}
	m.append(nil, r, req, false)
	if len(req.Events) == 0 {
		return []Event{}, nil
	}
	return cloneEvents(r.segs[len(r.segs)-1]), nil
}

// append stores a validated request's events on the started run r as a
// new segment, their data copied to the end of data (a new buffer when
// it has no room), and finishes it with req.Finish; m.mu is held. With
// adopt, the segment is req.Events itself, its stored fields set in
// place (the caller gives it up); otherwise a copy. It returns data with
// the events' data appended.
func (m *MemoryStore) append(data []byte, r *memRun, req AppendRequest, adopt bool) []byte {
	now := m.now()
	if len(req.Events) > 0 {
		need := 0
		for _, e := range req.Events {
			need += len(e.Data)
		}
		if cap(data)-len(data) < need {
			data = make([]byte, 0, need)
		}
		seg := req.Events
		if !adopt {
			seg = slices.Clone(seg)
		}
		seg = seg[:len(seg):len(seg)]
		sk := runKey{r.run.Tenant, r.run.SessionID}
		refs := slices.Grow(m.sessEvs[sk], len(seg))
		for i := range seg {
			e := &seg[i]
			m.nextID++
			e.ID = m.nextID
			e.Seq = int64(r.n + i + 1)
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
			refs = append(refs, evRef{r, e})
		}
		m.sessEvs[sk] = refs
		r.add(seg)
	}
	if f := req.Finish; f != nil {
		m.finish(r, *f, now)
	}
	return data
}

// WriteTurns applies the records atomically under one lock (the
// [BatchWriter] capability): it checks every record against the runs as
// the earlier records leave them, and changes nothing if one fails.
func (m *MemoryStore) WriteTurns(ctx context.Context, turns []TurnRecord) ([]Event, error) {
	var out []Event
	err := m.writeTurns(ctx, turns, false, func(seg []Event) { out = append(out, seg...) })
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Event{}
	}
	copyData(out)
	return out, nil
}

// adoptTurns is WriteTurns of records whose event slices the caller
// gives up (a Recorder's buffers): each is stored as it is, its stored
// fields (ID, Seq, RunID, ...) set in place, rather than copied, so the
// caller reads the stored events from the records. Their data is
// copied, as always. The Recorder writes with it when its store is a
// *MemoryStore (not a type that embeds one).
func (m *MemoryStore) adoptTurns(ctx context.Context, turns []TurnRecord) error {
	return m.writeTurns(ctx, turns, true, nil)
}

// writeTurns is WriteTurns, passing each record's stored events to
// stored (when not nil) in order; with adopt, the records' event slices
// are stored as they are (see adoptTurns).
func (m *MemoryStore) writeTurns(ctx context.Context, turns []TurnRecord, adopt bool, stored func([]Event)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, t := range turns {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("runtime: write turns: record %d: %w", i, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The runs as the records checked so far leave them: a batch holds
	// few runs, a list is cheaper than a map.
	type runStatus struct {
		k   runKey
		st  Status
		cat string // the error category of a failed run
	}
	var small [16]runStatus
	status := small[:0]
	for i, t := range turns {
		k := runKey{t.Append.Tenant, t.Append.RunID}
		j := slices.IndexFunc(status, func(s runStatus) bool { return s.k == k })
		var (
			st  Status
			cat string
			ok  = j >= 0
		)
		if ok {
			st, cat = status[j].st, status[j].cat
		} else {
			if r := m.runs[k]; r != nil {
				st, cat, ok = r.run.Status, errorCategory(r.run.Error), true
			}
		}
		if t.Start != nil {
			if ok {
				return fmt.Errorf("runtime: write turns: record %d: start run %q: %w: the run exists", i, k.id, ErrConflict)
			}
			st, cat, ok = StatusStarted, "", true
		}
		if t.Appends() {
			switch {
			case !ok:
				return fmt.Errorf("runtime: write turns: record %d: append to run %q: %w", i, k.id, ErrNotFound)
			case !Writable(st, cat, t.Append.Finish):
				return fmt.Errorf("runtime: write turns: record %d: append to run %q: %w: the run is %s", i, k.id, ErrConflict, st)
			case t.Append.Finish != nil:
				st, cat = t.Append.Finish.Status, errorCategory(t.Append.Finish.Error)
			}
		}
		if j < 0 {
			status = append(status, runStatus{k, st, cat})
		} else {
			status[j].st, status[j].cat = st, cat
		}
	}
	size := 0
	for _, t := range turns {
		for _, e := range t.Append.Events {
			size += len(e.Data)
		}
	}
	data := make([]byte, 0, size)
	for _, t := range turns {
		if t.Start != nil {
			m.start(*t.Start)
		}
		if t.Appends() {
			r := m.runs[runKey{t.Append.Tenant, t.Append.RunID}]
			data = m.append(data, r, t.Append, adopt)
			if stored != nil && len(t.Append.Events) > 0 {
				stored(r.segs[len(r.segs)-1])
			}
		}
	}
	return nil
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
	r, err := m.writable("finish run", req.Tenant, req.RunID, &req)
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
		evs = r.events()
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

// ListRuns returns a page of runs, newest first. The ParentID and
// MessageIDPrefix filters scan the tenant's (or session's) runs.
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
		if req.ParentID != "" && runs[i].run.ParentID != req.ParentID ||
			req.MessageIDPrefix != "" && !strings.HasPrefix(runs[i].run.MessageID, req.MessageIDPrefix) {
			continue
		}
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
		for _, seg := range r.segs {
			for _, e := range seg {
				n += EventSize(e)
			}
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
		res.Events += int64(r.n)
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
		finished := r.run.Status != StatusStarted && (req.StartedBy.IsZero() || !r.run.StartedAt.After(req.StartedBy))
		return (finished || slices.Contains(req.Committed, r.run.ID)) &&
			!slices.Contains(req.Keep, r.run.ID) && (len(req.Only) == 0 || slices.Contains(req.Only, r.run.ID))
	}
	runs := m.bySession[key]
	for _, r := range runs {
		if gone(r) {
			delete(m.runs, runKey{r.run.Tenant, r.run.ID})
			res.Runs++
			res.Events += int64(r.n)
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
