package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/session"
)

// spyStore wraps a MemoryStore and records the calls the engine makes.
type spyStore struct {
	*session.MemoryStore
	mu              sync.Mutex
	loads, saves    int
	appends         []session.AppendRequest
	notModified     int
	failLoad        error
	failSave        error
	conflictAppends int // the next n appends fail with a write conflict
}

func newSpy() *spyStore {
	return &spyStore{MemoryStore: session.NewMemoryStore(session.MemoryConfig{})}
}

func (s *spyStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	s.mu.Lock()
	s.loads++
	fail := s.failLoad
	s.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	r, err := s.MemoryStore.Load(ctx, req)
	if errors.Is(err, session.ErrNotModified) {
		s.mu.Lock()
		s.notModified++
		s.mu.Unlock()
	}
	return r, err
}

func (s *spyStore) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	s.mu.Lock()
	s.saves++
	fail := s.failSave
	s.mu.Unlock()
	if fail != nil {
		return session.WriteResult{}, fail
	}
	return s.MemoryStore.Save(ctx, req)
}

func (s *spyStore) Append(ctx context.Context, req session.AppendRequest) (session.WriteResult, error) {
	s.mu.Lock()
	s.appends = append(s.appends, req)
	conflict := s.conflictAppends > 0
	if conflict {
		s.conflictAppends--
	}
	s.mu.Unlock()
	if conflict {
		return session.WriteResult{}, fmt.Errorf("%w: injected", session.ErrWriteConflict)
	}
	return s.MemoryStore.Append(ctx, req)
}

var (
	chatMessages = graph.NewListField[string]("messages", graph.Append)
	chatTurns    = graph.NewField[int]("turns")
	chatScratch  = graph.NewField[string]("scratch")
)

// chatGraph appends a reply to the history on every turn.
func chatGraph(t *testing.T, cfg graph.SessionConfig, extra ...graph.NodeFunc) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder(mustSchema(t, chatMessages, chatTurns, chatScratch)).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			n := chatTurns.Get(s) + 1
			return chatMessages.Add(fmt.Sprintf("reply %d", n)).With(chatTurns.Set(n), chatScratch.Set("tmp")), nil
		}).
		SetEntry("reply")
	if len(extra) > 0 {
		b.AddNode("extra", extra[0]).AddEdge("reply", "extra").AddEdge("extra", graph.End)
	} else {
		b.AddEdge("reply", graph.End)
	}
	return mustCompile(t, b, graph.WithSessions(cfg))
}

func turn(t *testing.T, g *graph.Graph, id, msg string) (*graph.Result, error) {
	t.Helper()
	return g.Invoke(t.Context(), chatMessages.Add(msg), graph.WithSessionID(id))
}

func stored(t *testing.T, s session.Store, id string) map[string]string {
	t.Helper()
	r, err := s.Load(t.Context(), session.LoadRequest{SessionID: id})
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	out := map[string]string{}
	for k, v := range r.State {
		out[k] = string(v)
	}
	return out
}

func TestSessionsAcrossInvocations(t *testing.T) {
	spy := newSpy()
	g := chatGraph(t, graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}, SchemaVersion: "v1"})
	for i, msg := range []string{"hi", "how are you", "bye"} {
		res, err := turn(t, g, "s1", msg)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if got := chatMessages.Get(res.State); len(got) != 2*(i+1) {
			t.Fatalf("turn %d history = %v", i, got)
		}
	}
	got := stored(t, spy, "s1")
	want := `["hi","reply 1","how are you","reply 2","bye","reply 3"]`
	if got["messages"] != want || got["turns"] != "3" {
		t.Errorf("stored = %v, want messages %s and turns 3", got, want)
	}
	if _, ok := got["scratch"]; ok {
		t.Error("the scratch field is not part of the session projection but was stored")
	}
	// Turn 1 creates the record with a full save; turns 2 and 3 append
	// only their two messages and revalidate the cached copy.
	if spy.saves != 1 || len(spy.appends) != 2 {
		t.Fatalf("saves = %d, appends = %d; want 1 full save then deltas", spy.saves, len(spy.appends))
	}
	for _, a := range spy.appends {
		if n := len(a.Append["messages"]); n != 2 || len(a.Set) != 1 {
			t.Errorf("delta = append %d messages, set %v; want 2 messages and the turns field", n, a.Set)
		}
	}
	if spy.notModified != 2 {
		t.Errorf("conditional loads answered not-modified = %d, want 2 (warm turns do not re-read)", spy.notModified)
	}
	// Another graph instance (a cold cache) reads the record once.
	g2 := chatGraph(t, graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}, SchemaVersion: "v1"})
	res, err := turn(t, g2, "s1", "again")
	if err != nil || chatTurns.Get(res.State) != 4 || len(chatMessages.Get(res.State)) != 8 {
		t.Fatalf("cold turn = %v, %v", res.State.Map(), err)
	}
}

