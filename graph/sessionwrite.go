package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// SessionCheck vets a session write before it happens: stored is the
// session's state as stored (the zero State when the session has no
// record yet), next the state about to be written. A non-nil error
// cancels the write — nothing is stored — and becomes the invocation's
// error as it is, so it should carry a category (errcat). The chat
// harness uses it to keep a history valid for every provider.
type SessionCheck func(stored, next State) error

// WithSessionCheck vets every session write of the invocation (the save
// at End, the atomic write at a suspension, the commit of a resumed run,
// SaveSession) with check. A write that fails the check stores nothing
// and the invocation errors with the check's error.
func WithSessionCheck(check SessionCheck) InvokeOption {
	return func(c *invokeConfig) error {
		c.check = check
		return nil
	}
}

// SessionMarks returns the marks to record with the invocation's final
// session write: next is the state written; susp describes the
// suspension when the invocation suspends, nil when it completes.
type SessionMarks func(invocationID string, next State, susp *Suspension) ([]session.Mark, error)

// WithSessionMarks records marks (session.Mark) with the invocation's
// final session write — the save at End, the atomic write at a
// suspension or the commit of a resumed run — in the same transaction,
// when the session store is a session.Marker: a caller can later tell,
// even after a crash, whether the invocation's effect was stored, and
// what it was. An invocation that errors writes no marks. A failing
// marks function fails the write with session_save_failed.
func WithSessionMarks(marks SessionMarks) InvokeOption {
	return func(c *invokeConfig) error {
		c.marks = marks
		return nil
	}
}

// SessionInfo describes a session as an invocation loaded it.
type SessionInfo struct {
	// Exists reports that the session has a stored record.
	Exists bool
	// MaySuspend is false when the session cannot have a suspended
	// invocation: it has no record, or this graph wrote its current
	// version itself, at the end of an invocation that did not suspend.
	// True means it may have one (a lookup of the paused records tells).
	MaySuspend bool
	// Version is the session's stored version as loaded (0 when it has
	// no record).
	Version int64
	// Offsets counts, per list field loaded by its tail
	// (SessionConfig.Tail), the leading items the state leaves out (see
	// SessionListOffset); nil when every field was loaded whole.
	Offsets map[string]int
}

// SessionInput computes a session-bound invocation's input from the
// session as loaded: stored is the session's state (defaults overlaid
// with the stored fields). Its update is merged after Invoke's input. An
// error fails the invocation, as it is, before any node runs.
type SessionInput func(ctx context.Context, stored State, info SessionInfo) (Update, error)

// WithSessionInput computes the invocation's input from the loaded
// session (see SessionInput), without a second read of the store. The
// chat harness uses it to close the open tool calls of a suspended turn
// a new message supersedes. It has no effect without a session.
func WithSessionInput(fn SessionInput) InvokeOption {
	return func(c *invokeConfig) error {
		c.input = fn
		return nil
	}
}

// SessionHooks are an invocation's three session hooks as one value,
// installed by WithSessionHooks: CheckSession is its SessionCheck,
// MarkSession its SessionMarks and SessionInput its SessionInput (which,
// as with WithSessionInput, Resume does not call). A hook also given by
// its own option (WithSessionCheck, WithSessionMarks, WithSessionInput)
// is that option's.
type SessionHooks interface {
	CheckSession(stored, next State) error
	MarkSession(invocationID string, next State, susp *Suspension) ([]session.Mark, error)
	SessionInput(ctx context.Context, stored State, info SessionInfo) (Update, error)
}

// InterimSessionMarks is an optional capability of SessionHooks: the
// marks written with each interim save of the session (SaveSession, a
// save a node makes before the invocation ends), with which MarkSession
// writes nothing. A caller marks there what took effect before the end
// (the chat harness: that a resume's decision was consumed), so that a
// process killed after the save leaves it marked.
type InterimSessionMarks interface {
	InterimMarks(invocationID string) []session.Mark
}

