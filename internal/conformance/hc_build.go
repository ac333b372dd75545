package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// The harness and harness-chat suites (hc_*.go) drive the real
// harness.Harness and chat.Harness over a graph built from the fixture:
// state fields (list[ChatMessage] becomes chat.Messages), nodes that
// update, raise or suspend, static edges, an in-memory session store with
// fault injection and call counting, an in-memory checkpoint store, and
// an in-memory signal coordinator.

// hcCaseKeys are the case-level keys of the two suites.
var (
	hcCommonKeys  = []string{"name", "description", "harness", "state", "entry", "nodes", "edges", "session_store", "checkpointer", "invariants"}
	hcHarnessKeys = append(slices.Clone(hcCommonKeys), "transmissions")
	hcChatKeys    = append(slices.Clone(hcCommonKeys), "chat_turns", "signal_arrivals")
)

// hcGraph is a fixture graph compiled for a harness case.
type hcGraph struct {
	g        *graph.Graph
	mode     harness.Mode
	store    *hcStore
	coord    harness.Coordinator
	records  *checkpoint.MemoryStore
	bodyRuns *hcBodyLog
}

// hcBodyLog records node bodies: which ran, and the session id the engine
// threaded into each.
type hcBodyLog struct {
	mu       sync.Mutex
	runs     []string
	sessions []string
}

func (l *hcBodyLog) add(node, sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs, l.sessions = append(l.runs, node), append(l.sessions, sessionID)
}

func (l *hcBodyLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

func (l *hcBodyLog) sessionsSince(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sessions[i:])
}

// hcStore is the harness session store: a real session.MemoryStore with
// call counters and the load_raises fault injection.
type hcStore struct {
	session.Store
	loadRaises errcat.Category
	mu         sync.Mutex
	loads      int
	saves      int
}

func (s *hcStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	s.mu.Lock()
	s.loads++
	s.mu.Unlock()
	if s.loadRaises != "" {
		return nil, &injectedLoadError{cat: s.loadRaises}
	}
	return s.Store.Load(ctx, req)
}

func (s *hcStore) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	s.mu.Lock()
	s.saves++
	s.mu.Unlock()
	return s.Store.Save(ctx, req)
}

func (s *hcStore) counts() (loads, saves int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads, s.saves
}

