package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/session"
)

// The sessions harness: a counting, fault-injecting store around the
// real session.MemoryStore, the session_migrations mocks, and the
// per-invocation records the sessions expectations and invariants read.

// storeCall is one call the engine made on the harness store.
type storeCall struct {
	Seq       int64
	Op        string // load | save | append | delete | list
	SessionID string
	// InNode is set when the call came from inside a node body (an
	// explicit graph.SaveSession); Namespace is that node's namespace.
	InNode    bool
	Namespace []string
	Err       error
	// load: IfVersionNot of the request; Outcome record | not_found |
	// not_modified | error; Record a copy of the returned record.
	IfVersionNot int64
	Outcome      string
	Record       *session.Record
	// save / append: the fields written, and the stored record right
	// after a successful write.
	Fields        []string
	SchemaVersion string
	After         *session.Record
}

func (c *storeCall) write() bool { return c.Op == "save" || c.Op == "append" }

// injectedLoadError is the failure a session_store with behavior
// {load_raises: <category>} returns from every Load.
type injectedLoadError struct{ cat errcat.Category }

// Error describes the injected failure.
func (e *injectedLoadError) Error() string {
	return fmt.Sprintf("conformance: injected session store load failure (%s)", e.cat)
}

// Category returns the injected category.
func (e *injectedLoadError) Category() errcat.Category { return e.cat }

// countingStore is the harness session store: it delegates to a real
// session.MemoryStore and records every call. A delta write through
// Append counts as a save.
type countingStore struct {
	mem        SessionStore
	loadRaises errcat.Category
	ss         *ssState
}

var (
	_ session.Store    = (*countingStore)(nil)
	_ session.Appender = (*countingStore)(nil)
)

func (s *countingStore) begin(ctx context.Context, op, id string) *storeCall {
	c := &storeCall{Op: op, SessionID: id}
	if info, ok := graph.CurrentNode(ctx); ok {
		c.InNode, c.Namespace = true, slices.Clone(info.Namespace)
	}
	return c
}

// Load delegates (or fails with the injected error).
func (s *countingStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	c := s.begin(ctx, "load", req.SessionID)
	c.IfVersionNot = req.IfVersionNot
	var (
		rec *session.Record
		err error
	)
	if s.loadRaises != "" {
		err = &injectedLoadError{cat: s.loadRaises}
	} else {
		rec, err = s.mem.Load(ctx, req)
	}
	switch {
	case err == nil:
		c.Outcome, c.Record = "record", cloneRecord(rec)
	case errors.Is(err, session.ErrNotFound):
		c.Outcome = "not_found"
	case errors.Is(err, session.ErrNotModified):
		c.Outcome = "not_modified"
	default:
		c.Outcome = "error"
	}
	c.Err = err
	s.ss.addCall(c)
	return rec, err
}

// Save delegates.
func (s *countingStore) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	c := s.begin(ctx, "save", req.SessionID)
	c.Fields, c.SchemaVersion = sortedKeys(req.State), req.SchemaVersion
	res, err := s.mem.Save(ctx, req)
	s.finishWrite(c, err)
	return res, err
}

// Append delegates; it counts as a save.
func (s *countingStore) Append(ctx context.Context, req session.AppendRequest) (session.WriteResult, error) {
	c := s.begin(ctx, "append", req.SessionID)
	fields := slices.Collect(maps.Keys(req.Set))
	fields = append(fields, slices.Collect(maps.Keys(req.Append))...)
	slices.Sort(fields)
	c.Fields, c.SchemaVersion = fields, req.SchemaVersion
	res, err := s.mem.Append(ctx, req)
	s.finishWrite(c, err)
	return res, err
}

func (s *countingStore) finishWrite(c *storeCall, err error) {
	c.Err = err
	if err == nil {
		c.After = s.ss.peek(c.SessionID)
	}
	s.ss.addCall(c)
}

// Delete delegates.
func (s *countingStore) Delete(ctx context.Context, id string) error {
	c := s.begin(ctx, "delete", id)
	c.Err = s.mem.Delete(ctx, id)
	s.ss.addCall(c)
	return c.Err
}

// List delegates.
func (s *countingStore) List(ctx context.Context, req session.ListRequest) (session.ListResponse, error) {
	c := s.begin(ctx, "list", "")
	res, err := s.mem.List(ctx, req)
	c.Err = err
	s.ss.addCall(c)
	return res, err
}

func cloneRecord(r *session.Record) *session.Record {
	if r == nil {
		return nil
	}
	c := *r
	c.State = make(map[string]json.RawMessage, len(r.State))
	for k, v := range r.State {
		c.State[k] = slices.Clone(v)
	}
	return &c
}

// KeyError is the error the raises_keyerror migration mock returns: the
// Go stand-in for Python's KeyError, so cause {exception_type: KeyError}
// matches it by type name.
type KeyError struct{ Key string }

// Error formats the error like Python's traceback line.
func (e *KeyError) Error() string { return fmt.Sprintf("KeyError: '%s'", e.Key) }