// WithSessionHooks installs h's session hooks with one option: what a
// caller that sets all three on every invocation (the chat harness)
// uses, at one allocation per invocation instead of six.
func WithSessionHooks(h SessionHooks) InvokeOption {
	return func(c *invokeConfig) error {
		c.hooks = h
		return nil
	}
}

// ErrStaleResume is wrapped by the suspension_record_invalid error of a
// resume refused by [RefuseStaleResume]: the session was written after
// the invocation suspended.
var ErrStaleResume = errors.New("graph: the session changed after the invocation suspended")

// RefuseStaleResume makes Resume refuse to continue an invocation whose
// session was written after it suspended (a list field of the session
// no longer has the length it had at the suspension): the resume fails
// with suspension_record_invalid wrapping ErrStaleResume, and the paused
// record is retired. Without it a stale resume continues from the
// paused state and merges its new list items into the session's lists
// as they are now, through each field's reducer (never writing over what
// came after the suspension; a dedupe_append field keeps no item twice);
// a field other
// than an append-only list that the session changed after the
// suspension keeps its stored value unless the resumed run writes it —
// then, with SessionConfig.Optimistic, the write fails with
// session_write_conflict, and otherwise the resumed run's value wins
// (last write wins). The run tells its writes by value: a field it sets
// to the value it had at the suspension counts as unwritten.
func RefuseStaleResume() InvokeOption {
	return func(c *invokeConfig) error {
		c.refuseStale = true
		return nil
	}
}

// checkError marks a SessionCheck failure so that callers pass it on
// unwrapped.
type checkError struct{ err error }

func (e *checkError) Error() string { return e.err.Error() }
func (e *checkError) Unwrap() error { return e.err }

// unwrapCheck returns the check's own error if err is a failed check.
func unwrapCheck(err error) (error, bool) {
	var ce *checkError
	if errors.As(err, &ce) {
		return ce.err, true
	}
	return nil, false
}

// rebase maps a resumed invocation's states onto the session as it is
// now. The paused state holds the session's fields as they were at the
// suspension; anything written to the session since (the turns that
// came after) must survive the resume. apply keeps the stored lists and
// merges into them, through the field's reducer, what the resumed run
// added past the paused lengths, and keeps the stored value of every
// other field the resumed run left as it was paused.
type rebase struct {
	fields []rebaseField
	values []rebaseValue
}

type rebaseField struct {
	index  int
	paused int // the list's length in the paused state
	stored any // the list as stored when the resume began
}

// rebaseValue is a field other than an append-only list that the session
// changed after the suspension.
type rebaseValue struct {
	index int
	// paused is its encoding in the paused state or, with hashed, that
	// encoding's hash (sessionHash): what a checkpoint records.
	paused    []byte
	hashed    bool
	stored    any    // its value as stored when the resume began
	storedRaw []byte // and that value's encoding
}

// isPaused reports whether raw encodes the value the field had paused.
func (v *rebaseValue) isPaused(raw []byte) bool {
	if v.hashed {
		return sessionHash(raw) == string(v.paused)
	}
	return bytes.Equal(raw, v.paused)
}

// canonicalValue is the canonical JSON of a session field's value, for
// telling values apart: its encoding decoded as JSON and encoded again,
// so that a value held in memory as written (a struct inside an any, a
// string with invalid UTF-8) compares equal to the same value decoded
// from the store (a map, its keys sorted; U+FFFD). Numbers keep their
// text.
func canonicalValue(v any) ([]byte, error) {
	raw, err := encodeValue(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return json.Marshal(x)
}

// sessionHash is the hash a checkpoint records of a session field's
// encoding (CheckpointSession.Values): hex SHA-256.
func sessionHash(raw []byte) string {
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:])
}

