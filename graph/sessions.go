package graph

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/session"
)

// SessionConfig connects a graph to a session store (the sessions
// capability): invocations given a session id ([WithSessionID]) load the
// session's state at entry and save it at End.
type SessionConfig struct {
	// Store persists the sessions. Required.
	Store session.Store
	// Fields is the session projection: the state fields loaded and saved.
	// Nil persists every field (a full-state session); a projection keeps
	// per-invocation scratch fields out of the record (sessions §4.2).
	Fields []string
	// SchemaVersion labels the records this graph writes; a record stored
	// under another version is migrated at load through Migrations.
	SchemaVersion string
	Migrations    []migrate.Migration
	// DisableAutoSave turns off the save at End; sessions then persist
	// only through [SaveSession].
	DisableAutoSave bool
	// Optimistic makes concurrent writers of one session conflict: the
	// later save fails with session_write_conflict. The default is
	// last-write-wins (sessions §8.1).
	Optimistic bool
	// CacheSize bounds the decoded sessions kept in memory, so a warm turn
	// checks the stored version instead of re-reading the history.
	// 0 means 1024; negative disables the cache. Ignored when Cache is set.
	CacheSize int
	// CacheBytes bounds the same cache by the sessions' encoded size (the
	// JSON the store holds for their session fields; the decoded values
	// take about as much again). The least recently used sessions are
	// evicted beyond it, and a session larger than the whole budget is
	// not cached: its turns re-read it. 0 means 64 MiB; negative means no
	// byte bound. Ignored when Cache is set.
	CacheBytes int64
	// Cache, when set, is a cache shared with other graphs (one budget
	// for every agent of a server); see [NewSessionCache].
	Cache *SessionCache
	// Tail names append-only list fields (a reducer that only appends:
	// append, dedupe_append, concat_flatten) of which an invocation that
	// loads its session from the store reads only the last Max items
	// (session.ListTail): a cold session's turn then costs the tail, not
	// the whole history. The invocation's state holds the tail alone;
	// [SessionListOffset] tells nodes how many items precede it, so that
	// an index they persist stays absolute. The Store must be a
	// session.Appender (a turn appends to the partial list as to a whole
	// one).
	//
	// A write that would replace a partial list (a whole-record save in
	// a last-write-wins race, a list that is not extended but changed)
	// first reads the record whole and puts the left-out items back in
	// front; it fails with session_write_conflict when they are no
	// longer there (the list was replaced meanwhile, the session
	// deleted). A suspension stores its paused state whole, so a resumed
	// run sees the whole history. The hint is not used by resumed runs,
	// by SessionState, on a graph with a checkpointer, or for a record
	// that needs a migration: those load the session whole.
	Tail []session.ListTail
}

// WithSessions registers session persistence on the compiled graph. The
// configuration is checked at compile time: Store is required, Fields
// must be declared, and duplicate migrations fail with
// session_state_migration_chain_ambiguous.
func WithSessions(cfg SessionConfig) CompileOption {
	return func(c *compileConfig) { c.sessions = &cfg }
}

// WithSessionTail hints that a fresh invocation needs only the last
// items of these list fields of its session (what an agent whose context
// window sends a bounded part of its history declares): they are added
// to the SessionConfig.Tail of WithSessions when they can be honoured —
// the store is a session.Appender and the field an append-only session
// field that Tail does not already name — and are ignored otherwise,
// as they are on a graph without sessions. See SessionConfig.Tail.
func WithSessionTail(tails ...session.ListTail) CompileOption {
	return func(c *compileConfig) { c.tailHints = append(c.tailHints, tails...) }
}

// WithSessionForget registers forget, which drops what the graph's
// nodes keep in memory of a session outside its state (a cache keyed by
// the session id, such as an agent's index of the session's tool-call
// ids): [Graph.DeleteSession] calls it with the session's id once the
// session's record is deleted, so that a deleted session's data does not
// linger in the process, and a session created again under the same id
// starts with none of it. The DeleteSession of a graph that runs this one
// as a subgraph (a subgraph node, a fan-out or a parallel branch) calls
// it too: a subgraph's nodes see the outer invocation's session id
// ([SessionID]). The chat harness deletes every session through
// DeleteSession (chat.Harness.Delete and DeleteLocked).
//
// forget is called under the caller's serialization of the session
// (the chat harness's session lock: no turn of the session runs), after
// the session store's delete succeeded and before the session's paused
// and checkpoint records are deleted; it must be quick and must not
// block or fail. A forget that panics does not stop the delete: the
// panic is logged at level ERROR through the graph's logger
// ([WithLogger]), and the other functions and the rest of the delete
// run. Several options accumulate, called in the order given; a nil
// forget is ignored.
func WithSessionForget(forget func(sessionID string)) CompileOption {
	return func(c *compileConfig) {
		if forget != nil {
			c.forget = append(c.forget, forget)
		}
	}
}

