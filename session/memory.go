package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/internal/listpage"
)

// MemoryConfig configures a MemoryStore.
type MemoryConfig struct {
	// Now is the clock for record timestamps; default time.Now.
	Now func() time.Time
	// MarkRetention is how long a mark is kept; 0 means
	// DefaultMarkRetention.
	MarkRetention time.Duration
}

// MemoryStore is an in-memory Store and Appender. It is safe for
// concurrent use; records are copied on the way in and out. Its contents
// vanish with the process: use it for tests, examples and development.
type MemoryStore struct {
	// Locks serializes a session's turns across every chat harness over
	// the store (chat.Locker).
	Locks

	now       func() time.Time
	retention time.Duration

	mu       sync.RWMutex
	sessions map[string]*memRecord
	// A session's marks live on its record (memRecord.marks), so that
	// they vanish with it when it is deleted, and reading or listing
	// them costs what the session has, not what the store holds.
	gen uint64 // the last record generation given
	// markQ holds the marks in write order, for the sweep: markQ[markHead:]
	// are the ones not swept yet (an entry whose mark was replaced or
	// deleted since is skipped).
	markQ    []markRef
	markHead int
}

type memMark struct {
	value json.RawMessage
	at    time.Time
}

// memRecord keeps list fields appended by Append as item slices, so an
// append costs O(len(items)).
type memRecord struct {
	schemaVersion string
	state         map[string]json.RawMessage
	lists         map[string][]json.RawMessage
	version       int64
	created       time.Time
	updated       time.Time
	gen           uint64 // unique to this record, kept by its writes: the sweep's entries name it
	// marks are the record's marks; a Save that replaces the record
	// keeps them.
	marks recMarks
}

// recMarks are a record's marks: a short list while they are few (a
// session's first write makes one small allocation, not a map), by key
// once they are more (reading one costs the same however many the
// session has).
type recMarks struct {
	few  []keyedMark
	many map[string]memMark
}

type keyedMark struct {
	key string
	memMark
}

// fewMarks is how many marks a record keeps in its list.
const fewMarks = 8

func (r *recMarks) get(key string) (memMark, bool) {
	if r.many != nil {
		mk, ok := r.many[key]
		return mk, ok
	}
	for i := range r.few {
		if r.few[i].key == key {
			return r.few[i].memMark, true
		}
	}
	return memMark{}, false
}

func (r *recMarks) set(key string, mk memMark) {
	if r.many != nil {
		r.many[key] = mk
		return
	}
	for i := range r.few {
		if r.few[i].key == key {
			r.few[i].memMark = mk
			return
		}
	}
	if len(r.few) < fewMarks {
		r.few = append(r.few, keyedMark{key, mk})
		return
	}
	r.many = make(map[string]memMark, 2*fewMarks)
	for _, k := range r.few {
		r.many[k.key] = k.memMark
	}
	r.few = nil
	r.many[key] = mk
}

func (r *recMarks) remove(key string) {
	if r.many != nil {
		delete(r.many, key)
		return
	}
	r.few = slices.DeleteFunc(r.few, func(k keyedMark) bool { return k.key == key })
}

func (r *recMarks) all(yield func(string, memMark) bool) {
	if r.many != nil {
		for k, mk := range r.many {
			if !yield(k, mk) {
				return
			}
		}
		return
	}
	for _, k := range r.few {
		if !yield(k.key, k.memMark) {
			return
		}
	}
}

func (r *recMarks) len() int { return len(r.few) + len(r.many) }

var (
	_ Store      = (*MemoryStore)(nil)
	_ Appender   = (*MemoryStore)(nil)
	_ Marker     = (*MemoryStore)(nil)
	_ MarkLister = (*MemoryStore)(nil)
	_ Pager      = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MarkRetention <= 0 {
		cfg.MarkRetention = DefaultMarkRetention
	}
	return &MemoryStore{now: cfg.Now, retention: cfg.MarkRetention, sessions: map[string]*memRecord{}}
}

// LoadMark returns the value of a mark recorded with a write.
func (m *MemoryStore) LoadMark(ctx context.Context, sessionID, key string) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateID(sessionID); err != nil {
		return nil, err
	}
	if err := ValidateMarkKey(key); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var (
		mk memMark
		ok bool
	)
	if r := m.sessions[sessionID]; r != nil {
		mk, ok = r.marks.get(key)
	}
	if !ok || m.now().Sub(mk.at) > m.retention {
		return nil, &notFound{session: sessionID, mark: key, isMark: true}
	}
	return slices.Clone(mk.value), nil
}

// MarkKeys returns the keys of the session's live marks beginning with
// prefix, the most recently written first, at most limit
// (session.MarkLister). It scans
// every mark the store holds: the memory store is for tests and
// development.
func (m *MemoryStore) MarkKeys(ctx context.Context, sessionID, prefix string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateID(sessionID); err != nil {
		return nil, err
	}
	if err := ValidateMarkPrefix(prefix, limit); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	r := m.sessions[sessionID]
	if r == nil {
		return nil, nil
	}
	now := m.now()
	var found []WrittenKey
	for k, mk := range r.marks.all {
		if strings.HasPrefix(k, prefix) && now.Sub(mk.at) <= m.retention {
			found = append(found, WrittenKey{Key: k, At: mk.at.UnixNano()})
		}
	}
	return NewestKeys(found, limit), nil
}