// newRebase compares the paused state with the stored session and
// returns the rebase to apply, or nil when the session is as it was at
// the suspension (the paused state was written with it, atomically: a
// difference is another invocation's write).
func (s *sessions) newRebase(schema *Schema, paused State, at loaded) *rebase {
	if !at.exists || at.state.IsZero() {
		return nil
	}
	var r *rebase
	for _, i := range s.fields {
		f := schema.fields[i]
		if !appendOnly(f.reducer) {
			pv, sv := unwrapList(paused.vals[i]), unwrapList(at.state.vals[i])
			praw, perr := canonicalValue(pv)
			sraw, serr := canonicalValue(sv)
			if perr != nil || serr != nil || bytes.Equal(praw, sraw) {
				continue
			}
			if r == nil {
				r = &rebase{}
			}
			r.values = append(r.values, rebaseValue{index: i, paused: praw, stored: at.state.vals[i], storedRaw: sraw})
			continue
		}
		pl := listLen(unwrapList(paused.vals[i]))
		ls, ok := at.list(f.name)
		sl := ls.n
		if !ok {
			sl = listLen(unwrapList(at.state.vals[i]))
		}
		if pl < 0 || sl < 0 || pl == sl {
			continue
		}
		if r == nil {
			r = &rebase{}
		}
		r.fields = append(r.fields, rebaseField{index: i, paused: pl, stored: at.state.vals[i]})
	}
	return r
}

// newCheckpointRebase is newRebase for a run resumed from a checkpoint
// (ResumeCheckpoint), whose saved state is not the session as stored: it
// holds what the invocation loaded plus what it had added when the
// checkpoint was saved, none of it necessarily stored. basis is what the
// record says the invocation had loaded (CheckpointRecord.Session).
//
// Each append-only list keeps the stored items; the checkpoint's items
// past the length the invocation loaded are its own, merged after them
// through the field's reducer. Each other field the session changed
// since the invocation loaded it keeps its stored value unless the
// resumed run writes it (its value differs from the one loaded); when it
// does, with SessionConfig.Optimistic the write fails with
// session_write_conflict, and otherwise the run's value wins — as for a
// suspension's resume (see RefuseStaleResume).
//
// A record written before checkpoints recorded their session basis (nil
// basis), or one whose state was migrated from another schema version
// (migrated), falls back to guessing: the items a list of the checkpoint
// and the stored one begin with (by encoding) count as the session the
// invocation built on, the checkpoint's items after them as its own (so
// an item it added that equals the one another turn stored in its place
// counts as stored), and other fields are the resumed run's to write
// (last write wins). So does a list field the basis does not name.
func (s *sessions) newCheckpointRebase(schema *Schema, saved State, at loaded, basis *CheckpointSession, migrated bool) *rebase {
	if !at.exists || at.state.IsZero() {
		return nil
	}
	if migrated {
		basis = nil
	}
	r := &rebase{}
	for _, i := range s.fields {
		f := schema.fields[i]
		if !appendOnly(f.reducer) {
			if basis == nil {
				continue
			}
			h, ok := basis.Values[f.name]
			if !ok {
				continue
			}
			sraw, err := canonicalValue(unwrapList(at.state.vals[i]))
			if err != nil || sessionHash(sraw) == h {
				continue // as the invocation loaded it
			}
			r.values = append(r.values, rebaseValue{index: i, paused: []byte(h), hashed: true, stored: at.state.vals[i], storedRaw: sraw})
			continue
		}
		cur := reflect.ValueOf(unwrapList(saved.vals[i]))
		stored := reflect.ValueOf(unwrapList(at.state.vals[i]))
		if !cur.IsValid() || cur.Kind() != reflect.Slice || !stored.IsValid() || stored.Kind() != reflect.Slice || cur.Type() != stored.Type() {
			continue
		}
		if basis != nil {
			// n may exceed the record's list: an interim save
			// (SaveSession) of the node the record reruns stored items
			// the record's state (the node's input) does not hold; the
			// rerun's own are those past n.
			if n, ok := basis.Lists[f.name]; ok && n >= 0 {
				if n == stored.Len() {
					continue // the session's list is the one loaded: the save appends
				}
				r.fields = append(r.fields, rebaseField{index: i, paused: n, stored: at.state.vals[i]})
				continue
			}
		}
		k := commonPrefix(cur, stored)
		if k == stored.Len() {
			continue // the checkpoint's list extends the stored one: the save appends
		}
		r.fields = append(r.fields, rebaseField{index: i, paused: k, stored: at.state.vals[i]})
	}
	if len(r.fields) == 0 && len(r.values) == 0 {
		return nil
	}
	return r
}