// mergeTailHints returns cfg.Tail with the hints that can be honoured
// added.
func mergeTailHints(cfg SessionConfig, schema *Schema, hints []session.ListTail) []session.ListTail {
	if len(hints) == 0 {
		return cfg.Tail
	}
	if _, ok := cfg.Store.(session.Appender); !ok {
		return cfg.Tail
	}
	out := slices.Clone(cfg.Tail)
	for _, h := range hints {
		i, ok := schema.index[h.Field]
		if !ok || h.Max < 1 || !appendOnly(schema.fields[i].reducer) ||
			(cfg.Fields != nil && !slices.Contains(cfg.Fields, h.Field)) ||
			slices.ContainsFunc(out, func(t session.ListTail) bool { return t.Field == h.Field }) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// SessionWholeState returns st, the state of the current node (the
// outermost graph's), with the items that its tail load left out of
// the session's list fields put back in front, read from the store
// (SessionConfig.Tail); st itself when nothing was left out. The result
// is for reading: the node's update stays relative to st (an appending
// reducer's update appends in either). It fails with
// session_write_conflict when the left-out items are no longer stored,
// with ErrInvalidOption outside a session-bound invocation's outermost
// graph.
func SessionWholeState(ctx context.Context, st State) (State, error) {
	sc := scopeFrom(ctx)
	if sc == nil || sc.inv.sess == nil {
		return State{}, invalidOption("SessionWholeState outside a session-bound invocation")
	}
	if st.schema != sc.inv.g.schema {
		return State{}, invalidOption("SessionWholeState of a state that is not the outermost graph's")
	}
	return sc.inv.sess.whole(ctx, st)
}

// WithSessionID binds the invocation to a session. Without a session
// store registered on the graph it is only carried in the context
// ([SessionID]).
func WithSessionID(id string) InvokeOption {
	return func(c *invokeConfig) error {
		if err := session.ValidateID(id); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		c.sessionID = id
		return nil
	}
}

// SessionID returns the session id of the invocation ctx belongs to, or "".
func SessionID(ctx context.Context) string {
	if s := scopeFrom(ctx); s != nil {
		return s.inv.sessionID
	}
	return ""
}

// SessionListOffset returns how many leading items of the session list
// field the invocation ctx belongs to left out of its state, having
// loaded the field by its tail (SessionConfig.Tail): item i of the list
// in the state is item offset+i of the stored list. It is 0 when the
// field was loaded whole, outside a session-bound invocation, and for a
// field that is not a session list. The offset holds for the whole
// invocation: a node that persists an index into the list (in state, a
// mark, an external record) adds it to keep the index absolute.
func SessionListOffset(ctx context.Context, field string) int {
	sc := scopeFrom(ctx)
	if sc == nil || sc.inv.sess == nil {
		return 0
	}
	return sc.inv.sess.offset(field)
}

// offsets returns the items left out of each partially loaded list
// field, or nil when the binding is whole.
func (b *binding) offsets() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at.offsets()
}

// offsets returns the items left out of each partially loaded list
// field, or nil when none is.
func (at *loaded) offsets() map[string]int {
	var m map[string]int
	for _, l := range at.lists {
		if l.skip > 0 {
			if m == nil {
				m = map[string]int{}
			}
			m[l.name] = l.skip
		}
	}
	return m
}

// offset returns the items left out of list field name by the load.
func (b *binding) offset(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, _ := b.at.list(name)
	return l.skip
}

// SessionError reports a failed session load or save: session_load_failed,
// session_save_failed, or session_write_conflict for an optimistic save
// that lost a race. The store's error is the cause.
type SessionError struct {
	cat       errcat.Category
	SessionID string
	Err       error
}

// Category returns the error's category.
func (e *SessionError) Category() errcat.Category { return e.cat }

// Error formats the failure.
func (e *SessionError) Error() string {
	return fmt.Sprintf("graph: %s: session %q: %v", e.cat, e.SessionID, e.Err)
}

// Message returns the error's own message.
func (e *SessionError) Message() string { return fmt.Sprintf("%s: session %q", e.cat, e.SessionID) }

// Unwrap returns the store's error.
func (e *SessionError) Unwrap() error { return e.Err }

// Is matches the error's category.
func (e *SessionError) Is(target error) bool { return errcat.Matches(e.cat, target) }

// sessions is a graph's compiled session configuration.
type sessions struct {
	cfg      SessionConfig
	tail     []session.ListTail // the validated hints; nil for none
	appender session.Appender
	fields   []int // schema indices of the persisted fields
	registry *migrate.Registry
	cache    *SessionCache
}

func compileSessions(cfg SessionConfig, schema *Schema) (*sessions, error) {
	if cfg.Store == nil {
		return nil, compileErr(errcat.InvalidGraph, "", "", "sessions: a Store is required")
	}
	s := &sessions{cfg: cfg}
	s.appender, _ = cfg.Store.(session.Appender)
	names := cfg.Fields
	if names == nil {
		names = schema.Fields()
	}
	for _, f := range names {
		i, ok := schema.index[f]
		if !ok {
			return nil, compileErr(errcat.MappingReferencesUndeclaredField, "", f, "session field %q is not declared in the schema", f)
		}
		s.fields = append(s.fields, i)
	}
	for i, t := range cfg.Tail {
		j, ok := schema.index[t.Field]
		switch {
		case !ok || !slices.Contains(s.fields, j):
			return nil, compileErr(errcat.InvalidGraph, "", t.Field, "sessions: tail field %q is not a session field", t.Field)
		case !appendOnly(schema.fields[j].reducer):
			return nil, compileErr(errcat.InvalidGraph, "", t.Field, "sessions: tail field %q is not an append-only list (its reducer is %s)", t.Field, schema.fields[j].reducer.Name())
		case s.appender == nil:
			return nil, compileErr(errcat.InvalidGraph, "", t.Field, "sessions: a tail load needs a store that is a session.Appender")
		}
		if err := session.ValidateTail(cfg.Tail[:i+1]); err != nil {
			return nil, compileErr(errcat.InvalidGraph, "", t.Field, "sessions: %v", err)
		}
	}
	s.tail = slices.Clone(cfg.Tail)
	reg, err := migrate.NewRegistry(migrate.Session, cfg.Migrations...)
	if err != nil {
		return nil, err
	}
	s.registry = reg
	switch {
	case cfg.Cache != nil:
		s.cache = cfg.Cache
	case cfg.CacheSize >= 0:
		s.cache = NewSessionCache(cfg.CacheSize, cfg.CacheBytes)
	}
	return s, nil
}

// loaded is what an invocation knows about its session's stored record:
// the basis the save at End writes a delta against.
type loaded struct {
	exists  bool
	version int64
	// updated is the stored record's UpdatedAt at version: with it, a
	// conditional load tells this copy from a session deleted and
	// written again to the same version (session.LoadRequest.IfUpdatedAt).
	updated time.Time
	schema  string
	state   State      // the session fields as stored
	enc     []fieldEnc // their stored encodings (non-list fields)
	lists   []listStat // appendable list fields as stored
	// size is the encoded size of the session fields as stored, kept
	// up to date from each write's delta: the cache's byte measure.
	size int64
	// written reports that this graph wrote this version itself, and
	// suspended that the write was a suspension's: a session this graph
	// last wrote without suspending has no suspended invocation.
	written, suspended bool
}

// listStat is an appendable list field as stored: its length and its
// encoded size. A schema has few such fields: a slice searched in order
// costs a turn less than a map. A field loaded by its tail
// (SessionConfig.Tail) counts in the coordinates of the invocation's
// state: skip items precede the n the state holds (n + skip are stored),
// and size is the tail's.
type listStat struct {
	name string
	n    int
	skip int
	size int64
}

// fieldEnc is a non-list field's stored encoding. A schema has few such
// fields: a slice searched in order costs a turn less than a map.
type fieldEnc struct {
	name string
	raw  json.RawMessage
}

// partial reports whether a list field was loaded by its tail with items
// left out.
func (at *loaded) partial() bool {
	for _, l := range at.lists {
		if l.skip > 0 {
			return true
		}
	}
	return false
}

// list returns the stored form of the appendable list field name.
func (at *loaded) list(name string) (listStat, bool) {
	for _, l := range at.lists {
		if l.name == name {
			return l, true
		}
	}
	return listStat{}, false
}

// setEnc records a non-list field's stored encoding.
func (at *loaded) setEnc(name string, raw json.RawMessage) {
	for i := range at.enc {
		if at.enc[i].name == name {
			at.enc[i].raw = raw
			return
		}
	}
	at.enc = append(at.enc, fieldEnc{name, raw})
}

// encOf returns a non-list field's stored encoding.
func (at *loaded) encOf(name string) (json.RawMessage, bool) {
	for _, e := range at.enc {
		if e.name == name {
			return e.raw, true
		}
	}
	return nil, false
}

// setSkip records that the first k items of list field name were left
// out of the state.
func (at *loaded) setSkip(name string, k int) {
	for i := range at.lists {
		if at.lists[i].name == name {
			at.lists[i].skip = k
			return
		}
	}
}

// setList records an appendable list field's stored length and size.
func (at *loaded) setList(name string, n int, size int64) {
	for i := range at.lists {
		if at.lists[i].name == name {
			at.lists[i].n, at.lists[i].size = n, size
			return
		}
	}
	at.lists = append(at.lists, listStat{name: name, n: n, size: size})
}

// binding is an invocation's live session.
type binding struct {
	s  *sessions
	id string
	// inv is the invocation's id, given to the marks function.
	inv string
	mu  sync.Mutex
	at  loaded
	// forceWrite makes write call exec even when nothing changed.
	forceWrite bool
	// check vets every write (WithSessionCheck); marks are recorded with
	// the final one (WithSessionMarks).
	check SessionCheck
	marks SessionMarks
	// hooks are the check and the marks when given as one value
	// (WithSessionHooks); check and marks take precedence.
	hooks SessionHooks
	// rebase maps a resumed run's states onto the session as stored;
	// resumed marks a resumed run's binding, whose writes never fall
	// back to a whole-record save.
	rebase  *rebase
	resumed bool
	// basis is what a checkpoint saved now records of the session
	// (checkpointBasis), computed on a checkpointing invocation's first
	// save and again after each write; savedThrough counts, per rebased
	// list field, the run's items an interim save stored.
	basis        *CheckpointSession
	savedThrough map[int]int
}

// load reads (or revalidates) the session and returns the invocation's
// starting state: defaults, overlaid with the stored session fields.
// With tail, list fields named by SessionConfig.Tail may be loaded by
// their tails (a partial state, see listStat); without, the state is
// whole (a partial cached copy is not used).
func (s *sessions) load(ctx context.Context, schema *Schema, id string, tail bool) (State, loaded, error) {
	var cached *loaded
	req := session.LoadRequest{SessionID: id}
	if tail {
		req.Tail = s.tail
	}
	if s.cache != nil {
		if c, ok := s.cache.get(s, id); ok && (tail || !c.partial()) {
			cached, req.IfVersionNot, req.IfUpdatedAt = &c, c.version, c.updated
		}
	}
	rec, err := s.cfg.Store.Load(ctx, req)
	if err == nil && rec.Partial() && rec.SchemaVersion != s.cfg.SchemaVersion {
		// A migration transforms the record whole: read it whole.
		req.Tail, req.IfVersionNot, req.IfUpdatedAt = nil, 0, time.Time{}
		rec, err = s.cfg.Store.Load(ctx, req)
	}
	switch {
	case errors.Is(err, session.ErrNotModified) && cached != nil:
		return s.overlay(schema, cached.state), *cached, nil
	case errors.Is(err, session.ErrNotFound):
		s.cache.drop(s, id)
		return schema.Defaults(), loaded{}, nil
	case err != nil && ctx.Err() != nil:
		// The caller's cancellation or deadline ended the read: the
		// invocation was cancelled (retryable), the session is fine.
		return State{}, loaded{}, errcat.Wrap(errcat.InvocationCancelled, fmt.Sprintf("graph: the invocation was cancelled while session %q loaded", id), err)
	case err != nil && session.Unavailable(err):
		// The store could not be reached: the session is intact, and the
		// turn may be sent again (session_store_unavailable, retryable).
		return State{}, loaded{}, &SessionError{cat: errcat.SessionStoreUnavailable, SessionID: id, Err: err}
	case err != nil:
		return State{}, loaded{}, &SessionError{cat: errcat.SessionLoadFailed, SessionID: id, Err: err}
	}
	fields := rec.State
	if rec.SchemaVersion != s.cfg.SchemaVersion {
		if fields, err = s.migrate(rec); err != nil {
			return State{}, loaded{}, err
		}
	}
	at := loaded{exists: true, version: rec.Version, updated: rec.UpdatedAt, schema: rec.SchemaVersion}
	vals := slices.Clone(schema.defaults)
	for _, i := range s.fields {
		f := schema.fields[i]
		raw, ok := fields[f.name]
		if !ok {
			continue
		}
		at.size += int64(len(raw))
		v, err := decodeValue(f.typ, raw)
		if err != nil {
			return State{}, loaded{}, &SessionError{cat: errcat.SessionLoadFailed, SessionID: id,
				Err: &StateError{Field: f.name, Err: fmt.Errorf("stored value: %w", err)}}
		}
		vals[i] = v
		at.note(f, v, raw)
		if k := rec.Skipped[f.name]; k > 0 {
			if !appendOnly(f.reducer) || req.TailMax(f.name) == 0 {
				return State{}, loaded{}, &SessionError{cat: errcat.SessionLoadFailed, SessionID: id,
					Err: fmt.Errorf("the store left %d items out of field %q, which the load asked whole", k, f.name)}
			}
			at.setSkip(f.name, k)
		}
	}
	at.state = State{schema: schema, vals: vals}
	return at.state, at, nil
}

// overlay returns the defaults overlaid with the session fields of st.
func (s *sessions) overlay(schema *Schema, st State) State {
	vals := slices.Clone(schema.defaults)
	for _, i := range s.fields {
		vals[i] = st.vals[i]
	}
	return State{schema: schema, vals: vals}
}

// note records a field's stored form for delta computation.
func (at *loaded) note(f *fieldSpec, v any, raw json.RawMessage) {
	if appendOnly(f.reducer) {
		at.setList(f.name, listLen(v), int64(len(raw)))
		return
	}
	at.setEnc(f.name, raw)
}

func (s *sessions) migrate(rec *session.Record) (map[string]json.RawMessage, error) {
	tree, err := decodeStructuralFields(rec.State)
	if err != nil {
		return nil, &SessionError{cat: errcat.SessionLoadFailed, SessionID: rec.SessionID, Err: err}
	}
	out, err := s.registry.Apply(tree, rec.SchemaVersion, s.cfg.SchemaVersion)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]json.RawMessage, len(out))
	for k, v := range out {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &SessionError{cat: errcat.SessionLoadFailed, SessionID: rec.SessionID, Err: fmt.Errorf("migrated field %q: %w", k, err)}
		}
		fields[k] = b
	}
	return fields, nil
}