// markRef names a written mark in the sweep's queue: the key of the
// record of generation gen of the session.
type markRef struct {
	session, key string
	at           time.Time
	gen          uint64
}

// putMarksLocked records marks for the session, then sweeps the marks
// written earlier that expired, oldest first: the sweep's cost is that
// of the marks it deletes, so memory stays bounded by the retention
// period at a constant cost per write, however many sessions the store
// holds. (With a clock that goes back, a mark waits behind the older
// ones written before it.)
func (m *MemoryStore) putMarksLocked(r *memRecord, sessionID string, marks []Mark, now time.Time) {
	if len(marks) == 0 {
		return
	}
	for _, mk := range marks {
		r.marks.set(mk.Key, memMark{value: slices.Clone(mk.Value), at: now})
		m.markQ = append(m.markQ, markRef{session: sessionID, key: mk.Key, at: now, gen: r.gen})
	}
	for m.markHead < len(m.markQ) && now.Sub(m.markQ[m.markHead].at) > m.retention {
		ref := m.markQ[m.markHead]
		m.markQ[m.markHead] = markRef{}
		m.markHead++
		// A mark rewritten since, or whose session was deleted (or
		// deleted and created again: another generation), is not this
		// entry's.
		if rec := m.sessions[ref.session]; rec != nil && rec.gen == ref.gen {
			if mk, ok := rec.marks.get(ref.key); ok && mk.at.Equal(ref.at) {
				rec.marks.remove(ref.key)
			}
		}
	}
	if m.markHead > 1024 && m.markHead > len(m.markQ)/2 {
		m.markQ = append(m.markQ[:0], m.markQ[m.markHead:]...)
		m.markHead = 0
	}
}

// genOr returns the generation of r, or a new one from m when r is nil
// (a record being created); m.mu is held.
func (r *memRecord) genOr(m *MemoryStore) uint64 {
	if r != nil {
		return r.gen
	}
	m.gen++
	return m.gen
}

// Load returns a copy of the record. A tail hint cuts a list written by
// Append to its last Max items; a list stored whole by Save (never
// appended to since) is returned whole.
func (m *MemoryStore) Load(ctx context.Context, req LoadRequest) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.sessions[req.SessionID]
	if !ok {
		return nil, &notFound{session: req.SessionID}
	}
	if req.IfVersionNot > 0 && req.IfVersionNot == r.version && (req.IfUpdatedAt.IsZero() || req.IfUpdatedAt.Equal(r.updated)) {
		return nil, ErrNotModified
	}
	state := make(map[string]json.RawMessage, len(r.state)+len(r.lists))
	for k, v := range r.state {
		state[k] = slices.Clone(v)
	}
	var skipped map[string]int
	for k, items := range r.lists {
		if max := req.TailMax(k); max > 0 && len(items) > max {
			if skipped == nil {
				skipped = map[string]int{}
			}
			skipped[k] = len(items) - max
			items = items[len(items)-max:]
		}
		state[k] = jsonstr.Array(items)
	}
	return &Record{
		SessionID: req.SessionID, SchemaVersion: r.schemaVersion, State: state,
		Version: r.version, CreatedAt: r.created, UpdatedAt: r.updated, Skipped: skipped,
	}, nil
}

// LoadPage returns a window of a list field (see Pager), copied.
func (m *MemoryStore) LoadPage(ctx context.Context, req PageRequest) (*Page, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.sessions[req.SessionID]
	if !ok {
		return nil, &notFound{session: req.SessionID}
	}
	p := &Page{SessionID: req.SessionID, SchemaVersion: r.schemaVersion, Version: r.version, CreatedAt: r.created, UpdatedAt: r.updated}
	var items []json.RawMessage
	if list, ok := r.lists[req.Field]; ok {
		var hi int
		p.Length = len(list)
		p.Offset, hi = listpage.Window(len(list), req.Before, req.Max)
		items = list[p.Offset:hi]
	} else {
		items, p.Offset, p.Length = listpage.Cut(r.state[req.Field], req.Before, req.Max)
	}
	p.Items = make([]json.RawMessage, len(items))
	for i, it := range items {
		p.Items[i] = slices.Clone(it)
	}
	return p, nil
}

