package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/keyrange"
)

// Store persists run records and their events. Implementations are safe
// for concurrent use, honor ctx cancellation, never alias the values
// they are given or return, and scope every operation to its tenant: a
// run of another tenant is [ErrNotFound] and never listed. The empty
// tenant is a tenant like any other (the single-tenant default).
//
// Every backend passes the conformance suite in package runtimetest.
type Store interface {
	// StartRun records a new run in status started. A zero Status means
	// started (any other fails with ErrInvalidRequest); a zero StartedAt
	// is set to the store's clock. A run with the same tenant and id
	// fails with ErrConflict, whatever its status: a finished run cannot
	// be restarted.
	StartRun(ctx context.Context, run Run) error
	// Append stores events at the end of a started run and returns them
	// as stored: ID and Seq assigned, identity fields (RunID, Tenant,
	// SessionID, AgentID, ParentRequestID) copied from the run, a zero
	// Time set to the store's clock. With req.Finish set, the run is
	// also finished, after the events, in the same transaction. A batch
	// is atomic: all of it is stored, or none. A finished run is
	// ErrConflict, except one that reconciliation failed as interrupted,
	// which takes its owner's writes ([Writable]).
	Append(ctx context.Context, req AppendRequest) ([]Event, error)
	// Finish moves a started run to a final status (ErrConflict if it
	// already finished, except as [Writable] allows).
	Finish(ctx context.Context, req FinishRequest) error
	// Run returns the run, or ErrNotFound.
	Run(ctx context.Context, tenant, id string) (*Run, error)
	// Events returns the events of one run or one session with an ID
	// greater than req.AfterID, in ID order (for one run, also Seq
	// order), at most req.Limit of them.
	Events(ctx context.Context, req EventsRequest) ([]Event, error)
	// ListRuns returns a tenant's runs, optionally of one session,
	// newest first (in the order they were started, not by StartedAt),
	// a page at a time.
	ListRuns(ctx context.Context, req ListRunsRequest) (ListRunsResponse, error)
}

// Recoverable is the optional capability of a Store that can list runs
// left in status started, across tenants (for [Recorder.Recover]).
// Detect it with a type assertion.
type Recoverable interface {
	// UnfinishedRuns returns up to req.Limit runs in status started whose
	// StartedAt is before req.StartedBefore, oldest first.
	UnfinishedRuns(ctx context.Context, req UnfinishedRequest) ([]Run, error)
}

// Volatile is the optional capability of a Store whose records do not
// outlive the process (as [MemoryStore]'s): waiting for its writes to be
// durable protects nothing. [Recorder.Durable] reports it.
type Volatile interface {
	// Volatile reports whether the store's records vanish with the
	// process.
	Volatile() bool
}

// BatchWriter is the optional capability of a Store that writes the
// records of many turns in one transaction: the Recorder's group commit
// (see [Recorder]). Detect it with a type assertion; the Recorder falls
// back to StartRun and Append per record for stores without it.
type BatchWriter interface {
	// WriteTurns applies the records in order, in one transaction: each
	// record's Start as StartRun, then its Append as Append (when it has
	// events or a finish). It returns the stored events of all records,
	// in order, as Append would. It is atomic: on any error (an invalid
	// record, a run that exists or is not started, ...) nothing is
	// stored. Event IDs increase in record order.
	WriteTurns(ctx context.Context, turns []TurnRecord) ([]Event, error)
}

// TurnRecord is what a turn hands to a [BatchWriter]: its run's start,
// its events, its finish, or several of them.
type TurnRecord struct {
	// Start, when set, starts the run (Append.Tenant and Append.RunID
	// must be its Tenant and ID) before the events are appended.
	Start *Run
	// Append stores events and, with Finish, finishes the run. Empty
	// (no events, no finish) is allowed only with Start.
	Append AppendRequest

	// encoded is set on the records a Recorder builds, whose JSON (the
	// events' data, the finish's output) it encoded or checked itself:
	// Validate does not scan it again.
	encoded bool
}

// Validate checks the record; stores call it.
func (t TurnRecord) Validate() error {
	if t.Start != nil {
		if err := ValidateRun(*t.Start); err != nil {
			return err
		}
		if t.Start.Tenant != t.Append.Tenant || t.Start.ID != t.Append.RunID {
			return fmt.Errorf("%w: the record's start names another run", ErrInvalidRequest)
		}
		if !t.Appends() {
			return nil
		}
	}
	return t.Append.validate(!t.encoded)
}