// appendOnly reports reducers whose merges only ever add items at the end
// of a list, so a save can persist just the new items.
func appendOnly(r Reducer) bool {
	switch r.Name() {
	case ReducerAppend, ReducerDedupeAppend, ReducerConcatFlatten:
		return true
	}
	return false
}

func listLen(v any) int {
	if v == nil {
		return 0
	}
	rv := reflect.ValueOf(unwrapList(v))
	if rv.IsValid() && (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) {
		return rv.Len()
	}
	return -1
}

// sessionWrite is a planned session write: a delta append or a full save.
type sessionWrite struct {
	save      *session.SaveRequest
	appendReq *session.AppendRequest
	next      loaded // the basis after the write
}

// errNeedWhole is plan's answer when the write would replace a list
// field loaded by its tail: planWhole must read the left-out items first.
var errNeedWhole = errors.New("graph: the write replaces a partially loaded list")

// errPrefixGone fails a write that needs a partially loaded list whole
// when the items left out of it are no longer stored (the list was
// replaced, or the session deleted): session_write_conflict.
var errPrefixGone = fmt.Errorf("%w: the items before the loaded tail are gone", session.ErrWriteConflict)

// plan computes the write that persists the session fields of st: a delta
// append when the store supports it and the record is known (full is
// false), a full save otherwise. A nil write means nothing changed. It
// fails with errNeedWhole when the binding is partial (see listStat) and
// the write would replace a partial list or the whole record.
func (b *binding) plan(st State, full bool) (*sessionWrite, error) {
	s, schema := b.s, st.schema
	next := loaded{exists: true, schema: s.cfg.SchemaVersion}
	if !full && s.appender != nil && b.at.exists && b.at.schema == s.cfg.SchemaVersion {
		req := session.AppendRequest{SessionID: b.id, SchemaVersion: s.cfg.SchemaVersion, ExpectedVersion: b.at.version}
		next.size = b.at.size
		for _, i := range s.fields {
			f := schema.fields[i]
			v := unwrapList(st.vals[i])
			if appendOnly(f.reducer) {
				was, _ := b.at.list(f.name)
				items, good := newItems(v, was.n)
				if !good && was.skip > 0 {
					return nil, errNeedWhole
				}
				if good {
					if len(items) > 0 {
						if req.Append == nil {
							req.Append = map[string][]json.RawMessage{}
						}
						req.Append[f.name] = items
					}
					grown := was.size
					for _, it := range items {
						grown += int64(len(it)) + 1 // and its comma
					}
					next.size += grown - was.size
					next.setList(f.name, listLen(v), grown)
					next.setSkip(f.name, was.skip)
					continue
				}
			}
			raw, err := encodeValue(v)
			if err != nil {
				return nil, fmt.Errorf("encoding field %q: %w", f.name, err)
			}
			if appendOnly(f.reducer) {
				next.setList(f.name, listLen(v), int64(len(raw)))
			} else {
				next.setEnc(f.name, raw)
			}
			if prev, had := b.at.encOf(f.name); !had || !bytes.Equal(prev, raw) || appendOnly(f.reducer) {
				if appendOnly(f.reducer) {
					was, _ := b.at.list(f.name)
					next.size += int64(len(raw)) - was.size
				} else {
					next.size += int64(len(raw) - len(prev))
				}
				if req.Set == nil {
					req.Set = map[string]json.RawMessage{}
				}
				req.Set[f.name] = raw
			}
		}
		if len(req.Set) == 0 && len(req.Append) == 0 {
			return nil, nil
		}
		next.state = st
		return &sessionWrite{appendReq: &req, next: next}, nil
	}
	if b.at.partial() {
		return nil, errNeedWhole
	}
	return b.planSave(st)
}