// commonPrefix returns how many leading items lists a and b share (by
// their JSON encodings, as stored).
func commonPrefix(a, b reflect.Value) int {
	n := min(a.Len(), b.Len())
	for j := range n {
		x, errX := json.Marshal(a.Index(j).Interface())
		y, errY := json.Marshal(b.Index(j).Interface())
		if errX != nil || errY != nil || !bytes.Equal(x, y) {
			return j
		}
	}
	return n
}

// stale reports whether a list of the session changed after the
// suspension (RefuseStaleResume).
func (r *rebase) stale() bool {
	return r != nil && len(r.fields) > 0
}

// apply returns st with each rebased list replaced by the stored list
// with st's items past the paused length merged into it through the
// field's reducer (a dedupe_append field keeps no item twice), and each
// rebased value st holds as paused replaced by the stored one.
func (r *rebase) apply(st State) State {
	if r == nil || st.IsZero() {
		return st
	}
	vals := slices.Clone(st.vals)
	for _, f := range r.fields {
		cur := reflect.ValueOf(unwrapList(vals[f.index]))
		stored := reflect.ValueOf(unwrapList(f.stored))
		if !cur.IsValid() || cur.Kind() != reflect.Slice || !stored.IsValid() || stored.Kind() != reflect.Slice {
			continue
		}
		var added reflect.Value
		if cur.Len() > f.paused {
			added = cur.Slice(f.paused, cur.Len())
		}
		vals[f.index] = remerge(st.schema, f.index, f.stored, stored, added)
	}
	for _, v := range r.values {
		if raw, err := canonicalValue(unwrapList(vals[v.index])); err == nil && v.isPaused(raw) {
			vals[v.index] = v.stored // the resumed run did not write it
		}
	}
	return State{schema: st.schema, vals: vals}
}

// remerge merges the items a resumed run added to the append-only list
// field i (added, invalid for none) into its stored value (prior, whose
// list is stored) through the field's bound reducer, as the run's own
// updates were merged. A reducer that fails (a key function erring on
// items it keyed before) leaves the items appended as they are.
func remerge(schema *Schema, i int, prior any, stored, added reflect.Value) any {
	if !added.IsValid() || added.Len() == 0 {
		return prior
	}
	upd := added.Interface()
	if schema.fields[i].reducer.Name() == ReducerConcatFlatten {
		upd = []any{upd} // its update is a list of lists
	}
	if out, err := schema.reduce[i](prior, upd); err == nil {
		return out
	}
	out := reflect.MakeSlice(stored.Type(), 0, stored.Len()+added.Len())
	out = reflect.AppendSlice(out, stored)
	return reflect.AppendSlice(out, added).Interface()
}

// conflict returns the session_write_conflict (under Optimistic) of a
// rebased state st that writes a field the session changed after the
// suspension with a third value: the resumed run would overwrite a
// write it never saw, the lost update optimistic concurrency refuses
// (sessions §8.2). Nil when no such field.
func (r *rebase) conflict(st State) error {
	if r == nil || st.IsZero() {
		return nil
	}
	for _, v := range r.values {
		raw, err := canonicalValue(unwrapList(st.vals[v.index]))
		if err != nil || bytes.Equal(raw, v.storedRaw) || v.isPaused(raw) {
			continue
		}
		return fmt.Errorf("%w: field %q was written by the resumed run and, after the suspension, by another invocation",
			session.ErrWriteConflict, st.schema.fields[v.index].name)
	}
	return nil
}