// Appends reports whether the record stores events or a finish (the
// Append part of a record with only a Start is skipped).
func (t TurnRecord) Appends() bool { return len(t.Append.Events) > 0 || t.Append.Finish != nil }

// AppendRequest is the argument of [Store.Append].
type AppendRequest struct {
	Tenant string
	RunID  string
	// Events are stored in order. ID, Seq and the identity fields are
	// ignored. Empty is allowed only with Finish.
	Events []Event
	// Finish, when set, finishes the run after the events in the same
	// transaction. Its Tenant and RunID may be left empty; set, they
	// must equal the request's.
	Finish *FinishRequest
}

// FinishRequest is the argument of [Store.Finish].
type FinishRequest struct {
	Tenant string
	RunID  string
	// Status is final (not StatusStarted).
	Status Status
	// Output is the completed run's output (JSON), or a suspended one's
	// (what its turn did before it suspended, such as usage), or empty.
	Output json.RawMessage
	// Error describes a failed run.
	Error *RunError
	// InvocationID is the suspended invocation's id (StatusSuspended).
	InvocationID string
	// EndedAt defaults to the store's clock.
	EndedAt time.Time
}

// EventsRequest is the argument of [Store.Events]. Exactly one of RunID
// and SessionID is set.
type EventsRequest struct {
	Tenant    string
	RunID     string
	SessionID string
	// AfterID is exclusive: 0 reads from the start. A client replaying
	// after an SSE disconnect passes its Last-Event-ID.
	AfterID int64
	// Limit caps the result: 0 means DefaultEventsLimit; above
	// MaxEventsLimit it is MaxEventsLimit.
	Limit int
}

// ListRunsRequest is the argument of [Store.ListRuns].
type ListRunsRequest struct {
	Tenant string
	// SessionID, when set, lists only that session's runs.
	SessionID string
	// ParentID, when set, lists only the runs whose ParentID it is: the
	// runs that resumed a suspended run, or ended its suspension, however
	// many runs of the session came between. The built-in stores find
	// them through an index; a store that ignores it returns its other
	// runs too, so callers check each run's ParentID.
	ParentID string
	// MessageIDPrefix, when set, lists only the runs whose MessageID
	// begins with it (an id equal to it does), such as the runs of the
	// implicit keys of one OpenAI SDK request ("retry-<tag>-"). Like
	// every id it is at most MaxIDLength bytes of UTF-8 without control
	// characters. The built-in stores find the runs through an index
	// over (tenant, message id), as the key range from the prefix to
	// its [PrefixEnd]; a store that ignores it returns its other runs
	// too, so callers check each run's MessageID.
	MessageIDPrefix string
	// PageSize: 0 means DefaultPageSize; above MaxPageSize it is
	// MaxPageSize.
	PageSize int
	// PageToken is a previous response's NextPageToken, or empty for
	// the first page. Tokens are opaque; a malformed one fails with
	// ErrInvalidRequest.
	PageToken string
}

// ListRunsResponse is the result of [Store.ListRuns].
type ListRunsResponse struct {
	Runs []Run
	// NextPageToken is empty on the last page.
	NextPageToken string
}

// UnfinishedRequest is the argument of [Recoverable.UnfinishedRuns].
type UnfinishedRequest struct {
	StartedBefore time.Time
	// Abandoned lists only the runs of other processes that are gone:
	// what a process that is serving may reconcile (see
	// Recorder.ReconcileAbandoned). A store shared by processes
	// (store/postgres) leaves out the runs this store started and those
	// of processes still alive; a store that one process owns has no
	// such runs and returns none.
	Abandoned bool
	// Limit: 0 means DefaultPageSize.
	Limit int
}

// EffectiveLimit returns the number of runs a store returns at most: the
// Limit, DefaultPageSize for 0, capped at MaxPageSize. A negative Limit
// is ErrInvalidRequest.
func (r UnfinishedRequest) EffectiveLimit() (int, error) {
	switch {
	case r.Limit < 0:
		return 0, fmt.Errorf("%w: negative limit", ErrInvalidRequest)
	case r.Limit == 0:
		return DefaultPageSize, nil
	}
	return min(r.Limit, MaxPageSize), nil
}

