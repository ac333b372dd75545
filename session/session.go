package session

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/keyrange"
)

// Sentinel errors. Stores wrap them; check with errors.Is.
var (
	// ErrNotFound: no record exists for the session id.
	ErrNotFound = errors.New("session: not found")
	// ErrNotModified: Load's IfVersionNot matched the stored version, so
	// the caller's copy is current.
	ErrNotModified = errors.New("session: not modified")
	// ErrWriteConflict: a conditional write found another version stored
	// (category session_write_conflict).
	ErrWriteConflict = &conflictError{}
	// ErrInvalidRequest: a malformed request (empty or oversized id,
	// invalid JSON, a bad page token).
	ErrInvalidRequest = errors.New("session: invalid request")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("session: store closed")
)

type conflictError struct{}

func (*conflictError) Error() string { return "session: write conflict" }

// Category returns session_write_conflict.
func (*conflictError) Category() errcat.Category { return errcat.SessionWriteConflict }

// Is matches the session_write_conflict category.
func (*conflictError) Is(target error) bool {
	return errcat.Matches(errcat.SessionWriteConflict, target)
}

// Record is a stored session (sessions §2, §5): the session's state as
// JSON values per field, the schema version it was written under, and the
// store's version counter, incremented by every write.
type Record struct {
	SessionID     string
	SchemaVersion string
	// State maps field names to JSON values.
	State map[string]json.RawMessage
	// Version is the store's write counter: 1 after the first save.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Skipped reports, for a load with LoadRequest.Tail, how many leading
	// items of each list field the store left out of State: the field's
	// whole list is Skipped[field] items followed by the items in State.
	// A field is absent when nothing was left out; Skipped is nil when no
	// field was cut. A record with a non-empty Skipped is partial: it
	// must never be saved whole over the stored one (see ListTail).
	Skipped map[string]int
}

// Partial reports whether the record leaves out leading items of a list
// field (Skipped is not empty).
func (r *Record) Partial() bool {
	for _, n := range r.Skipped {
		if n > 0 {
			return true
		}
	}
	return false
}

// ListTail asks a Load for only the last items of a list field: at most
// Max items, the most recent ones, plus the count of those left out
// (Record.Skipped). It is a hint: a store may return more items (up to
// the whole list), and it returns a field that is not a JSON array, or
// that is missing, as it would without the hint. A store that reads list
// items by position (SQLite, Postgres) reads a tail in time proportional
// to Max, not to the list's length.
//
// The items before the tail are only left out of the answer, never
// changed: a caller appends to a partial list with an [Appender] as it
// would to a whole one (appends are relative). A caller that needs to
// replace the field, or the whole record, first reads the record whole;
// for a list that is only ever appended to, the left-out prefix read then
// is the one it skipped.
type ListTail struct {
	// Field names a list field.
	Field string
	// Max is how many trailing items to return at least (when the list
	// has that many); it must be positive.
	Max int
}

// ValidateTail checks a load's tail hints: field names non-empty and not
// repeated, Max positive.
func ValidateTail(tails []ListTail) error {
	for i, t := range tails {
		switch {
		case t.Field == "":
			return fmt.Errorf("%w: a list tail names no field", ErrInvalidRequest)
		case t.Max < 1:
			return fmt.Errorf("%w: list tail of %q: max %d is not positive", ErrInvalidRequest, t.Field, t.Max)
		}
		for _, o := range tails[:i] {
			if o.Field == t.Field {
				return fmt.Errorf("%w: list tail of %q given twice", ErrInvalidRequest, t.Field)
			}
		}
	}
	return nil
}

// Validate checks a load request: the id and the tail hints.
func (r LoadRequest) Validate() error {
	if err := ValidateID(r.SessionID); err != nil {
		return err
	}
	return ValidateTail(r.Tail)
}

// TailMax returns the Max of field's tail hint, or 0 when the request
// asks for the whole field.
func (r LoadRequest) TailMax(field string) int {
	for _, t := range r.Tail {
		if t.Field == field {
			return t.Max
		}
	}
	return 0
}