func TestSessionsInertWithoutID(t *testing.T) {
	spy := newSpy()
	g := chatGraph(t, graph.SessionConfig{Store: spy})
	if _, err := g.Invoke(t.Context(), chatMessages.Add("hi")); err != nil {
		t.Fatal(err)
	}
	if spy.loads+spy.saves+len(spy.appends) != 0 {
		t.Errorf("an invocation without a session id touched the store")
	}
	// Without a store, a session id is only carried in the context.
	var seen string
	plain := mustCompile(t, graph.NewBuilder(mustSchema(t, chatTurns)).
		AddNode("n", func(ctx context.Context, s graph.State) (graph.Update, error) {
			seen = graph.SessionID(ctx)
			return nil, nil
		}).AddEdge("n", graph.End).SetEntry("n"))
	if _, err := plain.Invoke(t.Context(), nil, graph.WithSessionID("ctx-only")); err != nil || seen != "ctx-only" {
		t.Errorf("SessionID(ctx) = %q, %v", seen, err)
	}
	if _, err := plain.Invoke(t.Context(), nil, graph.WithSessionID("")); !errors.Is(err, graph.ErrInvalidOption) {
		t.Errorf("an empty session id = %v, want ErrInvalidOption", err)
	}
}

func TestSessionsAutoSaveOffAndExplicitSave(t *testing.T) {
	spy := newSpy()
	boom := errors.New("boom")
	g := chatGraph(t, graph.SessionConfig{Store: spy, DisableAutoSave: true}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		return nil, nil
	})
	if _, err := turn(t, g, "off", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := spy.Load(t.Context(), session.LoadRequest{SessionID: "off"}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("auto-save off still saved: %v", err)
	}

	// A mid-invocation save survives a later failure (sessions §6.2).
	g = chatGraph(t, graph.SessionConfig{Store: spy}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		if err := graph.SaveSession(ctx, chatScratch.Set("saved mid-run")); err != nil {
			return nil, err
		}
		return nil, boom
	})
	_, err := turn(t, g, "mid", "hi")
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the node's failure", err)
	}
	got := stored(t, spy, "mid")
	if got["scratch"] != `"saved mid-run"` || got["messages"] != `["hi","reply 1"]` {
		t.Errorf("stored after a mid-run save and a failure = %v", got)
	}
	if err := graph.SaveSession(t.Context(), nil); !errors.Is(err, graph.ErrInvalidOption) {
		t.Errorf("SaveSession outside an invocation = %v", err)
	}
}