// planSave plans a whole-record save of st.
func (b *binding) planSave(st State) (*sessionWrite, error) {
	s, schema := b.s, st.schema
	next := loaded{exists: true, schema: s.cfg.SchemaVersion}
	state := make(map[string]json.RawMessage, len(s.fields))
	for _, i := range s.fields {
		f := schema.fields[i]
		v := unwrapList(st.vals[i])
		raw, err := encodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("encoding field %q: %w", f.name, err)
		}
		state[f.name] = raw
		next.size += int64(len(raw))
		next.note(f, v, raw)
	}
	req := session.SaveRequest{SessionID: b.id, SchemaVersion: s.cfg.SchemaVersion, State: state}
	if s.cfg.Optimistic {
		v := b.at.version
		req.ExpectedVersion = &v
	}
	next.state = st
	return &sessionWrite{save: &req, next: next}, nil
}

// planWhole plans a whole-record save of st. When the binding is partial
// it reads the record whole first and saves st with the items left out
// put back in front of its partial lists; the basis after the write
// stays in the invocation's coordinates (the same items left out).
func (b *binding) planWhole(ctx context.Context, st State) (*sessionWrite, error) {
	if !b.at.partial() {
		return b.planSave(st)
	}
	whole, err := b.unskip(ctx, st)
	if err != nil {
		return nil, err
	}
	w, err := b.planSave(whole)
	if err != nil {
		return nil, err
	}
	for _, l := range b.at.lists {
		if l.skip == 0 {
			continue
		}
		if n, ok := w.next.list(l.name); ok {
			w.next.setList(l.name, n.n-l.skip, n.size)
			w.next.setSkip(l.name, l.skip)
		}
	}
	w.next.state = st
	return w, nil
}