// ListPage builds a ListRuns page from up to size+1 runs read newest
// first and their positions: at most size runs, and the token of the
// next page when there was one more.
func ListPage(runs []Run, positions []int64, size int) ListRunsResponse {
	var resp ListRunsResponse
	if len(runs) > size {
		runs = runs[:size]
		resp.NextPageToken = PageToken(positions[size-1])
	}
	resp.Runs = runs
	return resp
}

// Limits shared by every backend.
const (
	// MaxIDLength bounds run, session, agent, tenant and other ids.
	MaxIDLength = 512
	// MaxTypeLength bounds an event type.
	MaxTypeLength = 256
	// DefaultEventsLimit and MaxEventsLimit bound EventsRequest.Limit.
	DefaultEventsLimit = 1000
	MaxEventsLimit     = 10000
	// DefaultPageSize and MaxPageSize bound ListRunsRequest.PageSize.
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// checkID validates an id; what names it in messages. Empty ids are
// allowed when optional.
func checkID(what, id string, optional bool) error {
	switch {
	case id == "" && optional:
		return nil
	case id == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidRequest, what)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalidRequest, what, MaxIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidRequest, what)
	case strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: %s contains control characters", ErrInvalidRequest, what)
	}
	return nil
}

// ValidMessageID reports whether id may be a run's MessageID (see
// [Run.MessageID]): empty, or at most MaxIDLength bytes of UTF-8 without
// control characters, as every other id. [Recorder.Begin] keeps another
// message id on the run's started event only.
func ValidMessageID(id string) bool { return checkID("message id", id, true) == nil }

// PrefixEnd returns the end of the key range of the strings that begin
// with prefix, in byte order (for UTF-8, code point order): they are
// exactly the strings s with prefix <= s < end. For valid UTF-8, end is
// prefix with its last code point below U+10FFFF incremented (past the
// surrogates) and the code points after it dropped: valid UTF-8 too, so
// that a store compares it with a text column (SQLite's BINARY
// collation, PostgreSQL's "C"), and compared with valid UTF-8 only. For
// other bytes, it is prefix with its last byte below 0xff incremented
// and the bytes after it dropped. ok is false when the range has no end
// (prefix is empty, all U+10FFFF, or all 0xff bytes): every s >= prefix
// begins with it.
func PrefixEnd(prefix string) (end string, ok bool) { return keyrange.End(prefix) }

func checkIDs(ids ...string) error {
	for i := 0; i+1 < len(ids); i += 2 {
		if err := checkID(ids[i], ids[i+1], true); err != nil {
			return err
		}
	}
	return nil
}

func checkJSON(what string, v json.RawMessage) error {
	if len(v) > 0 && !jsonvalid.Valid(v) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalidRequest, what)
	}
	return nil
}

// ValidateRun checks a run given to StartRun. Stores call it.
func ValidateRun(r Run) error {
	if err := checkID("run id", r.ID, false); err != nil {
		return err
	}
	if err := checkIDs("tenant", r.Tenant, "session id", r.SessionID, "agent id", r.AgentID,
		"parent id", r.ParentID, "correlation id", r.CorrelationID, "invocation id", r.InvocationID,
		"conversation id", r.ConversationID, "message id", r.MessageID); err != nil {
		return err
	}
	if r.Status != "" && r.Status != StatusStarted {
		return fmt.Errorf("%w: a run starts in status %q, not %q", ErrInvalidRequest, StatusStarted, r.Status)
	}
	if len(r.Output) > 0 || r.Error != nil || !r.EndedAt.IsZero() {
		return fmt.Errorf("%w: a started run has no output, error or end time", ErrInvalidRequest)
	}
	return nil
}

// Validate checks the request; stores call it.
func (r AppendRequest) Validate() error { return r.validate(true) }