func TestSessionsFailures(t *testing.T) {
	t.Run("load", func(t *testing.T) {
		spy := newSpy()
		spy.failLoad = errors.New("disk on fire")
		ran := false
		g := chatGraph(t, graph.SessionConfig{Store: spy}, func(context.Context, graph.State) (graph.Update, error) {
			ran = true
			return nil, nil
		})
		res, err := turn(t, g, "s", "hi")
		if !errors.Is(err, errcat.SessionLoadFailed) || res.Status != graph.Errored || ran {
			t.Fatalf("status %v, err %v, graph ran %v; want session_load_failed before any node", res.Status, err, ran)
		}
	})
	t.Run("save", func(t *testing.T) {
		spy := newSpy()
		spy.failSave = errors.New("read-only")
		g := chatGraph(t, graph.SessionConfig{Store: spy})
		res, err := turn(t, g, "s", "hi")
		if !errors.Is(err, errcat.SessionSaveFailed) || res.Status != graph.Completed || len(chatMessages.Get(res.State)) != 2 {
			t.Fatalf("status %v, err %v; want a completed result with session_save_failed", res.Status, err)
		}
	})
	t.Run("corrupt record", func(t *testing.T) {
		spy := newSpy()
		if _, err := spy.MemoryStore.Save(t.Context(), session.SaveRequest{SessionID: "bad", State: map[string]json.RawMessage{"turns": json.RawMessage(`"three"`)}}); err != nil {
			t.Fatal(err)
		}
		g := chatGraph(t, graph.SessionConfig{Store: spy})
		if _, err := turn(t, g, "bad", "hi"); !errors.Is(err, errcat.SessionLoadFailed) {
			t.Fatalf("a record of the wrong type = %v, want session_load_failed", err)
		}
	})
}