// unskip returns st with the items the load left out of its partial
// lists put back in front, read from the store. The stored list must
// still begin with them: at least as many items as were left out, and
// then the items st holds as far as both go; otherwise the list was
// replaced since the load and unskip fails with errPrefixGone (as it
// does for a session deleted since).
func (b *binding) unskip(ctx context.Context, st State) (State, error) {
	s, schema := b.s, st.schema
	rec, err := s.cfg.Store.Load(ctx, session.LoadRequest{SessionID: b.id})
	switch {
	case errors.Is(err, session.ErrNotFound):
		return State{}, fmt.Errorf("%w: the session was deleted", errPrefixGone)
	case err != nil:
		return State{}, err
	}
	fields := rec.State
	if rec.SchemaVersion != s.cfg.SchemaVersion {
		if fields, err = s.migrate(rec); err != nil {
			return State{}, err
		}
	}
	vals := slices.Clone(st.vals)
	for _, l := range b.at.lists {
		if l.skip == 0 {
			continue
		}
		i := schema.index[l.name]
		raw, ok := fields[l.name]
		if !ok {
			return State{}, fmt.Errorf("%w: field %q is no longer stored", errPrefixGone, l.name)
		}
		v, err := decodeValue(schema.fields[i].typ, raw)
		if err != nil {
			return State{}, fmt.Errorf("field %q: stored value: %w", l.name, err)
		}
		stored := reflect.ValueOf(unwrapList(v))
		cur := reflect.ValueOf(unwrapList(vals[i]))
		if !stored.IsValid() || stored.Kind() != reflect.Slice || stored.Len() < l.skip {
			return State{}, fmt.Errorf("%w: field %q holds %d items, %d were left out of the load", errPrefixGone, l.name, listLen(unwrapList(v)), l.skip)
		}
		if !cur.IsValid() || cur.Kind() != reflect.Slice || cur.Type() != stored.Type() {
			return State{}, fmt.Errorf("field %q: the state's list is %s, the stored one %s", l.name, describe(unwrapList(vals[i])), describe(unwrapList(v)))
		}
		for j := range min(stored.Len()-l.skip, l.n, cur.Len()) {
			a, errA := json.Marshal(stored.Index(l.skip + j).Interface())
			c, errC := json.Marshal(cur.Index(j).Interface())
			if errA != nil || errC != nil || !bytes.Equal(a, c) {
				return State{}, fmt.Errorf("%w: field %q: stored item %d is not the one loaded", errPrefixGone, l.name, l.skip+j)
			}
		}
		out := reflect.MakeSlice(stored.Type(), 0, l.skip+cur.Len())
		out = reflect.AppendSlice(out, stored.Slice(0, l.skip))
		out = reflect.AppendSlice(out, cur)
		vals[i] = out.Interface()
	}
	return State{schema: st.schema, vals: vals}, nil
}

