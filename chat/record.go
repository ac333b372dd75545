package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/callindex"
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
// record key, a signal whose decision a resume consumed.
const (
	markMessage = "m:"
	markSignal  = "s:"
	markRecord  = "k:"
	markDecided = "d:"
)

// decidedRecord is the value of a markDecided mark written by an interim
// save: the invocation whose decision it marks (the final write records
// the turn's outcome, with its invocation_id, under every mark).
type decidedRecord struct {
	Kind         string `json:"kind"`
	InvocationID string `json:"invocation_id"`
}

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

// outcomeRecord is an outcome as recorded in a mark. The turn's replies
// are not copied into it: they are the messages it appended to the
// session's history, which the same write stores, so the record locates
// them (RepliesAt). Records written before carry Replies.
type outcomeRecord struct {
	Kind         string                  `json:"kind"` // completed | suspended
	InvocationID string                  `json:"invocation_id"`
	Path         harness.Path            `json:"path,omitempty"`
	Resumed      bool                    `json:"resumed,omitempty"`
	Replies      []llm.Message           `json:"replies,omitempty"`
	RepliesAt    *repliesRef             `json:"replies_at,omitempty"`
	Descriptor   *graph.SignalDescriptor `json:"descriptor,omitempty"`
	RecordKey    string                  `json:"record_key,omitempty"`
	// Signal is the decision a resumed turn with a request id took
	// (Signal.RequestID): a retransmission with that request id must
	// carry the same one. Records written before have none.
	Signal *signalRef `json:"signal,omitempty"`
	// Usage is what the turn's model calls reported (Turn.Usage,
	// FinishReason, ModelCalls), so that a replay answers with the
	// usage the first answer had; none when the turn made no model call
	// (and in records written before).
	Usage *usageRecord `json:"usage,omitempty"`
}

// usageRecord is a turn's model usage as recorded with its outcome.
type usageRecord struct {
	Calls         int    `json:"calls"`
	Finish        string `json:"finish,omitempty"`
	Prompt        *int   `json:"prompt,omitempty"`
	Completion    *int   `json:"completion,omitempty"`
	Total         *int   `json:"total,omitempty"`
	Cached        *int   `json:"cached,omitempty"`
	CacheCreation *int   `json:"cache_creation,omitempty"`
}

// usageOf is the record of the usage m summed (nil when the turn made
// no model call, or has no meter).
func usageOf(m *meter) *usageRecord {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == 0 {
		return nil
	}
	u := m.usage
	return &usageRecord{Calls: m.calls, Finish: string(m.finish), Prompt: u.PromptTokens, Completion: u.CompletionTokens,
		Total: u.TotalTokens, Cached: u.CachedTokens, CacheCreation: u.CacheCreationTokens}
}

// stamp sets t's usage from u (nothing when u is nil).
func (u *usageRecord) stamp(t *Turn) {
	if u == nil || u.Calls <= 0 {
		return
	}
	t.ModelCalls, t.FinishReason = u.Calls, llm.FinishReason(u.Finish)
	t.Usage = llm.Usage{PromptTokens: u.Prompt, CompletionTokens: u.Completion, TotalTokens: u.Total,
		CachedTokens: u.Cached, CacheCreationTokens: u.CacheCreation}
}

// signalRef identifies the decision that resumed a turn: the signal id
// it resolved to and a digest of its payload (digestPayload).
type signalRef struct {
	ID  string `json:"id"`
	Sum uint64 `json:"sum"`
}