// checkpointBasis returns what a checkpoint saved now records of the
// session (CheckpointRecord.Session), in the coordinates of the run's
// state: per append-only list, how many of its leading items the session
// stores; per other field, the hash of the value the run's state would
// hold had the run not written it. Computed once per stored basis (a
// write, or an interim save of a rebased run, recomputes it), so only
// checkpointing invocations pay for it.
func (b *binding) checkpointBasis(schema *Schema) *CheckpointSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.basis != nil {
		return b.basis
	}
	out := &CheckpointSession{Lists: map[string]int{}, Values: map[string]string{}}
	for _, i := range b.s.fields {
		f := schema.fields[i]
		if appendOnly(f.reducer) {
			var n int
			if rf := b.rebase.field(i); rf != nil {
				n = max(rf.paused, b.savedThrough[i])
			} else if ls, ok := b.at.list(f.name); ok {
				n = ls.n
			} else {
				// Not stored: the run began with the default, as any
				// other turn on the session did.
				n = listLen(unwrapList(b.loadedValue(schema, i)))
			}
			if n >= 0 {
				out.Lists[f.name] = n
			}
			continue
		}
		if rv := b.rebase.value(i); rv != nil {
			h := string(rv.paused)
			if !rv.hashed {
				h = sessionHash(rv.paused)
			}
			out.Values[f.name] = h
			continue
		}
		if raw, err := canonicalValue(unwrapList(b.loadedValue(schema, i))); err == nil {
			out.Values[f.name] = sessionHash(raw)
		}
	}
	b.basis = out
	return out
}

// loadedValue returns field i as the binding's basis holds it: the
// schema's default when the session has no record.
func (b *binding) loadedValue(schema *Schema, i int) any {
	if b.at.exists && !b.at.state.IsZero() {
		return b.at.state.vals[i]
	}
	return schema.defaults[i]
}

// savedInterim notes an interim save (SaveSession) of the run's state st
// by a rebased binding: the items of st's rebased lists are stored, so a
// checkpoint saved after it counts them in its basis. Called with b.mu
// held.
func (b *binding) savedInterim(st State) {
	if b.rebase == nil || st.IsZero() {
		return
	}
	for _, f := range b.rebase.fields {
		if b.savedThrough == nil {
			b.savedThrough = map[int]int{}
		}
		b.savedThrough[f.index] = max(f.paused, listLen(unwrapList(st.vals[f.index])))
	}
	b.basis = nil
}

// field returns the rebase of list field i, or nil.
func (r *rebase) field(i int) *rebaseField {
	if r == nil {
		return nil
	}
	for k := range r.fields {
		if r.fields[k].index == i {
			return &r.fields[k]
		}
	}
	return nil
}

// value returns the rebase of value field i, or nil.
func (r *rebase) value(i int) *rebaseValue {
	if r == nil {
		return nil
	}
	for k := range r.values {
		if r.values[k].index == i {
			return &r.values[k]
		}
	}
	return nil
}

// staleResume fails a resume refused by RefuseStaleResume and retires
// its paused record.
func (g *Graph) staleResume(ctx context.Context, key checkpoint.Key, res *Result) (*Result, error) {
	_ = g.checkpoints.Delete(context.WithoutCancel(ctx), key)
	err := &SuspensionError{cat: errcat.SuspensionRecordInvalid, InvocationID: key.InvocationID,
		Err: fmt.Errorf("%w: the suspension was superseded", ErrStaleResume)}
	res.Status, res.Err = Errored, err
	return res, err
}

// SessionStore returns the session store registered with WithSessions,
// or nil.
func (g *Graph) SessionStore() session.Store {
	if g == nil || g.sess == nil {
		return nil
	}
	return g.sess.cfg.Store
}

// SessionState returns the session's state as stored: the schema's
// defaults overlaid with the session fields (the defaults alone when the
// session has no record). A warm session costs a version check, not a
// read of its history. It fails with ErrInvalidOption when the graph has
// no session store, and with a *SessionError when the store fails.
func (g *Graph) SessionState(ctx context.Context, sessionID string) (State, error) {
	if g == nil {
		return State{}, ErrNilGraph
	}
	if g.sess == nil {
		return State{}, invalidOption("SessionState on a graph without sessions")
	}
	if err := session.ValidateID(sessionID); err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	st, _, err := g.sess.load(ctx, g.schema, sessionID, false)
	return st, err
}