// pausedState returns st as a suspension record holds it, with each
// append-only session list left empty, and how many items of the
// session's each such list the state holds: the items it loaded (or
// skipped, when loaded by its tail) and those it added, which the
// suspension's session write stores. A list whose length cannot be
// told stays in the state.
func (b *binding) pausedState(st State) (State, map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lists map[string]int
	var vals []any
	for _, i := range b.s.fields {
		f := st.schema.fields[i]
		if !appendOnly(f.reducer) {
			continue
		}
		n := listLen(st.vals[i])
		if n < 0 {
			continue
		}
		if ls, ok := b.at.list(f.name); ok {
			n += ls.skip
		}
		if lists == nil {
			lists, vals = map[string]int{}, slices.Clone(st.vals)
		}
		lists[f.name], vals[i] = n, st.schema.defaults[i]
	}
	if lists == nil {
		return st, nil
	}
	return State{schema: st.schema, vals: vals}, lists
}

// pausedLists puts back into a paused state read from a suspension
// record (pausedData.SessionLists) the items of the session lists it
// left to the session: the first lists[name] items of each as stored
// (at, loaded whole). keep names fields whose paused value stays (the
// resume's payload set them). It fails when the session no longer
// holds that many.
func (s *sessions) pausedLists(st State, at loaded, lists map[string]int, keep func(string) bool) (State, error) {
	vals := slices.Clone(st.vals)
	for _, name := range sortedKeys(lists) {
		n := lists[name]
		i, ok := st.schema.index[name]
		if !ok || !appendOnly(st.schema.fields[i].reducer) || !slices.Contains(s.fields, i) {
			return State{}, fmt.Errorf("the paused record leaves field %q to the session, which does not store it as a list", name)
		}
		if keep != nil && keep(name) {
			continue
		}
		if !at.exists {
			return State{}, fmt.Errorf("the session that holds the paused state's %q no longer exists", name)
		}
		stored := reflect.ValueOf(unwrapList(at.state.vals[i]))
		if n < 0 || !stored.IsValid() || stored.Kind() != reflect.Slice || stored.Len() < n {
			return State{}, fmt.Errorf("the session holds %d items of %q, the paused state %d", max(listLen(at.state.vals[i]), 0), name, n)
		}
		// The stored items themselves, shared as a loaded state shares
		// them: nothing appends to them in place but through the list's
		// owner.
		if lp, ok := at.state.vals[i].(listPrefixer); ok {
			vals[i] = lp.listPrefix(n)
		} else {
			vals[i] = stored.Slice3(0, n, n).Interface()
		}
	}
	return State{schema: st.schema, vals: vals}, nil
}