// Summary is a record's metadata, as listed (no state).
type Summary struct {
	SessionID     string
	SchemaVersion string
	Version       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// LoadRequest asks for one record.
type LoadRequest struct {
	SessionID string
	// IfVersionNot, when > 0, makes the load conditional: if the stored
	// version equals it, Load returns ErrNotModified without reading the
	// state — how a caller holding a decoded copy checks it is current.
	IfVersionNot int64
	// IfUpdatedAt, when not zero, narrows IfVersionNot: the stored
	// record's UpdatedAt must equal it too (to the nanosecond) for
	// ErrNotModified. A session deleted and written again starts over at
	// version 1, so a version alone can name another conversation than
	// the copy's; the time of the copy's write tells them apart. Give
	// the UpdatedAt of the Record or WriteResult the copy came from.
	IfUpdatedAt time.Time
	// Tail asks for only the last items of some list fields (see
	// ListTail); the answer reports what it left out in Record.Skipped.
	// Nil loads every field whole.
	Tail []ListTail
}

// SaveRequest writes a whole record.
type SaveRequest struct {
	SessionID     string
	SchemaVersion string
	State         map[string]json.RawMessage
	// ExpectedVersion, when set, makes the save conditional (optimistic
	// concurrency, sessions §8.2): it fails with ErrWriteConflict unless
	// the stored version equals *ExpectedVersion (0: no record stored).
	ExpectedVersion *int64
	// Marks are recorded with the write, in the same transaction, by a
	// store that implements [Marker] (others ignore them). Replacing the
	// record keeps its earlier marks.
	Marks []Mark
}

// AppendRequest writes only what changed since a known version: fields
// replaced, and items appended to list fields. See [Appender].
type AppendRequest struct {
	SessionID     string
	SchemaVersion string
	// ExpectedVersion is the version the delta applies to; required. The
	// write fails with ErrWriteConflict if another version is stored.
	ExpectedVersion int64
	// Set replaces fields.
	Set map[string]json.RawMessage
	// Append appends items (JSON values) to list fields; a field must not
	// appear in both Set and Append.
	Append map[string][]json.RawMessage
	// Marks are recorded with the write, in the same transaction, by a
	// store that implements [Marker] (others ignore them).
	Marks []Mark
}

// Mark is a small keyed value recorded atomically with a session write:
// what a caller needs to recognise the write later, after a crash or on
// another worker — an idempotency key and the outcome it produced, the
// record of the run that made the write. Marks belong to their session:
// deleting the session deletes them, and a store drops them once they
// are older than its retention period. Writing a key again replaces its
// value.
type Mark struct {
	// Key names the mark within its session: non-empty, at most
	// MaxMarkKeyLength bytes of valid UTF-8.
	Key string
	// Value is a JSON value.
	Value json.RawMessage
}

// MaxMarkKeyLength bounds a mark's key (bytes).
const MaxMarkKeyLength = 512

// DefaultMarkRetention is how long a store keeps a mark unless
// configured otherwise: a day, the window in which clients retransmit.
const DefaultMarkRetention = 24 * time.Hour

// Marker is the optional capability of a store that records marks with
// its writes (SaveRequest.Marks, AppendRequest.Marks). Callers detect it
// with a type assertion.
type Marker interface {
	// LoadMark returns the value recorded under key in the session, or an
	// error wrapping ErrNotFound when there is none (never written,
	// expired, or the session was deleted).
	LoadMark(ctx context.Context, sessionID, key string) (json.RawMessage, error)
}

// MarkLister is a Marker that can list the keys of a session's marks:
// what a caller that recorded marks under a key prefix needs to find
// them all again (the chat harness's record keys, which name the runs
// that committed to a conversation, when it is deleted). Callers detect
// it with a type assertion; the memory, SQLite and PostgreSQL stores
// implement it.
type MarkLister interface {
	Marker
	// MarkKeys returns the keys of the session's live marks (neither
	// expired nor deleted with the session) that begin with prefix
	// (every key when prefix is empty), the most recently written first
	// (marks written together in byte order), at most limit of them
	// (limit must be positive): past the limit, the oldest are left out.
	// A session that does not exist has none: the answer is empty, not
	// an error.
	MarkKeys(ctx context.Context, sessionID, prefix string, limit int) ([]string, error)
}

// WrittenKey is a mark's key and when it was written (Unix
// nanoseconds), for [NewestKeys].
type WrittenKey struct {
	Key string
	At  int64
}

// NewestKeys returns the keys of found in the order
// [MarkLister.MarkKeys] answers them, the most recently written first
// (ties in byte order), at most limit; it reorders found.
func NewestKeys(found []WrittenKey, limit int) []string {
	slices.SortFunc(found, func(a, b WrittenKey) int {
		if c := cmp.Compare(b.At, a.At); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	keys := make([]string, 0, min(len(found), limit))
	for _, w := range found[:min(len(found), limit)] {
		keys = append(keys, w.Key)
	}
	return keys
}

// ValidateMarkPrefix checks the arguments of [MarkLister.MarkKeys]
// other than the session id: a prefix of at most MaxMarkKeyLength bytes
// of valid UTF-8, and a positive limit.
func ValidateMarkPrefix(prefix string, limit int) error {
	switch {
	case len(prefix) > MaxMarkKeyLength:
		return fmt.Errorf("%w: mark key prefix longer than %d bytes", ErrInvalidRequest, MaxMarkKeyLength)
	case !utf8.ValidString(prefix):
		return fmt.Errorf("%w: mark key prefix is not valid UTF-8", ErrInvalidRequest)
	case limit <= 0:
		return fmt.Errorf("%w: mark key limit must be positive", ErrInvalidRequest)
	}
	return nil
}

// MarkPrefixEnd returns the least string above every string that begins
// with prefix, for a range scan of mark keys (key >= prefix AND key <
// end, comparing bytes), and false when there is none (an empty prefix,
// or one of only U+10FFFF runes: scan to the end). prefix is valid
// UTF-8, and so is end.
func MarkPrefixEnd(prefix string) (end string, ok bool) { return keyrange.End(prefix) }

// VersionedMarker is a Marker that can answer a mark lookup without
// reading the session's version when the caller names the version it
// believes current (a warm cache's): LoadMarkAt answers as of that
// version when the store holds the session's marks at exactly it, and
// otherwise as LoadMark does. An answer as of a version that is no
// longer current may miss a mark a later write recorded, so a caller
// checks again once it has read the current version (and writes
// conditionally on it). Like a cache revalidated by version, it takes a
// version to name one incarnation of the session: a session deleted and
// written again to the same version by another handle is not told
// apart. The SQLite store implements it.
type VersionedMarker interface {
	Marker
	LoadMarkAt(ctx context.Context, sessionID, key string, version int64) (json.RawMessage, error)
}

// ValidateMarks checks marks: keys non-empty, bounded, valid UTF-8 and
// unique; values well-formed JSON.
func ValidateMarks(marks []Mark) error {
	for i, m := range marks {
		if err := ValidateMarkKey(m.Key); err != nil {
			return err
		}
		if !jsonvalid.Valid(m.Value) {
			return fmt.Errorf("%w: mark %q is not valid JSON", ErrInvalidRequest, m.Key)
		}
		for _, o := range marks[:i] {
			if o.Key == m.Key {
				return fmt.Errorf("%w: mark %q given twice", ErrInvalidRequest, m.Key)
			}
		}
	}
	return nil
}

// ValidateMarkKey checks a mark key: non-empty, at most MaxMarkKeyLength
// bytes, valid UTF-8 without NUL bytes (which PostgreSQL's text
// refuses: every store refuses them alike).
func ValidateMarkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty mark key", ErrInvalidRequest)
	case len(key) > MaxMarkKeyLength:
		return fmt.Errorf("%w: mark key longer than %d bytes", ErrInvalidRequest, MaxMarkKeyLength)
	case !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: mark key must be valid UTF-8 without NUL bytes", ErrInvalidRequest)
	}
	return nil
}

// WriteResult reports a successful write.
type WriteResult struct {
	Version   int64
	UpdatedAt time.Time
}

// ListRequest filters and pages the listing. Sessions are listed by id in
// ascending byte order.
type ListRequest struct {
	// IDPrefix keeps ids starting with it (how a server scopes a tenant).
	IDPrefix string
	// UpdatedAfter and CreatedAfter keep newer records (zero: no filter).
	UpdatedAfter time.Time
	CreatedAfter time.Time
	// SchemaVersion keeps records of that version ("": any).
	SchemaVersion string
	// PageSize bounds the page: default 100, at most 1000.
	PageSize int
	// PageToken continues a previous listing (its NextPageToken).
	PageToken string
}

// ListResponse is one page.
type ListResponse struct {
	Sessions []Summary
	// NextPageToken continues the listing; "" on the last page.
	NextPageToken string
}

// Store is the SessionStore protocol (sessions §5). Implementations are
// safe for concurrent use, honour context cancellation, and never alias
// returned records with stored data.
type Store interface {
	// Load returns the record, ErrNotFound when there is none, or
	// ErrNotModified for a conditional load of the current version.
	Load(ctx context.Context, req LoadRequest) (*Record, error)
	// Save writes a whole record, replacing any stored one.
	Save(ctx context.Context, req SaveRequest) (WriteResult, error)
	// Delete removes a record, and with it the marks recorded with its
	// writes; deleting a missing record succeeds.
	Delete(ctx context.Context, sessionID string) error
	// List returns a page of summaries.
	List(ctx context.Context, req ListRequest) (ListResponse, error)
}

// Appender is the optional delta-write capability: a store that
// implements it can persist a turn by appending the new list items and
// bumping the version, at a cost independent of the session's history.
// Callers detect it with a type assertion.
type Appender interface {
	Append(ctx context.Context, req AppendRequest) (WriteResult, error)
}

// MaxIDLength bounds session ids (bytes).
const MaxIDLength = 512

// ValidateID checks a session id: non-empty, valid UTF-8, at most
// MaxIDLength bytes, no control characters.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty session id", ErrInvalidRequest)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: session id longer than %d bytes", ErrInvalidRequest, MaxIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: session id is not valid UTF-8", ErrInvalidRequest)
	case strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: session id contains control characters", ErrInvalidRequest)
	}
	return nil
}