// Save replaces the record.
func (m *MemoryStore) Save(ctx context.Context, req SaveRequest) (WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return WriteResult{}, err
	}
	if err := req.Validate(); err != nil {
		return WriteResult{}, err
	}
	state := make(map[string]json.RawMessage, len(req.State))
	for k, v := range req.State {
		state[k] = slices.Clone(v)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.sessions[req.SessionID]
	var version int64
	if exists {
		version = cur.version
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != version {
		return WriteResult{}, fmt.Errorf("%w: session %q is at version %d, not %d", ErrWriteConflict, req.SessionID, version, *req.ExpectedVersion)
	}
	now := m.now()
	created, gen := now, cur.genOr(m)
	if exists {
		created = cur.created
	}
	r := &memRecord{
		schemaVersion: req.SchemaVersion, state: state, version: version + 1, created: created, updated: now, gen: gen,
	}
	if exists {
		r.marks = cur.marks
	}
	m.sessions[req.SessionID] = r
	m.putMarksLocked(r, req.SessionID, req.Marks, now)
	return WriteResult{Version: version + 1, UpdatedAt: now}, nil
}

// Append applies a delta to an existing record.
func (m *MemoryStore) Append(ctx context.Context, req AppendRequest) (WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return WriteResult{}, err
	}
	if err := req.Validate(); err != nil {
		return WriteResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.sessions[req.SessionID]
	if !ok {
		return WriteResult{}, fmt.Errorf("%w: session %q does not exist (expected version %d)", ErrWriteConflict, req.SessionID, req.ExpectedVersion)
	}
	if r.version != req.ExpectedVersion {
		return WriteResult{}, fmt.Errorf("%w: session %q is at version %d, not %d", ErrWriteConflict, req.SessionID, r.version, req.ExpectedVersion)
	}
	// Validate the appended-to fields before changing anything.
	for k := range req.Append {
		if _, isList := r.lists[k]; isList {
			continue
		}
		if v, ok := r.state[k]; ok {
			if _, err := splitArray(v); err != nil {
				return WriteResult{}, fmt.Errorf("%w: field %q is not a list", ErrInvalidRequest, k)
			}
		}
	}
	if r.lists == nil {
		r.lists = map[string][]json.RawMessage{}
	}
	for k, v := range req.Set {
		delete(r.lists, k)
		r.state[k] = slices.Clone(v)
	}
	for k, items := range req.Append {
		list, isList := r.lists[k]
		if !isList {
			if v, ok := r.state[k]; ok {
				list, _ = splitArray(v)
				delete(r.state, k)
			}
		}
		for _, it := range items {
			list = append(list, slices.Clone(it))
		}
		r.lists[k] = list
	}
	if req.SchemaVersion != "" {
		r.schemaVersion = req.SchemaVersion
	}
	r.version++
	r.updated = m.now()
	m.putMarksLocked(r, req.SessionID, req.Marks, r.updated)
	return WriteResult{Version: r.version, UpdatedAt: r.updated}, nil
}

// Delete removes the record and its marks.
func (m *MemoryStore) Delete(ctx context.Context, sessionID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateID(sessionID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, sessionID) // and so its marks
	return nil
}

// List returns a page of summaries in id order.
func (m *MemoryStore) List(ctx context.Context, req ListRequest) (ListResponse, error) {
	if err := ctx.Err(); err != nil {
		return ListResponse{}, err
	}
	after, err := DecodePageToken(req.PageToken)
	if err != nil {
		return ListResponse{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := slices.Collect(maps.Keys(m.sessions))
	sort.Strings(ids)
	size := req.EffectivePageSize()
	var resp ListResponse
	for _, id := range ids {
		if (after != "" && id <= after) || !strings.HasPrefix(id, req.IDPrefix) {
			continue
		}
		r := m.sessions[id]
		if (!req.UpdatedAfter.IsZero() && !r.updated.After(req.UpdatedAfter)) ||
			(!req.CreatedAfter.IsZero() && !r.created.After(req.CreatedAfter)) ||
			(req.SchemaVersion != "" && r.schemaVersion != req.SchemaVersion) {
			continue
		}
		if len(resp.Sessions) == size {
			resp.NextPageToken = EncodePageToken(resp.Sessions[size-1].SessionID)
			break
		}
		resp.Sessions = append(resp.Sessions, Summary{
			SessionID: id, SchemaVersion: r.schemaVersion, Version: r.version, CreatedAt: r.created, UpdatedAt: r.updated,
		})
	}
	return resp, nil
}

// splitArray decodes a JSON array into its items.
func splitArray(v json.RawMessage) ([]json.RawMessage, error) {
	if len(bytes.TrimSpace(v)) == 0 || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, err
	}
	return items, nil
}

// notFound is the MemoryStore's ErrNotFound: a new session's first load
// and a first transmission's mark lookup are the common answers, so it
// is one allocation, formatted only when printed.
type notFound struct {
	session, mark string
	isMark        bool
}

func (e *notFound) Error() string {
	if e.isMark {
		return fmt.Sprintf("%v: mark %q of session %q", ErrNotFound, e.mark, e.session)
	}
	return fmt.Sprintf("%v: %q", ErrNotFound, e.session)
}

// Unwrap makes the error match ErrNotFound.
func (e *notFound) Unwrap() error { return ErrNotFound }