// whole returns st (a state in the binding's coordinates) with the items
// left out of its partial lists put back in front: st itself when the
// binding is whole.
func (b *binding) whole(ctx context.Context, st State) (State, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.at.partial() {
		return st, nil
	}
	w, err := b.unskip(ctx, st)
	if err != nil {
		cat := errcat.SessionSaveFailed
		if errors.Is(err, errPrefixGone) {
			cat = errcat.SessionWriteConflict
		}
		return State{}, &SessionError{cat: cat, SessionID: b.id, Err: err}
	}
	return w, nil
}

// write persists the session fields of st through exec (the store, or an
// atomic suspension writer), falling back from a delta to a full save when
// a last-write-wins delta loses a race.
//
// A final write (the invocation's last: the save at End, a suspension,
// the commit of a resumed run) records the invocation's marks; susp
// describes the suspension of a suspending one. The session check, if
// any, vets st first: a failure returns a *checkError and writes nothing.
func (b *binding) write(ctx context.Context, st State, final bool, susp *Suspension, exec func(*sessionWrite) (session.WriteResult, error)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.s
	var err error
	switch {
	case b.check != nil:
		err = b.check(b.at.state, st)
	case b.hooks != nil:
		err = b.hooks.CheckSession(b.at.state, st)
	}
	if err != nil {
		return &checkError{err: err}
	}
	if s.cfg.Optimistic {
		if err := b.rebase.conflict(st); err != nil {
			s.cache.drop(s, b.id)
			return &SessionError{cat: errcat.SessionWriteConflict, SessionID: b.id, Err: err}
		}
	}
	var marks []session.Mark
	if final && (b.marks != nil || b.hooks != nil) {
		if b.marks != nil {
			marks, err = b.marks(b.inv, st, susp)
		} else {
			marks, err = b.hooks.MarkSession(b.inv, st, susp)
		}
		if err != nil {
			return &SessionError{cat: errcat.SessionSaveFailed, SessionID: b.id, Err: fmt.Errorf("session marks: %w", err)}
		}
	} else if im, ok := b.hooks.(InterimSessionMarks); ok && !final {
		marks = im.InterimMarks(b.inv)
	}
	withMarks := func(w *sessionWrite) *sessionWrite {
		if w != nil && len(marks) > 0 {
			if w.appendReq != nil {
				w.appendReq.Marks = marks
			} else {
				w.save.Marks = marks
			}
		}
		return w
	}
	fail := func(err error) error {
		s.cache.drop(s, b.id)
		cat := errcat.SessionSaveFailed
		if errors.Is(err, session.ErrWriteConflict) && (s.cfg.Optimistic || errors.Is(err, errPrefixGone)) {
			cat = errcat.SessionWriteConflict
		}
		return &SessionError{cat: cat, SessionID: b.id, Err: err}
	}
	w, err := b.plan(st, false)
	if errors.Is(err, errNeedWhole) {
		w, err = b.planWhole(ctx, st)
	}
	if err != nil {
		return fail(err)
	}
	if w == nil {
		// Nothing changed: exec still needs a write when it is atomic with
		// a record (a suspension) or carries marks.
		if !b.forceWrite && len(marks) == 0 {
			return nil
		}
		if w, err = b.planWhole(ctx, st); err != nil {
			return fail(err)
		}
	}
	res, err := exec(withMarks(w))
	if err != nil && w.appendReq != nil && errors.Is(err, session.ErrWriteConflict) && !s.cfg.Optimistic && !b.resumed {
		// Lost a last-write-wins race: write the whole record. (Never for
		// a resumed run: that would write the paused history over what
		// the session gained meanwhile. Its write fails instead, and its
		// paused record stays for a retry.)
		if w, err = b.planWhole(ctx, st); err != nil {
			return fail(err)
		}
		res, err = exec(withMarks(w))
	}
	if err != nil {
		return fail(err)
	}
	w.next.version, w.next.updated = res.Version, res.UpdatedAt
	w.next.written, w.next.suspended = true, final && susp != nil
	b.at, b.basis = w.next, nil
	s.cache.put(s, b.id, w.next)
	return nil
}

// save persists the session fields of st to the session store.
func (b *binding) save(ctx context.Context, st State, final bool) error {
	return b.write(ctx, st, final, nil, func(w *sessionWrite) (session.WriteResult, error) {
		if w.appendReq != nil {
			return b.s.appender.Append(ctx, *w.appendReq)
		}
		return b.s.cfg.Store.Save(ctx, *w.save)
	})
}