func TestSessionsConcurrencyModes(t *testing.T) {
	t.Run("last write wins", func(t *testing.T) {
		spy := newSpy()
		g := chatGraph(t, graph.SessionConfig{Store: spy})
		if _, err := turn(t, g, "s", "one"); err != nil {
			t.Fatal(err)
		}
		spy.conflictAppends = 1
		if _, err := turn(t, g, "s", "two"); err != nil {
			t.Fatalf("a lost delta race falls back to a full save: %v", err)
		}
		if got := stored(t, spy, "s")["messages"]; got != `["one","reply 1","two","reply 2"]` {
			t.Errorf("stored = %s", got)
		}
	})
	t.Run("optimistic", func(t *testing.T) {
		spy := newSpy()
		g := chatGraph(t, graph.SessionConfig{Store: spy, Optimistic: true})
		if _, err := turn(t, g, "s", "one"); err != nil {
			t.Fatal(err)
		}
		spy.conflictAppends = 1
		res, err := turn(t, g, "s", "two")
		if !errors.Is(err, errcat.SessionWriteConflict) || res.Status != graph.Completed {
			t.Fatalf("err = %v; want session_write_conflict", err)
		}
		// The cache was dropped: the next turn reloads and succeeds.
		if _, err := turn(t, g, "s", "three"); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, spy, "s")["messages"]; got != `["one","reply 1","three","reply 2"]` {
			t.Errorf("stored = %s", got)
		}
	})
	t.Run("parallel turns on many sessions", func(t *testing.T) {
		spy := newSpy()
		g := chatGraph(t, graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}})
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprint("p", i%4)
				for range 5 {
					if _, err := turn(t, g, id, "m"); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestSessionsMigrations(t *testing.T) {
	seed := func(t *testing.T, version string) *spyStore {
		spy := newSpy()
		if _, err := spy.MemoryStore.Save(t.Context(), session.SaveRequest{SessionID: "m", SchemaVersion: version,
			State: map[string]json.RawMessage{"turns": json.RawMessage(`1`), "messages": json.RawMessage(`[]`)}}); err != nil {
			t.Fatal(err)
		}
		return spy
	}
	addTen := migrate.Migration{From: "v1", To: "v2", Fn: func(s map[string]any) (map[string]any, error) {
		s["turns"] = s["turns"].(int) + 10
		return s, nil
	}}
	t.Run("applied at load, saved at the new version", func(t *testing.T) {
		spy := seed(t, "v1")
		g := chatGraph(t, graph.SessionConfig{Store: spy, SchemaVersion: "v2", Migrations: []migrate.Migration{addTen}})
		res, err := turn(t, g, "m", "hi")
		if err != nil || chatTurns.Get(res.State) != 12 {
			t.Fatalf("turns = %d, %v; want 1 + 10 migrated + 1", chatTurns.Get(res.State), err)
		}
		r, _ := spy.MemoryStore.Load(t.Context(), session.LoadRequest{SessionID: "m"})
		if r.SchemaVersion != "v2" {
			t.Errorf("saved at %q, want v2", r.SchemaVersion)
		}
	})
	t.Run("missing", func(t *testing.T) {
		g := chatGraph(t, graph.SessionConfig{Store: seed(t, "v0"), SchemaVersion: "v2", Migrations: []migrate.Migration{addTen}})
		_, err := turn(t, g, "m", "hi")
		var me *migrate.Error
		if !errors.Is(err, errcat.SessionStateMigrationMissing) || !errors.As(err, &me) || me.FromVersion() != "v0" || me.RegisteredMigrationsCount() != 1 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("failed", func(t *testing.T) {
		keyErr := errors.New("KeyError: 'value'")
		bad := migrate.Migration{From: "v1", To: "v2", Fn: func(map[string]any) (map[string]any, error) { return nil, keyErr }}
		g := chatGraph(t, graph.SessionConfig{Store: seed(t, "v1"), SchemaVersion: "v2", Migrations: []migrate.Migration{bad}})
		if _, err := turn(t, g, "m", "hi"); !errors.Is(err, errcat.SessionStateMigrationFailed) || !errors.Is(err, keyErr) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("ambiguous at compile time", func(t *testing.T) {
		_, err := graph.NewBuilder(mustSchema(t, chatTurns)).
			AddNode("n", func(context.Context, graph.State) (graph.Update, error) { return nil, nil }).
			AddEdge("n", graph.End).SetEntry("n").
			Compile(graph.WithSessions(graph.SessionConfig{Store: newSpy(), Migrations: []migrate.Migration{addTen, addTen}}))
		if !errors.Is(err, errcat.SessionStateMigrationChainAmbiguous) {
			t.Fatalf("Compile = %v", err)
		}
	})
	t.Run("undeclared session field", func(t *testing.T) {
		_, err := graph.NewBuilder(mustSchema(t, chatTurns)).
			AddNode("n", func(context.Context, graph.State) (graph.Update, error) { return nil, nil }).
			AddEdge("n", graph.End).SetEntry("n").
			Compile(graph.WithSessions(graph.SessionConfig{Store: newSpy(), Fields: []string{"nope"}}))
		if !errors.Is(err, errcat.MappingReferencesUndeclaredField) {
			t.Fatalf("Compile = %v", err)
		}
	})
}

// interimHooks are session hooks whose interim saves write a mark.
type interimHooks struct{ final int }

func (interimHooks) CheckSession(stored, next graph.State) error { return nil }
func (h *interimHooks) MarkSession(string, graph.State, *graph.Suspension) ([]session.Mark, error) {
	h.final++
	return nil, nil
}
func (interimHooks) SessionInput(context.Context, graph.State, graph.SessionInfo) (graph.Update, error) {
	return nil, nil
}
func (interimHooks) InterimMarks(string) []session.Mark {
	return []session.Mark{{Key: "d:sig", Value: json.RawMessage(`{"kind":"decided"}`)}}
}

// TestSessionsInterimMarks: hooks with InterimSessionMarks write their
// marks with each SaveSession, so a process killed after the save
// leaves them (here: the node fails after saving).
func TestSessionsInterimMarks(t *testing.T) {
	spy := newSpy()
	boom := errors.New("boom")
	g := chatGraph(t, graph.SessionConfig{Store: spy}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		if err := graph.SaveSession(ctx, chatScratch.Set("saved mid-run")); err != nil {
			return nil, err
		}
		return nil, boom
	})
	h := &interimHooks{}
	if _, err := g.Invoke(t.Context(), chatMessages.Add("hi"), graph.WithSessionID("m"), graph.WithSessionHooks(h)); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the node's failure", err)
	}
	if raw, err := spy.LoadMark(t.Context(), "m", "d:sig"); err != nil || string(raw) != `{"kind":"decided"}` {
		t.Fatalf("the interim save's mark: %s, %v", raw, err)
	}
	if h.final != 0 {
		t.Errorf("MarkSession ran %d times for a failed invocation", h.final)
	}
}