// ValidateState checks that every field name is text every store keeps
// (see ValidateText) and every field value well-formed JSON.
func ValidateState(state map[string]json.RawMessage) error {
	for k, v := range state {
		if err := ValidateText("field name", k); err != nil {
			return err
		}
		if !jsonvalid.Valid(v) {
			return fmt.Errorf("%w: field %q is not valid JSON", ErrInvalidRequest, k)
		}
	}
	return nil
}

// ValidateText checks a name or label a store keeps as text (a field
// name, a schema version): valid UTF-8 without NUL bytes, which
// PostgreSQL refuses in text; every store refuses them alike, as
// ErrInvalidRequest.
func ValidateText(what, s string) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s must be valid UTF-8 without NUL bytes", ErrInvalidRequest, what)
	}
	return nil
}

// Validate checks a save request: the id, the fields' JSON and the marks.
func (r SaveRequest) Validate() error {
	if err := ValidateID(r.SessionID); err != nil {
		return err
	}
	if err := ValidateText("schema version", r.SchemaVersion); err != nil {
		return err
	}
	if err := ValidateState(r.State); err != nil {
		return err
	}
	return ValidateMarks(r.Marks)
}

// Validate checks an append request.
func (r AppendRequest) Validate() error {
	if err := ValidateID(r.SessionID); err != nil {
		return err
	}
	if r.ExpectedVersion < 1 {
		return fmt.Errorf("%w: append needs the expected version of an existing record", ErrInvalidRequest)
	}
	if err := ValidateText("schema version", r.SchemaVersion); err != nil {
		return err
	}
	if err := ValidateState(r.Set); err != nil {
		return err
	}
	if err := ValidateMarks(r.Marks); err != nil {
		return err
	}
	for k, items := range r.Append {
		if err := ValidateText("field name", k); err != nil {
			return err
		}
		if _, dup := r.Set[k]; dup {
			return fmt.Errorf("%w: field %q is both set and appended", ErrInvalidRequest, k)
		}
		for _, it := range items {
			if !jsonvalid.Valid(it) {
				return fmt.Errorf("%w: an item appended to %q is not valid JSON", ErrInvalidRequest, k)
			}
		}
	}
	return nil
}

// EffectivePageSize returns the page size a store uses for the request.
func (r ListRequest) EffectivePageSize() int {
	switch {
	case r.PageSize <= 0:
		return 100
	case r.PageSize > 1000:
		return 1000
	}
	return r.PageSize
}

// EncodePageToken returns the opaque token that continues a listing after
// the given session id. Stores share it so tokens stay backend-neutral.
func EncodePageToken(afterID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(afterID))
}

// DecodePageToken returns the session id a token continues after.
func DecodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !utf8.Valid(b) {
		return "", fmt.Errorf("%w: malformed page token", ErrInvalidRequest)
	}
	return string(b), nil
}