// digestPayload is a 64-bit FNV-1a digest of a signal's payload as JSON
// (map keys sorted); 0 when it cannot be encoded, which no check holds
// against a retransmission.
func digestPayload(p graph.Update) uint64 {
	raw, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	h := uint64(14695981039346656037)
	for _, c := range raw {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h | 1 // never 0
}

// sameSignal reports whether the recorded outcome o was the answer to
// sig's decision: the same payload and, when sig names one, the same
// signal id (true when o does not say what decision it took).
func sameSignal(o Outcome, sig Signal) bool {
	r := o.Info().signal
	if r == nil {
		return true
	}
	if sig.SignalID != "" && sig.SignalID != r.ID {
		return false
	}
	sum := digestPayload(sig.Payload)
	return sum == 0 || r.Sum == 0 || sum == r.Sum
}

// repliesRef locates a turn's replies in its session's history:
// messages [From, From+N), whose digest (digestReplies) is Sum.
type repliesRef struct {
	From int    `json:"from"`
	N    int    `json:"n"`
	Sum  uint64 `json:"sum"`
}

// digestReplies is a 64-bit FNV-1a digest of what identifies messages:
// roles, texts, tool call ids, names and arguments, tool result ids. It
// tells whether the history still holds a turn's replies where its
// record says.
func digestReplies(msgs []llm.Message) uint64 {
	h := uint64(14695981039346656037)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff // field separator: no string ends in it
		h *= 1099511628211
	}
	for _, m := range msgs {
		add(string(m.Role))
		add(m.Text())
		for _, tc := range m.ToolCalls {
			add(tc.ID)
			add(tc.Name)
			add(string(tc.Arguments))
		}
		add(m.ToolCallID)
	}
	return h
}

// compactRecord tags the compact form of a record (appendRecord): a
// JSON array [compactRecord, invocation id, path code, from, n, sum] with
// the record key as an optional seventh element. A record with usage
// takes the object form, which every earlier build reads (ignoring the
// usage), while a compact form of more elements it would refuse.
const compactRecord = 1

// pathCodes are the compact form's codes of the turn paths.
var pathCodes = [...]harness.Path{harness.PathNewSession, harness.PathExistingSession, harness.PathSignalResume}

