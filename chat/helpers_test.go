package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// Approved is the signal payload field of the approval graph.
var Approved = graph.NewField[bool]("approved")

// countingStore wraps a session store and counts its calls.
type countingStore struct {
	session.Store
	loads, saves, deletes, lists atomic.Int64
	loadErr                      error // returned by Load when set
	saveErr                      error // returned by Save when set
}

func (s *countingStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	s.loads.Add(1)
	if s.loadErr != nil {
		return nil, s.loadErr
	}
	return s.Store.Load(ctx, req)
}

func (s *countingStore) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	s.saves.Add(1)
	if s.saveErr != nil {
		return session.WriteResult{}, s.saveErr
	}
	return s.Store.Save(ctx, req)
}

func (s *countingStore) Delete(ctx context.Context, id string) error {
	s.deletes.Add(1)
	return s.Store.Delete(ctx, id)
}

func (s *countingStore) List(ctx context.Context, req session.ListRequest) (session.ListResponse, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, req)
}

func (s *countingStore) calls() int64 {
	return s.loads.Load() + s.saves.Load() + s.deletes.Load() + s.lists.Load()
}

// echo is a node body appending "re: <last user text>".
func echo(ctx context.Context, s graph.State) (graph.Update, error) {
	msgs := chat.Messages.Get(s)
	return chat.Messages.Add(llm.AssistantText("re: " + msgs[len(msgs)-1].Text())), nil
}

// graphOpts configures newGraph.
type graphOpts struct {
	store   session.Store
	records checkpoint.Store
	extra   []graph.FieldSpec
	// tail, when positive, loads the history by its last tail messages
	// (graph.SessionConfig.Tail), with the session cache off.
	tail int
}

// compileOptions returns the sessions (and record store) options.
func (o graphOpts) compileOptions() []graph.CompileOption {
	if o.store == nil {
		o.store = session.NewMemoryStore(session.MemoryConfig{})
	}
	cfg := graph.SessionConfig{Store: o.store}
	if o.tail > 0 {
		cfg.Tail, cfg.CacheSize = []session.ListTail{{Field: chat.MessagesField, Max: o.tail}}, -1
	}
	opts := []graph.CompileOption{graph.WithSessions(cfg)}
	if o.records != nil {
		opts = append(opts, graph.WithCheckpointStore(o.records))
	}
	return opts
}

// newGraph compiles a one-node chat graph running fn over store.
func newGraph(t testing.TB, o graphOpts, fn graph.NodeFunc) *graph.Graph {
	t.Helper()
	schema, err := chat.NewSchema(o.extra...)
	if err != nil {
		t.Fatal(err)
	}
	opts := o.compileOptions()
	g, err := graph.NewBuilder(schema).AddNode("reply", fn).SetEntry("reply").AddEdge("reply", graph.End).Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// newChat returns a chat harness over g.
func newChat(t testing.TB, cfg chat.Config) *chat.Harness {
	t.Helper()
	c, err := chat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// approvalGraph compiles compose -> gate (suspends for signalID) -> act:
// compose appends "approve?", act appends "done: <approved>".
func approvalGraph(t testing.TB, o graphOpts, signalID string, acts *atomic.Int64) *graph.Graph {
	t.Helper()
	schema, err := chat.NewSchema(append([]graph.FieldSpec{Approved}, o.extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	opts := o.compileOptions()
	g, err := graph.NewBuilder(schema).
		AddNode("compose", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return chat.Messages.Add(llm.AssistantText("approve?")), nil
		}).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if err := graph.Suspend(ctx, graph.SignalDescriptor{SignalID: signalID, Metadata: map[string]any{"tool": "delete"}}); err != nil {
				return nil, err
			}
			return nil, nil
		}).
		AddNode("act", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if acts != nil {
				acts.Add(1)
			}
			if Approved.Get(s) {
				return chat.Messages.Add(llm.AssistantText("done: approved")), nil
			}
			return chat.Messages.Add(llm.AssistantText("done: denied")), nil
		}).
		SetEntry("compose").AddEdge("compose", "gate").AddEdge("gate", "act").AddEdge("act", graph.End).
		Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// openSQLite opens a store on path, closed at the end of the test.
func openSQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "a.db") }

// history reads the stored messages of a session.
func history(t testing.TB, st session.Store, sessionID string) []llm.Message {
	t.Helper()
	rec, err := st.Load(context.Background(), session.LoadRequest{SessionID: sessionID})
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if raw, ok := rec.State[chat.MessagesField]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

// texts returns each message's role and text.
func texts(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ": " + m.Text()
	}
	return out
}

// recorder collects listener callbacks.
type recorder struct {
	mu   sync.Mutex
	outs []chat.Outcome
}

func (r *recorder) fn(o chat.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outs = append(r.outs, o)
}

func (r *recorder) got() []chat.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Outcome(nil), r.outs...)
}

func newMemStore() *session.MemoryStore { return session.NewMemoryStore(session.MemoryConfig{}) }
