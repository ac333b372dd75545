package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// MaxIDLength bounds client-supplied ids (WithMessageID, WithRecordKey,
// Signal.RequestID, Signal.RecordKey): 256 bytes.
const MaxIDLength = 256

// ErrNotRecorded is wrapped by Recorded's error when no outcome is
// recorded under the key (never recorded, expired, or the session was
// deleted).
var ErrNotRecorded = errors.New("chat: no outcome recorded under the key")

// Mark key prefixes: a message id, a signal request id, a caller's
// record key.
const (
	markMessage = "m:"
	markSignal  = "s:"
	markRecord  = "k:"
)

// WithRecordKey also records the turn's outcome under key, in the same
// transaction as the turn's session write, when the session store
// records marks (session.Marker: the memory and SQLite stores do). A
// completed or suspended turn is recorded; an errored turn stores
// nothing, so nothing is recorded. [Harness.Recorded] reads it back —
// after a crash, or on another worker — which is how a caller tells
// whether a turn it started was committed. key is at most MaxIDLength
// bytes.
func WithRecordKey(key string) SendOption {
	return func(c *sendConfig) { c.recordKey = key }
}

// outcomeRecord is an outcome as recorded in a mark.
type outcomeRecord struct {
	Kind         string                  `json:"kind"` // completed | suspended
	InvocationID string                  `json:"invocation_id"`
	Path         harness.Path            `json:"path,omitempty"`
	Resumed      bool                    `json:"resumed,omitempty"`
	Replies      []llm.Message           `json:"replies,omitempty"`
	Descriptor   *graph.SignalDescriptor `json:"descriptor,omitempty"`
	RecordKey    string                  `json:"record_key,omitempty"`
}

// decode rebuilds the recorded outcome. A replayed Completed has no
// FinalState.
func (r *outcomeRecord) decode(sessionID string) (Outcome, error) {
	t := Turn{SessionID: sessionID, InvocationID: r.InvocationID, Path: r.Path, Resumed: r.Resumed, Replayed: true, RecordKey: r.RecordKey}
	replies := r.Replies
	if replies == nil {
		replies = []llm.Message{}
	}
	switch r.Kind {
	case "completed":
		return &Completed{Turn: t, Replies: replies}, nil
	case "suspended":
		if r.Descriptor == nil {
			return nil, errors.New("a suspended outcome without its descriptor")
		}
		return &Suspended{Turn: t, Descriptor: *r.Descriptor, PendingMessages: replies}, nil
	}
	return nil, fmt.Errorf("unknown outcome kind %q", r.Kind)
}

// Recorded returns the outcome recorded under key (WithRecordKey,
// Signal.RecordKey) for a turn of the session. The error wraps
// ErrNotRecorded when there is none, and is a session_load_failed error
// when the store fails.
func (c *Harness) Recorded(ctx context.Context, sessionID, key string) (Outcome, error) {
	o, ok, err := c.recorded(ctx, sessionID, markRecord+key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q in session %q", ErrNotRecorded, key, sessionID)
	}
	return o, nil
}

// Replay returns the outcome recorded for the turn sent with messageID
// (WithMessageID) in the session, as a retransmitted Send would (Replayed
// set), without taking the session's lock or running anything. The
// error wraps ErrNotRecorded when no such turn is recorded, and is a
// session_load_failed error when the store fails. A server checks it
// before it opens a run for a retransmission.
func (c *Harness) Replay(ctx context.Context, sessionID, messageID string) (Outcome, error) {
	if err := checkID("the message id", messageID); err != nil {
		return nil, err
	}
	o, ok, err := c.recorded(ctx, sessionID, markMessage+messageID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: message %q in session %q", ErrNotRecorded, messageID, sessionID)
	}
	return o, nil
}

// recorded reads the outcome marked under mark; ok is false when none is.
func (c *Harness) recorded(ctx context.Context, sessionID, mark string) (Outcome, bool, error) {
	if c.marker == nil {
		if c.idem != nil {
			if o, ok := c.idem.get(sessionID, mark); ok {
				return o, true, nil
			}
		}
		return nil, false, nil
	}
	raw, err := c.marker.LoadMark(ctx, sessionID, mark)
	return c.markOutcome(sessionID, raw, err)
}

// recordedAt is recorded for a caller that believes version current (the
// graph's cached version): a store that keeps its marks' index answers
// without a read (session.VersionedMarker). The answer may miss a mark of
// a later version, so the caller checks again at the version the turn
// loads (turnInput.input).
func (c *Harness) recordedAt(ctx context.Context, sessionID, mark string, version int64) (Outcome, bool, error) {
	vm, ok := c.marker.(session.VersionedMarker)
	if !ok || version <= 0 {
		return c.recorded(ctx, sessionID, mark)
	}
	raw, err := vm.LoadMarkAt(ctx, sessionID, mark, version)
	return c.markOutcome(sessionID, raw, err)
}