// appendRecord appends r's JSON encoding to b, without reflection (it is
// written with every marked turn). The common record — a completed turn
// not resumed, its replies located in the history — takes the compact
// form, about half the bytes of the object form, which the row that
// carries it pays on every turn. The descriptor, on suspensions only,
// goes through encoding/json.
func appendRecord(b []byte, r *outcomeRecord) ([]byte, error) {
	if r.Kind == "completed" && !r.Resumed && r.Replies == nil && r.Descriptor == nil && r.RepliesAt != nil && r.Usage == nil {
		if code := slices.Index(pathCodes[:], r.Path); code >= 0 {
			b = append(b, '[', '0'+compactRecord, ',')
			b = appendJSONString(b, r.InvocationID)
			b = append(b, ',', '0'+byte(code), ',')
			b = strconv.AppendInt(b, int64(r.RepliesAt.From), 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(r.RepliesAt.N), 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, r.RepliesAt.Sum, 10)
			if r.RecordKey != "" {
				b = append(b, ',')
				b = appendJSONString(b, r.RecordKey)
			}
			return append(b, ']'), nil
		}
	}
	b = append(b, `{"kind":`...)
	b = appendJSONString(b, r.Kind)
	b = append(b, `,"invocation_id":`...)
	b = appendJSONString(b, r.InvocationID)
	if r.Path != "" {
		b = append(b, `,"path":`...)
		b = appendJSONString(b, string(r.Path))
	}
	if r.Resumed {
		b = append(b, `,"resumed":true`...)
	}
	if at := r.RepliesAt; at != nil {
		b = append(b, `,"replies_at":{"from":`...)
		b = strconv.AppendInt(b, int64(at.From), 10)
		b = append(b, `,"n":`...)
		b = strconv.AppendInt(b, int64(at.N), 10)
		b = append(b, `,"sum":`...)
		b = strconv.AppendUint(b, at.Sum, 10)
		b = append(b, '}')
	}
	if r.Descriptor != nil {
		d, err := json.Marshal(r.Descriptor)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"descriptor":`...), d...)
	}
	if r.RecordKey != "" {
		b = append(b, `,"record_key":`...)
		b = appendJSONString(b, r.RecordKey)
	}
	if r.Signal != nil {
		b = append(b, `,"signal":{"id":`...)
		b = appendJSONString(b, r.Signal.ID)
		b = append(b, `,"sum":`...)
		b = strconv.AppendUint(b, r.Signal.Sum, 10)
		b = append(b, '}')
	}
	if u := r.Usage; u != nil {
		b = append(b, `,"usage":{"calls":`...)
		b = strconv.AppendInt(b, int64(u.Calls), 10)
		if u.Finish != "" {
			b = append(b, `,"finish":`...)
			b = appendJSONString(b, u.Finish)
		}
		for _, c := range [...]struct {
			name string
			n    *int
		}{{"prompt", u.Prompt}, {"completion", u.Completion}, {"total", u.Total}, {"cached", u.Cached}, {"cache_creation", u.CacheCreation}} {
			if c.n != nil {
				b = append(b, `,"`...)
				b = append(b, c.name...)
				b = append(b, `":`...)
				b = strconv.AppendInt(b, int64(*c.n), 10)
			}
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// parseRecord reads a record in either form appendRecord writes.
func parseRecord(raw []byte) (*outcomeRecord, error) {
	var rec outcomeRecord
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, err
		}
		return &rec, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	var (
		tag, code int
		at        repliesRef
	)
	if len(a) != 6 && len(a) != 7 {
		return nil, fmt.Errorf("a compact record of %d elements", len(a))
	}
	for i, dst := range []any{&tag, &rec.InvocationID, &code, &at.From, &at.N, &at.Sum} {
		if err := json.Unmarshal(a[i], dst); err != nil {
			return nil, fmt.Errorf("compact record element %d: %w", i, err)
		}
	}
	if len(a) == 7 {
		if err := json.Unmarshal(a[6], &rec.RecordKey); err != nil {
			return nil, fmt.Errorf("compact record element 6: %w", err)
		}
	}
	if tag != compactRecord || code < 0 || code >= len(pathCodes) {
		return nil, fmt.Errorf("a compact record tagged %d with path code %d", tag, code)
	}
	rec.Kind, rec.Path, rec.RepliesAt = "completed", pathCodes[code], &at
	return &rec, nil
}

// decode rebuilds the recorded outcome; history returns the session's
// messages (read only when the record locates its replies there). A
// replayed Completed has no FinalState.
func (r *outcomeRecord) decode(sessionID string, history historyFunc) (o Outcome, moved bool, err error) {
	t := Turn{SessionID: sessionID, InvocationID: r.InvocationID, Path: r.Path, Resumed: r.Resumed, Replayed: true, RecordKey: r.RecordKey, signal: r.Signal}
	r.Usage.stamp(&t) // the first answer's usage, when recorded
	replies := r.Replies
	if at := r.RepliesAt; at != nil && at.N > 0 {
		msgs, off, err := history(at.From)
		if err != nil {
			return nil, false, err
		}
		// at.From is absolute; msgs may be a tail of the history that
		// leaves off items out (graph.SessionConfig.Tail).
		if from := at.From - off; from >= 0 && from+at.N <= len(msgs) && digestReplies(msgs[from:from+at.N]) == at.Sum {
			replies = slices.Clone(msgs[from : from+at.N])
			if from > 0 {
				in := msgs[from-1] // the turn's message, before its replies
				t.input = &in
			}
		} else {
			// The history was rewritten since: the turn ran (it is not run
			// again), but its replies are gone. The outcome says so by
			// having none.
			moved = true
		}
	}
	if replies == nil {
		replies = []llm.Message{}
	}
	switch r.Kind {
	case "completed":
		return &Completed{Turn: t, Replies: replies}, moved, nil
	case "suspended":
		if r.Descriptor == nil {
			return nil, false, errors.New("a suspended outcome without its descriptor")
		}
		return &Suspended{Turn: t, Descriptor: *r.Descriptor, PendingMessages: replies}, moved, nil
	}
	return nil, false, fmt.Errorf("unknown outcome kind %q", r.Kind)
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
// before it opens a run for a retransmission. Like Send's own check, it
// looks the id up at the version the graph's session cache holds, without
// a read when the store indexes its marks (session.VersionedMarker); a
// retransmission it misses because another process wrote the session
// since is still answered by Send, under the session's lock.
func (c *Harness) Replay(ctx context.Context, sessionID, messageID string) (Outcome, error) {
	if err := checkID("the message id", messageID); err != nil {
		return nil, err
	}
	o, ok, err := c.recordedAt(ctx, sessionID, markMessage+messageID, c.h.Graph().SessionVersionHint(sessionID))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: message %q in session %q", ErrNotRecorded, messageID, sessionID)
	}
	return o, nil
}

// ErrMessageIDReused is the error of a message id given again with
// another message than the one it first named (a retransmission carries
// the same message): category message_id_reused (user-correctable).
// Send returns it, and ReplayMessage.
var ErrMessageIDReused = errcat.Sentinel(errcat.MessageIDReused, "chat: the message id was given with another message")

// ReplayMessage is Replay for a retransmission of msg: the outcome
// recorded under messageID when it answered msg, an error wrapping
// ErrMessageIDReused when it answered another message, and one wrapping
// ErrNotRecorded when none is recorded. A recorded outcome whose message
// the history no longer holds (rewritten since) is taken as msg's.
func (c *Harness) ReplayMessage(ctx context.Context, sessionID, messageID string, msg llm.Message) (Outcome, error) {
	o, err := c.Replay(ctx, sessionID, messageID)
	if err != nil {
		return nil, err
	}
	if !sameInput(o, msg) {
		return nil, fmt.Errorf("%w: message %q in session %q", ErrMessageIDReused, messageID, sessionID)
	}
	return o, nil
}

// sameInput reports whether the recorded outcome o answered msg: the
// same role and content (true when o does not say what it answered).
func sameInput(o Outcome, msg llm.Message) bool {
	in := o.Info().input
	return in == nil || (in.Role == msg.Role && in.ToolCallID == msg.ToolCallID && in.Content.Equal(msg.Content))
}

// MaxRecordKeys bounds the record keys [Harness.RecordKeys] returns for
// one session.
const MaxRecordKeys = 1000

// RecordKeys returns the caller record keys (WithRecordKey,
// Signal.RecordKey) recorded for the session's turns: those committed
// to the session's conversation (a completed or suspended turn) within
// the store's mark retention, the most recent first, at most
// MaxRecordKeys of them (the oldest are left out past it). It reads the session's marks
// (session.MarkLister), and returns nil, nil when the store cannot list
// them. A server deleting a session finds the runs that committed to
// it this way, on whichever process they ran. The error is a
// session_load_failed error when the store fails.
func (c *Harness) RecordKeys(ctx context.Context, sessionID string) ([]string, error) {
	ml, ok := c.marker.(session.MarkLister)
	if !ok {
		return nil, nil
	}
	keys, err := ml.MarkKeys(ctx, sessionID, markRecord, MaxRecordKeys)
	switch {
	case errors.Is(err, session.ErrInvalidRequest):
		return nil, &ShapeError{Err: err}
	case err != nil:
		return nil, loadFailed(ctx, "chat: cannot list the recorded outcomes", err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, markRecord)
	}
	return keys, nil
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
	return c.markOutcome(ctx, sessionID, raw, err)
}

// refusedByMark is the refusal of a turn whose id the session already
// recorded for another kind of request (prefix markMessage or
// markSignal, what: "a message", "a signal"), wrapping
// ErrMessageIDReused; nil when id is empty or not recorded.
func (c *Harness) refusedByMark(ctx context.Context, sessionID, prefix, id, what string) error {
	if id == "" {
		return nil
	}
	marked, err := c.isMarked(ctx, sessionID, prefix+id)
	switch {
	case err != nil:
		return err
	case marked:
		return fmt.Errorf("%w: the session recorded it for %s", ErrMessageIDReused, what)
	}
	return nil
}

// isMarked reports whether the session holds mark (a superseded
// invocation's), without rebuilding the outcome recorded under it.
func (c *Harness) isMarked(ctx context.Context, sessionID, mark string) (bool, error) {
	if c.marker == nil {
		_, ok, err := c.recorded(ctx, sessionID, mark)
		return ok, err
	}
	_, err := c.marker.LoadMark(ctx, sessionID, mark)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return false, nil
	case errors.Is(err, session.ErrInvalidRequest):
		return false, &ShapeError{Err: err}
	case err != nil:
		return false, loadFailed(ctx, "chat: cannot read the recorded outcome", err)
	}
	return true, nil
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
	return c.markOutcome(ctx, sessionID, raw, err)
}

// historyFunc returns the session's history for replies recorded from
// index from on: msgs holds the history from index off (a tail, when
// the turn loaded one), and off is at most from unless the history is
// shorter.
type historyFunc func(from int) (msgs []llm.Message, off int, err error)

// recordedIn is recordedAt for a turn that has loaded the session at
// version, whose messages are hist, the history from index off on.
func (c *Harness) recordedIn(ctx context.Context, sessionID, mark string, version int64, hist []llm.Message, off int) (Outcome, bool, error) {
	vm, ok := c.marker.(session.VersionedMarker)
	if !ok {
		return c.recorded(ctx, sessionID, mark)
	}
	raw, err := vm.LoadMarkAt(ctx, sessionID, mark, version)
	return c.markOutcomeWith(ctx, sessionID, raw, err, func(from int) ([]llm.Message, int, error) {
		if from < off {
			// The replies precede the loaded tail: read the history whole.
			return c.wholeHistory(ctx, sessionID)
		}
		return hist, off, nil
	})
}

// wholeHistory reads the session's stored history whole.
func (c *Harness) wholeHistory(ctx context.Context, sessionID string) ([]llm.Message, int, error) {
	st, err := c.h.Graph().SessionState(ctx, sessionID)
	if err != nil {
		return nil, 0, err
	}
	return messagesOf(st), 0, nil
}

// markOutcome decodes the outcome a mark lookup returned, reading its
// replies from the session's stored history.
func (c *Harness) markOutcome(ctx context.Context, sessionID string, raw json.RawMessage, err error) (Outcome, bool, error) {
	return c.markOutcomeWith(ctx, sessionID, raw, err, func(int) ([]llm.Message, int, error) {
		return c.wholeHistory(ctx, sessionID)
	})
}

// markOutcomeWith is markOutcome with the history from history.
func (c *Harness) markOutcomeWith(ctx context.Context, sessionID string, raw json.RawMessage, err error, history historyFunc) (Outcome, bool, error) {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, false, nil
	case errors.Is(err, session.ErrInvalidRequest):
		return nil, false, &ShapeError{Err: err}
	case err != nil:
		return nil, false, loadFailed(ctx, "chat: cannot read the recorded outcome", err)
	}
	rec, err := parseRecord(raw)
	if err != nil {
		return nil, false, errcat.Wrap(errcat.SessionLoadFailed, "chat: the recorded outcome is corrupt", err)
	}
	o, moved, err := rec.decode(sessionID, history)
	if err != nil {
		return nil, false, errcat.Wrap(errcat.SessionLoadFailed, "chat: cannot rebuild the recorded outcome", err)
	}
	if moved {
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "chat: a replayed turn's replies are no longer in the session's history",
			slog.String("invocation_id", o.Info().InvocationID))
	}
	return o, true, nil
}