// SessionVersionHint returns the version of the session this graph last
// loaded or wrote, from its session cache (0 when it holds none). It is a
// hint, not a read: another writer may have stored a newer version since
// (an invocation's load revalidates it). The chat harness uses it to
// look up a retransmitted message's mark without a read
// (session.VersionedMarker).
func (g *Graph) SessionVersionHint(sessionID string) int64 {
	if g == nil || g.sess == nil {
		return 0
	}
	at, ok := g.sess.cache.get(g.sess, sessionID)
	if !ok || !at.exists {
		return 0
	}
	return at.version
}

// DeleteSession deletes the session's record (with its marks) and the
// paused and checkpoint records of its invocations, so that no signal
// can resume a turn of it and no retransmission replay one. With a store
// that keeps sessions and records in one transactional domain (the
// embedded SQLite store) the session store's Delete removes both at
// once; otherwise the records are deleted from the checkpoint store
// after the session. Once the session's record is deleted, what the
// graph's nodes keep in memory of the session is dropped
// ([WithSessionForget], of this graph and its subgraphs). Callers
// serialize it with the session's turns (the chat harness deletes under
// the session's lock).
func (g *Graph) DeleteSession(ctx context.Context, sessionID string) error {
	if g == nil {
		return ErrNilGraph
	}
	if g.sess == nil {
		return invalidOption("DeleteSession on a graph without sessions")
	}
	if err := session.ValidateID(sessionID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	g.sess.cache.drop(g.sess, sessionID)
	if err := g.sess.cfg.Store.Delete(ctx, sessionID); err != nil {
		return &SessionError{cat: errcat.SessionSaveFailed, SessionID: sessionID, Err: err}
	}
	g.sess.cache.drop(g.sess, sessionID)
	g.forgetSession(ctx, sessionID)
	if g.sessionWriter() != nil {
		return nil // deleted with the session
	}
	for _, kind := range []checkpoint.Kind{checkpoint.KindSuspended, checkpoint.KindCheckpoint} {
		for {
			resp, err := g.checkpoints.List(ctx, checkpoint.ListRequest{Kind: kind, SessionID: sessionID, PageSize: 1000})
			if err != nil {
				return &SessionError{cat: errcat.SessionSaveFailed, SessionID: sessionID, Err: err}
			}
			for _, r := range resp.Records {
				if err := g.checkpoints.Delete(ctx, checkpoint.Key{InvocationID: r.InvocationID, Kind: kind}); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					return &SessionError{cat: errcat.SessionSaveFailed, SessionID: sessionID, Err: err}
				}
			}
			if len(resp.Records) == 0 || resp.NextPageToken == "" {
				break
			}
		}
	}
	return nil
}

// forgetSession calls the WithSessionForget functions of g and of every
// graph it runs as a subgraph. A function that panics is a defect of its
// own: the panic is logged (with its stack) and the delete goes on, so
// that it never stops half done, the session deleted and its paused and
// checkpoint records, and the other functions' memory, left behind.
func (g *Graph) forgetSession(ctx context.Context, sessionID string) {
	for _, sub := range g.graphs {
		for _, f := range sub.forget {
			if p := callForget(f, sessionID); p != nil {
				g.logger.LogAttrs(ctx, slog.LevelError, "graph: a WithSessionForget function panicked; the delete went on",
					slog.String("session_id", sessionID), slog.Any("panic", p.Value), slog.String("stack", string(p.Stack)))
			}
		}
	}
}

// callForget calls f, returning its panic, if any.
func callForget(f func(string), sessionID string) (perr *PanicError) {
	defer func() {
		if p := recover(); p != nil {
			perr = newPanicError(p)
		}
	}()
	f(sessionID)
	return nil
}

// RetireSuspension deletes a paused invocation's record without resuming
// it: a later Resume fails with suspension_record_invalid. Retiring a
// record that is gone succeeds.
func (g *Graph) RetireSuspension(ctx context.Context, invocationID string) error {
	if g == nil {
		return ErrNilGraph
	}
	err := g.checkpoints.Delete(ctx, checkpoint.Key{InvocationID: invocationID, Kind: checkpoint.KindSuspended})
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		return &SuspensionError{cat: errcat.SuspensionPersistenceFailed, InvocationID: invocationID, Err: err}
	}
	return nil
}