// newItems returns the JSON encodings of the items of list v beyond the
// first n, or false when v is not a list that extends n items.
func newItems(v any, n int) ([]json.RawMessage, bool) {
	if ms, ok := v.([]llm.Message); ok {
		return newMessages(ms, n)
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Slice || rv.Len() < n {
		return nil, false
	}
	items := make([]json.RawMessage, 0, rv.Len()-n)
	for j := n; j < rv.Len(); j++ {
		raw, err := json.Marshal(rv.Index(j).Interface())
		if err != nil {
			return nil, false
		}
		items = append(items, raw)
	}
	return items, true
}

// newMessages is newItems for a conversation: the messages from n on,
// encoded with llm.Message.AppendJSON into one buffer (each item capped,
// so an append to one cannot reach the next).
func newMessages(ms []llm.Message, n int) ([]json.RawMessage, bool) {
	if len(ms) < n {
		return nil, false
	}
	items := make([]json.RawMessage, 0, len(ms)-n)
	var buf []byte
	for j := n; j < len(ms); j++ {
		start := len(buf)
		var err error
		if buf, err = ms[j].AppendJSON(buf); err != nil {
			return nil, false
		}
		items = append(items, buf[start:len(buf):len(buf)])
	}
	return items, true
}

// encodeValue is json.Marshal(v), without reflection for a conversation
// ([]llm.Message, the chat history field): the same bytes, as
// llm.Message.MarshalJSON and json.Marshal of a message agree byte for
// byte.
func encodeValue(v any) ([]byte, error) {
	ms, ok := v.([]llm.Message)
	if !ok {
		return json.Marshal(v)
	}
	buf, err := llm.AppendMessagesJSON(make([]byte, 0, 2+128*len(ms)), ms)
	if err != nil {
		return nil, &json.MarshalerError{Type: reflect.TypeFor[llm.Message](), Err: err}
	}
	return buf, nil
}

// SaveSession persists the session now (sessions §6.2): the session fields
// of the current node's input state with pending (the update the node is
// about to return) applied. Later saves, including the one at End,
// overwrite it. It fails with ErrInvalidOption outside a session-bound
// invocation, and with a *SessionError when the store fails; the node
// decides what to do with that error. In a subgraph, fan-out instance or
// branch it saves the outermost graph's state as of that unit's entry.
func SaveSession(ctx context.Context, pending Update) error {
	sc := scopeFrom(ctx)
	if sc == nil || sc.inv.sess == nil {
		return invalidOption("SaveSession outside a session-bound invocation")
	}
	st := sc.state
	if len(sc.fr.parentStates) > 0 {
		st = sc.fr.parentStates[0]
	} else if len(pending) > 0 {
		merged, err := st.merge(pending)
		if err != nil {
			return err
		}
		st = merged
	}
	b := sc.inv.sess
	if err := b.save(ctx, b.rebase.apply(st), false); err != nil {
		if cerr, ok := unwrapCheck(err); ok {
			return cerr
		}
		return err
	}
	if b.rebase != nil {
		b.mu.Lock()
		b.savedInterim(st)
		b.mu.Unlock()
	}
	return nil
}

// SessionCache is an LRU of decoded sessions, bounded by count and by
// encoded size, that several graphs can share through
// [SessionConfig].Cache so that one budget covers every agent of a
// process. Entries are per graph and session id. It is safe for
// concurrent use.
type SessionCache struct {
	mu       sync.Mutex
	maxItems int
	maxBytes int64 // <= 0: no byte bound
	bytes    int64
	order    *list.List // front: most recent
	items    map[cacheKey]*list.Element
}

type cacheKey struct {
	owner *sessions
	id    string
}

type cacheEntry struct {
	key cacheKey
	at  loaded
}

// NewSessionCache returns a cache holding at most maxSessions sessions
// (0 means 1024) of at most maxBytes encoded bytes in all (0 means
// 64 MiB; negative means no byte bound).
func NewSessionCache(maxSessions int, maxBytes int64) *SessionCache {
	if maxSessions <= 0 {
		maxSessions = 1024
	}
	if maxBytes == 0 {
		maxBytes = 64 << 20
	}
	return &SessionCache{maxItems: maxSessions, maxBytes: maxBytes, order: list.New(), items: map[cacheKey]*list.Element{}}
}

// Stats reports the sessions cached and their encoded size.
func (c *SessionCache) Stats() (sessions int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}

func (c *SessionCache) get(owner *sessions, id string) (loaded, bool) {
	if c == nil {
		return loaded{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[cacheKey{owner, id}]
	if !ok {
		return loaded{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).at, true
}

func (c *SessionCache) put(owner *sessions, id string, at loaded) {
	if c == nil {
		return
	}
	key := cacheKey{owner, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		ent := e.Value.(*cacheEntry)
		c.bytes += at.size - ent.at.size
		ent.at = at
		c.order.MoveToFront(e)
	} else {
		c.items[key] = c.order.PushFront(&cacheEntry{key: key, at: at})
		c.bytes += at.size
	}
	for c.order.Len() > c.maxItems || (c.maxBytes > 0 && c.bytes > c.maxBytes && c.order.Len() > 0) {
		c.remove(c.order.Back())
	}
}

func (c *SessionCache) remove(e *list.Element) {
	ent := e.Value.(*cacheEntry)
	c.order.Remove(e)
	delete(c.items, ent.key)
	c.bytes -= ent.at.size
}

func (c *SessionCache) drop(owner *sessions, id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[cacheKey{owner, id}]; ok {
		c.remove(e)
	}
}