// buildHarnessGraph compiles the case's graph and its harness primitives.
func buildHarnessGraph(body *Value, keys []string) (*hcGraph, error) {
	for _, f := range body.Fields {
		if !slices.Contains(keys, f.Key) {
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	hg := &hcGraph{bodyRuns: &hcBodyLog{}}
	if hv, ok := body.Get("harness"); ok {
		if err := hcStrictKeys(hv, "harness", "mode", "signal_coordinator"); err != nil {
			return nil, err
		}
		if m, ok := hv.Get("mode"); ok {
			switch m.Str {
			case "sessioned":
			case "stateless":
				hg.mode = harness.Stateless
			default:
				return nil, schemaErrorf(m.Pos, "harness.mode %q: want sessioned or stateless", m.Str)
			}
		}
		if sc, ok := hv.Get("signal_coordinator"); ok {
			if sc.Str != "in_memory" {
				return nil, schemaErrorf(sc.Pos, "harness.signal_coordinator %q: only in_memory is defined", sc.Str)
			}
		}
	}
	hg.coord = harness.NewMemoryCoordinator()

	schema, err := hcSchema(body)
	if err != nil {
		return nil, err
	}
	b := graph.NewBuilder(schema)
	nodes, ok := body.Get("nodes")
	if !ok || nodes.Kind != KindMap {
		return nil, schemaErrorf(body.Pos, "nodes: must be a mapping")
	}
	for _, nf := range nodes.Fields {
		fn, err := hg.nodeFunc(nf, schema)
		if err != nil {
			return nil, err
		}
		b.AddNode(nf.Key, fn)
	}
	if edges, ok := body.Get("edges"); ok {
		for _, e := range edges.Items {
			if err := hcStrictKeys(e, "edge", "from", "to"); err != nil {
				return nil, err
			}
			from, _ := e.Get("from")
			to, _ := e.Get("to")
			if from == nil || to == nil {
				return nil, schemaErrorf(e.Pos, "edge needs from and to")
			}
			b.AddEdge(from.Str, endName(to.Str))
		}
	}
	if entry, ok := body.Get("entry"); ok {
		b.SetEntry(entry.Str)
	}
	var opts []graph.CompileOption
	if sv, ok := body.Get("session_store"); ok {
		st, err := hcSessionStore(sv)
		if err != nil {
			return nil, err
		}
		hg.store = st
		opts = append(opts, graph.WithSessions(graph.SessionConfig{Store: st}))
	}
	if cv, ok := body.Get("checkpointer"); ok {
		if cv.Str != "in_memory" {
			return nil, schemaErrorf(cv.Pos, "checkpointer %q: only in_memory is defined", cv.Str)
		}
	}
	// Paused records always go to a store the case can inspect (the
	// engine's default is private to the graph).
	hg.records = checkpoint.NewMemoryStore(nil)
	opts = append(opts, graph.WithCheckpointStore(hg.records))
	g, err := b.Compile(opts...)
	if err != nil {
		return nil, fmt.Errorf("compilation failed: %w", err)
	}
	hg.g = g
	return hg, nil
}

// hcStrictKeys fails on any key of v outside allowed.
func hcStrictKeys(v *Value, what string, allowed ...string) error {
	if v.Kind != KindMap {
		return schemaErrorf(v.Pos, "%s: must be a mapping", what)
	}
	for _, f := range v.Fields {
		if !slices.Contains(allowed, f.Key) {
			return &DirectiveUnknownError{Name: what + "." + f.Key, Pos: f.Pos}
		}
	}
	return nil
}

// hcSchema builds the state schema; a list[ChatMessage] field named
// messages with the append reducer is chat.Messages.
func hcSchema(body *Value) (*graph.Schema, error) {
	st, ok := body.Get("state")
	if !ok {
		return nil, schemaErrorf(body.Pos, "state: missing")
	}
	if err := hcStrictKeys(st, "state", "fields"); err != nil {
		return nil, err
	}
	fields, _ := st.Get("fields")
	if fields == nil || fields.Kind != KindMap {
		return nil, schemaErrorf(st.Pos, "state.fields: must be a mapping")
	}
	var specs []graph.FieldSpec
	for _, f := range fields.Fields {
		if err := hcStrictKeys(f.Value, "state.fields."+f.Key, "type", "default", "reducer"); err != nil {
			return nil, err
		}
		tv, _ := f.Value.Get("type")
		if tv == nil {
			return nil, schemaErrorf(f.Pos, "field %s: type missing", f.Key)
		}
		reducer := "last_write_wins"
		if rv, ok := f.Value.Get("reducer"); ok {
			reducer = rv.Str
		}
		if strings.ReplaceAll(tv.Str, " ", "") == "list[ChatMessage]" {
			if f.Key != chat.MessagesField || reducer != graph.ReducerAppend {
				return nil, schemaErrorf(f.Pos, "a list[ChatMessage] field must be %q with the append reducer", chat.MessagesField)
			}
			if dv, ok := f.Value.Get("default"); ok && (dv.Kind != KindList || len(dv.Items) > 0) {
				return nil, schemaErrorf(dv.Pos, "the messages default must be []")
			}
			specs = append(specs, chat.Messages)
			continue
		}
		typ, err := graph.ParseType(tv.Str)
		if err != nil {
			return nil, schemaErrorf(tv.Pos, "field %s: %v", f.Key, err)
		}
		var opts []graph.FieldOption
		if dv, ok := f.Value.Get("default"); ok {
			opts = append(opts, graph.Default(dv.Native()))
		}
		switch reducer {
		case graph.ReducerLastWriteWins:
		case graph.ReducerAppend:
			opts = append(opts, graph.WithReducer(graph.Append))
		default:
			return nil, &DirectiveUnknownError{Name: "reducer " + reducer, Pos: f.Pos}
		}
		specs = append(specs, graph.NewDynamicField(f.Key, typ, opts...))
	}
	s, err := graph.NewSchema(specs...)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return s, nil
}

// hcSessionStore parses session_store: in_memory, or {type: in_memory,
// behavior: {load_raises: <category>}}.
func hcSessionStore(v *Value) (*hcStore, error) {
	st := &hcStore{Store: session.NewMemoryStore(session.MemoryConfig{})}
	if v.Kind == KindString {
		if v.Str != "in_memory" {
			return nil, schemaErrorf(v.Pos, "session_store %q: only in_memory is defined", v.Str)
		}
		return st, nil
	}
	if err := hcStrictKeys(v, "session_store", "type", "behavior"); err != nil {
		return nil, err
	}
	if t, _ := v.Get("type"); t == nil || t.Str != "in_memory" {
		return nil, schemaErrorf(v.Pos, "session_store.type: only in_memory is defined")
	}
	if bv, ok := v.Get("behavior"); ok {
		if err := hcStrictKeys(bv, "session_store.behavior", "load_raises"); err != nil {
			return nil, err
		}
		if lr, ok := bv.Get("load_raises"); ok {
			st.loadRaises = errcat.Category(lr.Str)
		}
	}
	return st, nil
}

// nodeFunc builds a node from exactly one of update, raises and
// suspend_with_descriptor.
func (hg *hcGraph) nodeFunc(nf *Field, schema *graph.Schema) (graph.NodeFunc, error) {
	v := nf.Value
	if err := hcStrictKeys(v, "nodes."+nf.Key, "update", "raises", "suspend_with_descriptor"); err != nil {
		return nil, err
	}
	if len(v.Fields) != 1 {
		return nil, schemaErrorf(nf.Pos, "node %s: want exactly one of update, raises, suspend_with_descriptor", nf.Key)
	}
	name := nf.Key
	record := func(ctx context.Context) { hg.bodyRuns.add(name, graph.SessionID(ctx)) }
	d := v.Fields[0]
	switch d.Key {
	case "update":
		upd, err := hcUpdate(d.Value, schema)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, s graph.State) (graph.Update, error) {
			record(ctx)
			return upd, nil
		}, nil
	case "raises":
		if err := hcStrictKeys(d.Value, "raises", "category", "message"); err != nil {
			return nil, err
		}
		cat, _ := d.Value.Get("category")
		msg, _ := d.Value.Get("message")
		if cat == nil {
			return nil, schemaErrorf(d.Pos, "raises.category missing")
		}
		e := &raisedError{cat: errcat.Category(cat.Str)}
		if msg != nil {
			e.msg = msg.Str
		}
		return func(ctx context.Context, s graph.State) (graph.Update, error) {
			record(ctx)
			return nil, e
		}, nil
	default: // suspend_with_descriptor
		desc, err := hcDescriptor(d.Value)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, s graph.State) (graph.Update, error) {
			record(ctx)
			return nil, graph.Suspend(ctx, desc)
		}, nil
	}
}