// migrationMocks are the session_migrations harness functions
// (IMPLEMENTERS-NOTES §4): they act on the record's dict form.
var migrationMocks = map[string]func(map[string]any) (map[string]any, error){
	"add_ten_to_value":      numericMigration(func(n int64) int64 { return n + 10 }, func(f float64) float64 { return f + 10 }),
	"multiply_value_by_two": numericMigration(func(n int64) int64 { return n * 2 }, func(f float64) float64 { return f * 2 }),
	"raises_keyerror": func(map[string]any) (map[string]any, error) {
		// A buggy migration reading a key the v1 record never had.
		return nil, &KeyError{Key: "legacy_value"}
	},
}

// numericMigration rewrites state["value"]; a missing key raises
// KeyError, as the Python harness's state["value"] would.
func numericMigration(i func(int64) int64, f func(float64) float64) func(map[string]any) (map[string]any, error) {
	return func(state map[string]any) (map[string]any, error) {
		v, ok := state["value"]
		if !ok {
			return nil, &KeyError{Key: "value"}
		}
		switch n := normalize(v).(type) {
		case int64:
			state["value"] = int(i(n))
		case float64:
			state["value"] = f(n)
		default:
			return nil, fmt.Errorf("conformance: migration mock: value is %s, not a number", formatValue(v))
		}
		return state, nil
	}
}

// migCall is one run of a migration mock.
type migCall struct {
	Seq  int64
	Name string // "<from>-><to>"
	Out  map[string]any
	Err  error
}

// bodyRec is one node body run of a session case.
type bodyRec struct {
	Seq          int64
	InvocationID string
	Node         string
	Outer        bool
	Pre          map[string]any
}

// ssEvent is a node event delivered by a subgraph's harness observer.
type ssEvent struct {
	Graph string
	Ev    *eventRec
}

// ssState is the sessions harness of one execution.
type ssState struct {
	cfg *ssConfig
	mem SessionStore
	// done releases mem when a Backend supplied it.
	done func()
	// store is registered on the outermost graph; nil without a
	// session_store.
	store *countingStore

	mu     sync.Mutex
	seq    int64
	calls  []*storeCall
	migs   []*migCall
	bodies []*bodyRec
	events []*ssEvent
}

// newSSState opens the case's session store: the runner's Backend's when
// it supplies them (SessionsBackend), else an in-memory one.
func newSSState(ctx context.Context, cfg *ssConfig) *ssState {
	ss := &ssState{cfg: cfg, mem: session.NewMemoryStore(session.MemoryConfig{}), done: func() {}}
	if b, ok := ctx.Value(backendKey{}).(SessionsBackend); ok && cfg != nil && cfg.hasStore {
		if st, done, err := b.Sessions(ctx); err == nil {
			ss.mem, ss.done = st, done
		} else {
			ss.mem = failingStore{err}
		}
	}
	if cfg != nil && cfg.hasStore {
		ss.store = &countingStore{mem: ss.mem, loadRaises: errcat.Category(cfg.loadRaises), ss: ss}
	}
	return ss
}

// SessionStore is the session store a sessions case runs on.
type SessionStore interface {
	session.Store
	session.Appender
}

// failingStore stands for a backend store that could not be opened:
// every call fails with its error, so the case fails with it.
type failingStore struct{ err error }

func (f failingStore) Load(context.Context, session.LoadRequest) (*session.Record, error) {
	return nil, f.err
}
func (f failingStore) Save(context.Context, session.SaveRequest) (session.WriteResult, error) {
	return session.WriteResult{}, f.err
}
func (f failingStore) Append(context.Context, session.AppendRequest) (session.WriteResult, error) {
	return session.WriteResult{}, f.err
}
func (f failingStore) Delete(context.Context, string) error { return f.err }
func (f failingStore) List(context.Context, session.ListRequest) (session.ListResponse, error) {
	return session.ListResponse{}, f.err
}

func (ss *ssState) next() int64 {
	ss.seq++
	return ss.seq
}

func (ss *ssState) addCall(c *storeCall) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	c.Seq = ss.next()
	ss.calls = append(ss.calls, c)
}

// peek reads a record straight from the memory store (no call recorded).
func (ss *ssState) peek(id string) *session.Record {
	if id == "" {
		return nil
	}
	rec, err := ss.mem.Load(context.Background(), session.LoadRequest{SessionID: id})
	if err != nil {
		return nil
	}
	return rec
}

func (ss *ssState) list() []session.Summary {
	res, err := ss.mem.List(context.Background(), session.ListRequest{PageSize: 1000})
	if err != nil {
		return nil
	}
	return res.Sessions
}

// sessionConfig builds the graph.SessionConfig of the outermost graph.
func (ss *ssState) sessionConfig(schemaVersion string) graph.SessionConfig {
	cfg := graph.SessionConfig{
		Store:           ss.store,
		SchemaVersion:   schemaVersion,
		DisableAutoSave: !ss.cfg.autoSave,
	}
	if ss.cfg.hasFields {
		cfg.Fields = slices.Clone(ss.cfg.fields)
	}
	for _, m := range ss.cfg.migrations {
		name, fn := m.from+"->"+m.to, migrationMocks[m.fn]
		cfg.Migrations = append(cfg.Migrations, migrate.Migration{From: m.from, To: m.to,
			Fn: func(state map[string]any) (map[string]any, error) {
				out, err := fn(state)
				ss.mu.Lock()
				ss.migs = append(ss.migs, &migCall{Seq: ss.next(), Name: name, Out: normalizeMap(out), Err: err})
				ss.mu.Unlock()
				return out, err
			}})
	}
	return cfg
}

func normalizeMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out, _ := normalize(m).(map[string]any)
	return out
}

// seed saves the seeded_session record before the first invocation.
func (ss *ssState) seed(gc *geCase) error {
	seed := ss.cfg.seeded
	if seed == nil {
		return nil
	}
	version := gc.outer.schemaVersion
	if seed.hasSchema {
		version = seed.schemaVersion
	}
	state := map[string]json.RawMessage{}
	for _, f := range seed.state.Fields {
		raw, err := json.Marshal(f.Value.Native())
		if err != nil {
			return schemaErrorf(f.Pos, "seeded_session.state.%s: %v", f.Key, err)
		}
		state[f.Key] = raw
	}
	_, err := ss.mem.Save(context.Background(), session.SaveRequest{
		SessionID: ss.cfg.seedID(gc), SchemaVersion: version, State: state})
	if err != nil {
		return fmt.Errorf("seeding session: %w", err)
	}
	return nil
}

// markBody records a node body run (and the state it started from).
func (ss *ssState) markBody(ctx context.Context, node string, outer bool, s graph.State) {
	pre, _ := normalize(s).(map[string]any)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.bodies = append(ss.bodies, &bodyRec{Seq: ss.next(), InvocationID: graph.InvocationID(ctx), Node: node, Outer: outer, Pre: pre})
}

// observer records the node events of subgraph name.
func (ss *ssState) observer(name string) graph.Observer {
	return func(_ context.Context, ev graph.Event) error {
		if ne, ok := ev.(*graph.NodeEvent); ok {
			rec := eventRecOf(ne)
			ss.mu.Lock()
			ss.events = append(ss.events, &ssEvent{Graph: name, Ev: rec})
			ss.mu.Unlock()
		}
		return nil
	}
}

// ssRun is what one invocation did to its session.
type ssRun struct {
	SessionID string
	// Pre and Post are the stored records of the session before and after
	// the invocation (nil: none).
	Pre, Post             *session.Record
	ListBefore, ListAfter []session.Summary
	Calls                 []*storeCall
	Migrations            []*migCall
	callsFrom, migsFrom   int
	invocationID          string
}

// begin snapshots the store before an invocation.
func (ss *ssState) begin(sessionID string) *ssRun {
	ss.mu.Lock()
	r := &ssRun{SessionID: sessionID, callsFrom: len(ss.calls), migsFrom: len(ss.migs)}
	ss.mu.Unlock()
	r.Pre = ss.peek(sessionID)
	r.ListBefore = ss.list()
	return r
}

// end collects what the invocation did.
func (ss *ssState) end(r *ssRun, invocationID string) {
	ss.mu.Lock()
	r.Calls = slices.Clone(ss.calls[r.callsFrom:])
	r.Migrations = slices.Clone(ss.migs[r.migsFrom:])
	ss.mu.Unlock()
	r.invocationID = invocationID
	r.Post = ss.peek(r.SessionID)
	r.ListAfter = ss.list()
}

func (r *ssRun) loads() []*storeCall {
	var out []*storeCall
	for _, c := range r.Calls {
		if c.Op == "load" {
			out = append(out, c)
		}
	}
	return out
}

func (r *ssRun) writes() []*storeCall {
	var out []*storeCall
	for _, c := range r.Calls {
		if c.write() {
			out = append(out, c)
		}
	}
	return out
}

// entry returns the first outer node body run of an invocation.
func (ss *ssState) entry(invocationID string) *bodyRec {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, b := range ss.bodies {
		if b.InvocationID == invocationID && b.Outer {
			return b
		}
	}
	return nil
}

// bodiesOf returns every node body run of an invocation.
func (ss *ssState) bodiesOf(invocationID string) []*bodyRec {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*bodyRec
	for _, b := range ss.bodies {
		if b.InvocationID == invocationID {
			out = append(out, b)
		}
	}
	return out
}

// subEvents returns the events subgraph name delivered in an invocation.
func (ss *ssState) subEvents(name, invocationID string) []*eventRec {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*eventRec
	for _, e := range ss.events {
		if e.Graph == name && e.Ev.InvocationID == invocationID {
			out = append(out, e.Ev)
		}
	}
	return out
}

// decodeRecord returns a record's state as matcher values.
func decodeRecord(rec *session.Record) (map[string]any, error) {
	out := make(map[string]any, len(rec.State))
	for k, raw := range rec.State {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("stored field %q: %w", k, err)
		}
		out[k] = jsonNative(v)
	}
	return out, nil
}

// jsonNative converts decoded JSON (json.Number numbers) to matcher
// values: int64 for integers, float64 otherwise.
func jsonNative(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonNative(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonNative(e)
		}
		return out
	}
	return v
}
