package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/session"
)

// Kind discriminates the record types sharing a store (pipeline-utilities
// §10.15). Kinds are wire identifiers and must not change.
type Kind string

// Record kinds.
const (
	// KindCheckpoint is a checkpoint record (pipeline-utilities §10.2).
	KindCheckpoint Kind = "checkpoint"
	// KindSuspended is a paused-invocation record (suspension §2).
	KindSuspended Kind = "suspended"
)

// Sentinel errors; stores wrap them.
var (
	// ErrNotFound: no record of that kind for the invocation.
	ErrNotFound = errors.New("checkpoint: not found")
	// ErrInvalidRequest: a malformed request.
	ErrInvalidRequest = errors.New("checkpoint: invalid request")
)

// Record is a stored checkpoint or paused-invocation record. The engine
// serializes its own payload into Data; the store keeps it opaque and
// indexes the metadata fields.
type Record struct {
	InvocationID  string
	Kind          Kind
	CorrelationID string
	// SessionID is the session the invocation is bound to, if any.
	SessionID string
	// SignalID is the awaited signal of a paused record (how a signal
	// coordinator finds the invocation to resume).
	SignalID      string
	SchemaVersion string
	// Data is the engine's JSON payload.
	Data json.RawMessage
	// CompletedNodeCount is the number of completed node positions.
	CompletedNodeCount int
	SavedAt            time.Time
}

// Summary is a listed record, without its payload.
type Summary struct {
	InvocationID       string
	Kind               Kind
	CorrelationID      string
	SessionID          string
	SignalID           string
	CompletedNodeCount int
	SavedAt            time.Time
}

// Key identifies a record.
type Key struct {
	InvocationID string
	Kind         Kind
}

// ListRequest filters and pages a listing, ordered by invocation id.
type ListRequest struct {
	Kind          Kind // required
	SignalID      string
	SessionID     string
	CorrelationID string
	PageSize      int // default 100, at most 1000
	PageToken     string
}

// Page validates the request (a known kind, a well-formed page token)
// and returns the invocation id the page continues after ("" for the
// first page) and the page size stores use. Its error wraps
// ErrInvalidRequest.
func (r ListRequest) Page() (after string, size int, err error) {
	if r.Kind != KindCheckpoint && r.Kind != KindSuspended {
		return "", 0, fmt.Errorf("%w: unknown record kind %q", ErrInvalidRequest, r.Kind)
	}
	if after, err = session.DecodePageToken(r.PageToken); err != nil {
		return "", 0, fmt.Errorf("%w: malformed page token", ErrInvalidRequest)
	}
	return after, session.ListRequest{PageSize: r.PageSize}.EffectivePageSize(), nil
}

// ListResponse is one page.
type ListResponse struct {
	Records       []Summary
	NextPageToken string
}

// Store persists checkpoint and paused-invocation records. Implementations
// are safe for concurrent use and do not alias records with their callers.
type Store interface {
	// Save writes a record, replacing the one with the same key.
	Save(ctx context.Context, r Record) error
	// Load returns a record or ErrNotFound.
	Load(ctx context.Context, k Key) (*Record, error)
	// Take atomically loads and deletes a record, so that of two workers
	// resuming one paused invocation exactly one gets it; the other gets
	// ErrNotFound.
	Take(ctx context.Context, k Key) (*Record, error)
	// Delete removes a record; a missing record is not an error.
	Delete(ctx context.Context, k Key) error
	// List returns a page of summaries.
	List(ctx context.Context, req ListRequest) (ListResponse, error)
}

// ValidateFields checks a record's metadata as every store keeps it: its
// correlation, session and signal ids and schema version valid UTF-8
// without NUL bytes (PostgreSQL refuses both in text), and a completed
// node count that is not negative. Its error wraps ErrInvalidRequest.
// Stores call it on every record they write.
func (r Record) ValidateFields() error {
	for _, f := range [...]struct{ what, v string }{{"correlation id", r.CorrelationID}, {"session id", r.SessionID},
		{"signal id", r.SignalID}, {"schema version", r.SchemaVersion}} {
		if !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: the %s must be valid UTF-8 without NUL bytes", ErrInvalidRequest, f.what)
		}
	}
	if r.CompletedNodeCount < 0 {
		return fmt.Errorf("%w: negative completed node count", ErrInvalidRequest)
	}
	return nil
}

func (k Key) validate() error {
	if err := session.ValidateID(k.InvocationID); err != nil {
		return fmt.Errorf("%w: invocation id: %v", ErrInvalidRequest, err)
	}
	if k.Kind != KindCheckpoint && k.Kind != KindSuspended {
		return fmt.Errorf("%w: unknown record kind %q", ErrInvalidRequest, k.Kind)
	}
	return nil
}