// markOutcome decodes the outcome a mark lookup returned.
func (c *Harness) markOutcome(sessionID string, raw json.RawMessage, err error) (Outcome, bool, error) {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, false, nil
	case errors.Is(err, session.ErrInvalidRequest):
		return nil, false, &ShapeError{Err: err}
	case err != nil:
		return nil, false, errcat.Wrap(errcat.SessionLoadFailed, "chat: cannot read the recorded outcome", err)
	}
	var rec outcomeRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, false, errcat.Wrap(errcat.SessionLoadFailed, "chat: the recorded outcome is corrupt", err)
	}
	o, err := rec.decode(sessionID)
	if err != nil {
		return nil, false, errcat.Wrap(errcat.SessionLoadFailed, "chat: the recorded outcome is corrupt", err)
	}
	return o, true, nil
}

// turnWrite vets and marks the session writes of one turn: the history
// must stay valid for every provider (llm.CheckHistory), and the final
// write records the turn's outcome under its marks.
type turnWrite struct {
	inputLen int      // messages the turn's input appends
	resumed  bool     // a signal-resume turn
	marks    []string // mark keys the outcome is recorded under
	start    int      // the history length before the turn's replies
	started  bool
}

// check is the turn's graph.SessionCheck.
func (w *turnWrite) check(stored, next graph.State) error {
	hist := messagesOf(stored)
	if !w.started {
		w.started, w.start = true, len(hist)+w.inputLen
	}
	nx := messagesOf(next)
	if len(nx) < len(hist) {
		if err := llm.CheckHistory(nil, nx); err != nil {
			return &HistoryError{Err: err}
		}
		return nil
	}
	if err := llm.CheckHistory(hist, nx[len(hist):]); err != nil {
		return &HistoryError{Err: err}
	}
	return nil
}

// sessionMarks is the turn's graph.SessionMarks.
func (w *turnWrite) sessionMarks(invocationID string, next graph.State, susp *graph.Suspension) ([]session.Mark, error) {
	if len(w.marks) == 0 {
		return nil, nil
	}
	msgs := messagesOf(next)
	rec := outcomeRecord{Kind: "completed", InvocationID: invocationID, Resumed: w.resumed, Replies: tail(msgs, w.start)}
	for _, k := range w.marks {
		if key, ok := strings.CutPrefix(k, markRecord); ok {
			rec.RecordKey = key
		}
	}
	switch {
	case w.resumed:
		rec.Path = harness.PathSignalResume
	case w.start > w.inputLen:
		rec.Path = harness.PathExistingSession
	default:
		rec.Path = harness.PathNewSession
	}
	if susp != nil {
		rec.Kind, rec.Descriptor = "suspended", &susp.Descriptor
	}
	raw, err := json.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	out := make([]session.Mark, len(w.marks))
	for i, k := range w.marks {
		out[i] = session.Mark{Key: k, Value: raw}
	}
	return out, nil
}

// options returns the invoke options that install w.
func (w *turnWrite) options() []graph.InvokeOption {
	return []graph.InvokeOption{graph.WithSessionCheck(w.check), graph.WithSessionMarks(w.sessionMarks)}
}

// messagesOf returns the history of st (nil for the zero State).
func messagesOf(st graph.State) []llm.Message {
	if st.IsZero() {
		return nil
	}
	return Messages.Get(st)
}

// HistoryError reports a turn whose messages would break the history's
// validity for the providers (llm.CheckHistory: a tool result answering
// no call, an assistant message without content or tool calls, a
// duplicated tool call id). Nothing of the turn is stored. Its category
// is provider_invalid_response: the model (or a node speaking for it)
// produced a message no provider would accept back. Err is the
// llm.ValidationError naming the offending message.
type HistoryError struct{ Err error }

// Error formats the failure.
func (e *HistoryError) Error() string {
	return "chat: " + string(errcat.ProviderInvalidResponse) + ": the turn would store an invalid history: " + e.Err.Error()
}

// Message returns the diagnostic the user-correctable reply quotes.
func (e *HistoryError) Message() string {
	var m errcat.Messager
	if errors.As(e.Err, &m) {
		return "the reply would make the conversation invalid (" + m.Message() + ")"
	}
	return "the reply would make the conversation invalid (" + e.Err.Error() + ")"
}

// Category returns provider_invalid_response.
func (e *HistoryError) Category() errcat.Category { return errcat.ProviderInvalidResponse }

// Unwrap returns the validation error.
func (e *HistoryError) Unwrap() error { return e.Err }

// Is matches provider_invalid_response.
func (e *HistoryError) Is(target error) bool {
	return errcat.Matches(errcat.ProviderInvalidResponse, target)
}

// checkID bounds a client-supplied id.
func checkID(what, id string) error {
	if len(id) > MaxIDLength {
		return &ShapeError{Err: fmt.Errorf("%s is longer than %d bytes", what, MaxIDLength)}
	}
	return nil
}