// turnWrite vets and marks the session writes of one turn: the history
// must stay valid for every provider (llm.CheckHistory), and the final
// write records the turn's outcome under its marks.
type turnWrite struct {
	inputLen int           // messages the turn's input appends
	resumed  bool          // a signal-resume turn
	signal   *signalRef    // a resume's decision, recorded with a request id
	marks    []string      // mark keys the outcome is recorded under
	start    int           // the history length before the turn's replies
	offset   int           // messages left out of the loaded history (graph.SessionConfig.Tail)
	prefix   []llm.Message // those messages, when the turn read them (turnInput.input); nil otherwise
	started  bool
	in       *turnInput // a Send's input, nil for a signal's resume
	decided  string     // a resume's markDecided mark, also written by interim saves
	keys     [2]string  // marks' backing array
	// meter sums the turn's model calls: their usage is recorded with
	// the outcome (nil: none recorded).
	meter *meter
	// calls, when set, holds the index of the session's tool call ids,
	// under key (the session id): the check reads what the turn adds.
	calls *callindex.Cache
	key   string
}

// indexedHistory is the history length from which a turn's new tool
// calls are checked through the session's call index (callindex): a
// shorter history is scanned, at a bounded cost, and its session takes
// no room in the index cache.
const indexedHistory = 64