// MemoryStore is an in-memory Store. Its records vanish with the process,
// so a paused invocation can only be resumed by the same process.
type MemoryStore struct {
	now     func() time.Time
	mu      sync.Mutex
	records map[Key]Record
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store; now defaults to
// time.Now.
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{now: now, records: map[Key]Record{}}
}

func clone(r Record) *Record {
	r.Data = slices.Clone(r.Data)
	return &r
}

// Save stores a copy of r.
func (m *MemoryStore) Save(ctx context.Context, r Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k := Key{r.InvocationID, r.Kind}
	if err := k.validate(); err != nil {
		return err
	}
	if !jsonvalid.Valid(r.Data) {
		return fmt.Errorf("%w: record data is not valid JSON", ErrInvalidRequest)
	}
	if err := r.ValidateFields(); err != nil {
		return err
	}
	if r.SavedAt.IsZero() {
		r.SavedAt = m.now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[k] = *clone(r)
	return nil
}

// Load returns a copy of the record.
func (m *MemoryStore) Load(ctx context.Context, k Key) (*Record, error) {
	return m.get(ctx, k, false)
}

// Take loads and deletes the record atomically.
func (m *MemoryStore) Take(ctx context.Context, k Key) (*Record, error) {
	return m.get(ctx, k, true)
}

// get returns a copy of the record, deleting it when take is set.
func (m *MemoryStore) get(ctx context.Context, k Key, take bool) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := k.validate(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[k]
	if !ok {
		return nil, fmt.Errorf("%w: %s record for invocation %q", ErrNotFound, k.Kind, k.InvocationID)
	}
	if take {
		delete(m.records, k)
	}
	return clone(r), nil
}

// Delete removes the record.
func (m *MemoryStore) Delete(ctx context.Context, k Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := k.validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, k)
	return nil
}

// List returns a page of matching summaries in invocation-id order.
func (m *MemoryStore) List(ctx context.Context, req ListRequest) (ListResponse, error) {
	if err := ctx.Err(); err != nil {
		return ListResponse{}, err
	}
	after, size, err := req.Page()
	if err != nil {
		return ListResponse{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := slices.Collect(maps.Keys(m.records))
	sort.Slice(keys, func(i, j int) bool { return keys[i].InvocationID < keys[j].InvocationID })
	var resp ListResponse
	for _, k := range keys {
		r := m.records[k]
		if k.Kind != req.Kind || (after != "" && k.InvocationID <= after) ||
			(req.SignalID != "" && r.SignalID != req.SignalID) ||
			(req.SessionID != "" && r.SessionID != req.SessionID) ||
			(req.CorrelationID != "" && r.CorrelationID != req.CorrelationID) {
			continue
		}
		if len(resp.Records) == size {
			resp.NextPageToken = session.EncodePageToken(resp.Records[size-1].InvocationID)
			break
		}
		resp.Records = append(resp.Records, Summary{
			InvocationID: r.InvocationID, Kind: r.Kind, CorrelationID: r.CorrelationID, SessionID: r.SessionID,
			SignalID: r.SignalID, CompletedNodeCount: r.CompletedNodeCount, SavedAt: r.SavedAt,
		})
	}
	return resp, nil
}

// SessionWriter is the optional capability of a store that keeps sessions
// and paused-invocation records in one transactional domain (the embedded
// SQLite file, Postgres). It writes a session change together with the
// paused record it belongs to, so that no crash can leave one without the
// other (suspension §8.6): at suspension the record is created, at the end
// of a resumed run it is deleted. The engine uses it when the graph's
// session store is the writer's own SessionStore.
type SessionWriter interface {
	// SessionStore returns the session store whose records the writer
	// writes.
	SessionStore() session.Store
	// WriteSuspended applies the session write and saves the record in
	// one transaction.
	WriteSuspended(ctx context.Context, w SuspendWrite) (session.WriteResult, error)
	// WriteResumed applies the session write and deletes the paused
	// record in one transaction; if the record no longer exists (another
	// worker finished the resume) nothing is written and the error wraps
	// ErrNotFound.
	WriteResumed(ctx context.Context, w ResumeWrite) (session.WriteResult, error)
}

// SuspendWrite is one atomic suspension: exactly one of Save and Append,
// and the paused record.
type SuspendWrite struct {
	Save   *session.SaveRequest
	Append *session.AppendRequest
	Record Record
}

// ResumeWrite is the atomic end of a resumed run: exactly one of Save and
// Append, and the paused record to delete.
type ResumeWrite struct {
	Save   *session.SaveRequest
	Append *session.AppendRequest
	Key    Key
}