func hcDescriptor(v *Value) (graph.SignalDescriptor, error) {
	if err := hcStrictKeys(v, "suspend_with_descriptor", "signal_id", "metadata"); err != nil {
		return graph.SignalDescriptor{}, err
	}
	var d graph.SignalDescriptor
	if id, ok := v.Get("signal_id"); ok {
		d.SignalID = id.Str
	}
	if md, ok := v.Get("metadata"); ok {
		m, ok := md.Native().(map[string]any)
		if !ok {
			return d, schemaErrorf(md.Pos, "metadata must be a mapping")
		}
		d.Metadata = m
	}
	return d, nil
}

// hcUpdate converts a fixture update; messages become llm.Messages.
func hcUpdate(v *Value, schema *graph.Schema) (graph.Update, error) {
	n, ok := v.Native().(map[string]any)
	if !ok {
		return nil, schemaErrorf(v.Pos, "update: must be a mapping")
	}
	upd := graph.Update{}
	for k, val := range n {
		if k == chat.MessagesField && schema.Has(k) {
			msgs, err := hcMessages(val)
			if err != nil {
				return nil, schemaErrorf(v.Pos, "update.messages: %v", err)
			}
			upd[k] = msgs
			continue
		}
		upd[k] = val
	}
	return upd, nil
}

// hcMessages decodes fixture ChatMessages through their JSON form.
func hcMessages(v any) ([]llm.Message, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var msgs []llm.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// hcMessage decodes one fixture ChatMessage.
func hcMessage(v *Value) (llm.Message, error) {
	raw, err := json.Marshal(v.Native())
	if err != nil {
		return llm.Message{}, err
	}
	var m llm.Message
	err = json.Unmarshal(raw, &m)
	return m, err
}

// nativeMessages renders messages as plain values for the matcher.
func nativeMessages(msgs []llm.Message) []any {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		out[i] = nativeMessage(m)
	}
	return out
}

func nativeMessage(m llm.Message) any {
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprintf("<unencodable message: %v>", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Sprintf("<undecodable message: %v>", err)
	}
	return out
}