// makesCalls reports whether a message of msgs makes tool calls.
func makesCalls(msgs []llm.Message) bool {
	for i := range msgs {
		if len(msgs[i].ToolCalls) > 0 {
			return true
		}
	}
	return false
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
	added := nx[len(hist):]
	if w.prefix != nil {
		// A tail-loaded history checked whole: the messages before the
		// tail, then the tail.
		hist = append(w.prefix[:len(w.prefix):len(w.prefix)], hist...)
	}
	// Over a tail-loaded history otherwise, what the turn adds is checked
	// against the tail: a tool call id is unique within it.
	var err error
	if w.calls != nil && w.prefix == nil && len(hist) >= indexedHistory && makesCalls(added) {
		// New tool calls are checked against every id of the history:
		// through the session's index, not a scan. (Without them the
		// check reads only what the turn adds; a short history is
		// scanned, for less than keeping its index costs.)
		w.calls.With(w.key, func(x *llm.CallIndex) { err = llm.CheckHistoryIndexed(hist, added, x) })
	} else {
		err = llm.CheckHistory(hist, added)
	}
	if err != nil {
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
	from := min(w.start, len(msgs))
	// The recorded index is absolute: next may be a tail of the history.
	rec := outcomeRecord{Kind: "completed", InvocationID: invocationID, Resumed: w.resumed, Signal: w.signal,
		RepliesAt: &repliesRef{From: w.offset + from, N: len(msgs) - from, Sum: digestReplies(msgs[from:])}, Usage: usageOf(w.meter)}
	for _, k := range w.marks {
		if key, ok := strings.CutPrefix(k, markRecord); ok {
			rec.RecordKey = key
		}
	}
	switch {
	case w.resumed:
		rec.Path = harness.PathSignalResume
	case w.start > w.inputLen || w.offset > 0:
		rec.Path = harness.PathExistingSession
	default:
		rec.Path = harness.PathNewSession
	}
	if susp != nil {
		rec.Kind, rec.Descriptor = "suspended", &susp.Descriptor
	}
	raw, err := appendRecord(make([]byte, 0, 192), &rec)
	if err != nil {
		return nil, err
	}
	out := make([]session.Mark, len(w.marks))
	for i, k := range w.marks {
		out[i] = session.Mark{Key: k, Value: raw}
	}
	return out, nil
}

// CheckSession is the turn's graph.SessionCheck (graph.SessionHooks).
func (w *turnWrite) CheckSession(stored, next graph.State) error { return w.check(stored, next) }

// InterimMarks is the turn's graph.InterimSessionMarks: a resume's
// interim save (the approved call's result, saved as soon as the call
// returned) marks its decision consumed, so that a process killed after
// it leaves the decision known to have taken effect.
func (w *turnWrite) InterimMarks(invocationID string) []session.Mark {
	if w.decided == "" {
		return nil
	}
	v, err := json.Marshal(decidedRecord{Kind: "decided", InvocationID: invocationID})
	if err != nil {
		return nil
	}
	return []session.Mark{{Key: w.decided, Value: v}}
}

// MarkSession is the turn's graph.SessionMarks (graph.SessionHooks).
func (w *turnWrite) MarkSession(invocationID string, next graph.State, susp *graph.Suspension) ([]session.Mark, error) {
	return w.sessionMarks(invocationID, next, susp)
}

// SessionInput is the turn's graph.SessionInput (graph.SessionHooks):
// the Send's input (turnInput.input), none for a signal's resume. It
// notes how many messages the load left out of the history (a tail
// load), so that the indices the turn records are absolute.
func (w *turnWrite) SessionInput(ctx context.Context, stored graph.State, info graph.SessionInfo) (graph.Update, error) {
	w.offset = info.Offsets[MessagesField]
	if w.in == nil {
		return nil, nil
	}
	return w.in.input(ctx, stored, info)
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

// checkID bounds a client-supplied id, and refuses one that a session
// store could not keep as a mark key (not UTF-8, or holding NUL, which
// PostgreSQL's text refuses): before anything runs, not when the turn's
// write fails after its tools ran.
func checkID(what, id string) error {
	switch {
	case len(id) > MaxIDLength:
		return &ShapeError{Err: fmt.Errorf("%s is longer than %d bytes", what, MaxIDLength)}
	case !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0:
		return &ShapeError{Err: fmt.Errorf("%s must be valid UTF-8 without NUL bytes", what)}
	}
	return nil
}