// validate is Validate, scanning the events' data and the finish's
// output as JSON only with scan set.
func (r AppendRequest) validate(scan bool) error {
	if err := checkIDs("tenant", r.Tenant); err != nil {
		return err
	}
	if err := checkID("run id", r.RunID, false); err != nil {
		return err
	}
	if len(r.Events) == 0 && r.Finish == nil {
		return fmt.Errorf("%w: no events to append", ErrInvalidRequest)
	}
	for i, e := range r.Events {
		switch {
		case e.Type == "":
			return fmt.Errorf("%w: event %d has no type", ErrInvalidRequest, i)
		case len(e.Type) > MaxTypeLength || !utf8.ValidString(e.Type):
			return fmt.Errorf("%w: event %d has an invalid type", ErrInvalidRequest, i)
		}
		if scan && len(e.Data) > 0 && !jsonvalid.Valid(e.Data) {
			return fmt.Errorf("%w: event %d data is not valid JSON", ErrInvalidRequest, i)
		}
	}
	if f := r.Finish; f != nil {
		if (f.Tenant != "" && f.Tenant != r.Tenant) || (f.RunID != "" && f.RunID != r.RunID) {
			return fmt.Errorf("%w: the finish names another run", ErrInvalidRequest)
		}
		g := *f
		g.Tenant, g.RunID = r.Tenant, r.RunID
		return g.validate(scan)
	}
	return nil
}

// Validate checks the request; stores call it.
func (r FinishRequest) Validate() error { return r.validate(true) }

// validate is Validate, scanning the output as JSON only with scan set.
func (r FinishRequest) validate(scan bool) error {
	if err := checkIDs("tenant", r.Tenant, "invocation id", r.InvocationID); err != nil {
		return err
	}
	if err := checkID("run id", r.RunID, false); err != nil {
		return err
	}
	if !r.Status.Final() {
		return fmt.Errorf("%w: %q is not a final status", ErrInvalidRequest, r.Status)
	}
	if !scan {
		return nil
	}
	return checkJSON("output", r.Output)
}

// Validate checks the request and returns it with Limit defaulted and
// capped; stores call it.
func (r EventsRequest) Validate() (EventsRequest, error) {
	if err := checkIDs("tenant", r.Tenant, "run id", r.RunID, "session id", r.SessionID); err != nil {
		return r, err
	}
	if (r.RunID == "") == (r.SessionID == "") {
		return r, fmt.Errorf("%w: set exactly one of run id and session id", ErrInvalidRequest)
	}
	if r.AfterID < 0 || r.Limit < 0 {
		return r, fmt.Errorf("%w: negative after id or limit", ErrInvalidRequest)
	}
	r.Limit = clamp(r.Limit, DefaultEventsLimit, MaxEventsLimit)
	return r, nil
}

// Validate checks the request and returns it with PageSize defaulted and
// capped, and the position decoded from PageToken (0 for the first
// page); stores call it.
func (r ListRunsRequest) Validate() (ListRunsRequest, int64, error) {
	if err := checkIDs("tenant", r.Tenant, "session id", r.SessionID, "parent id", r.ParentID,
		"message id prefix", r.MessageIDPrefix); err != nil {
		return r, 0, err
	}
	if r.PageSize < 0 {
		return r, 0, fmt.Errorf("%w: negative page size", ErrInvalidRequest)
	}
	r.PageSize = clamp(r.PageSize, DefaultPageSize, MaxPageSize)
	pos, err := ParsePageToken(r.PageToken)
	return r, pos, err
}

func clamp(n, def, most int) int {
	if n == 0 {
		return def
	}
	return min(n, most)
}

// pageTokenPrefix versions the token format.
const pageTokenPrefix = "r1."

// PageToken encodes a store position for ListRunsResponse.NextPageToken:
// the listing continues with runs started before the run at pos
// (backends number runs in the order they were started, from 1).
func PageToken(pos int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pageTokenPrefix + strconv.FormatInt(pos, 10)))
}

// ParsePageToken decodes a PageToken; the empty token is position 0.
func ParsePageToken(tok string) (int64, error) {
	if tok == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil || len(raw) > 32 {
		return 0, fmt.Errorf("%w: malformed page token", ErrInvalidRequest)
	}
	digits, ok := strings.CutPrefix(string(raw), pageTokenPrefix)
	if !ok {
		return 0, fmt.Errorf("%w: malformed page token", ErrInvalidRequest)
	}
	pos, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || pos <= 0 || strconv.FormatInt(pos, 10) != digits {
		return 0, fmt.Errorf("%w: malformed page token", ErrInvalidRequest)
	}
	return pos, nil
}
