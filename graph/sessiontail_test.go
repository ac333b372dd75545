package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// storedList reads a list field of the stored session whole.
func storedList(t *testing.T, s session.Store, id, field string) []string {
	t.Helper()
	rec, err := s.Load(t.Context(), session.LoadRequest{SessionID: id})
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	var out []string
	if err := json.Unmarshal(rec.State[field], &out); err != nil {
		t.Fatalf("field %q = %s: %v", field, rec.State[field], err)
	}
	return out
}

// seedHistory stores a session whose messages are m0..m(n-1), appended
// one write at a time (as turns do), and turns n.
func seedHistory(t *testing.T, s *spyStore, id string, n int) []string {
	t.Helper()
	ctx := t.Context()
	var want []string
	w, err := s.MemoryStore.Save(ctx, session.SaveRequest{SessionID: id, SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`), "turns": json.RawMessage(fmt.Sprint(n))}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 5 {
		var items []json.RawMessage
		for j := i; j < min(i+5, n); j++ {
			items = append(items, json.RawMessage(fmt.Sprintf(`"m%d"`, j)))
			want = append(want, fmt.Sprintf("m%d", j))
		}
		if w, err = s.MemoryStore.Append(ctx, session.AppendRequest{SessionID: id, SchemaVersion: "v1", ExpectedVersion: w.Version,
			Append: map[string][]json.RawMessage{"messages": items}}); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func tailConfig(s session.Store, max int) graph.SessionConfig {
	return graph.SessionConfig{Store: s, Fields: []string{"messages", "turns"}, SchemaVersion: "v1", CacheSize: -1,
		Tail: []session.ListTail{{Field: "messages", Max: max}}}
}

// A cold turn loads the tail: the state holds it, the offset counts the
// rest, and the turn appends to the whole stored history.
func TestSessionTailColdTurn(t *testing.T) {
	spy := newSpy()
	want := seedHistory(t, spy, "s", 40)
	var offset int
	g := chatGraph(t, tailConfig(spy, 6), func(ctx context.Context, s graph.State) (graph.Update, error) {
		offset = graph.SessionListOffset(ctx, "messages")
		return nil, nil
	})
	for turnNo := 1; turnNo <= 3; turnNo++ {
		res, err := turn(t, g, "s", fmt.Sprint("hi ", turnNo))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprint("hi ", turnNo), fmt.Sprintf("reply %d", 40+turnNo))
		got := chatMessages.Get(res.State)
		if skip := res.SessionOffsets["messages"]; skip+len(got) != len(want) || !slices.Equal(got, want[skip:]) || len(got) != 8 {
			t.Fatalf("turn %d: state %v with offset %d; want the last 8 of %v", turnNo, got, skip, want)
		}
		if offset != res.SessionOffsets["messages"] {
			t.Errorf("SessionListOffset = %d, Result.SessionOffsets = %d", offset, res.SessionOffsets["messages"])
		}
		if got := storedList(t, spy, "s", "messages"); !slices.Equal(got, want) {
			t.Fatalf("turn %d: stored %v, want %v", turnNo, got, want)
		}
	}
	if spy.saves != 0 {
		t.Errorf("%d whole saves; want only appends", spy.saves)
	}
	// SessionState is whole.
	st, err := g.SessionState(t.Context(), "s")
	if err != nil || !slices.Equal(chatMessages.Get(st), want) {
		t.Fatalf("SessionState = %v, %v", chatMessages.Get(st), err)
	}
	// A tail longer than the history: whole, no offsets.
	g2 := chatGraph(t, tailConfig(spy, 1000))
	res, err := turn(t, g2, "s", "x")
	if err != nil || res.SessionOffsets != nil || len(chatMessages.Get(res.State)) != len(want)+2 {
		t.Fatalf("long tail: offsets %v, %d messages, %v", res.SessionOffsets, len(chatMessages.Get(res.State)), err)
	}
}

// With a cache, a partial cached copy serves later tail turns but never
// SessionState.
func TestSessionTailCached(t *testing.T) {
	spy := newSpy()
	want := seedHistory(t, spy, "s", 30)
	cfg := tailConfig(spy, 4)
	cfg.CacheSize = 0
	g := chatGraph(t, cfg)
	for i := range 3 {
		res, err := turn(t, g, "s", "q")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, "q", fmt.Sprintf("reply %d", 31+i))
		got := chatMessages.Get(res.State)
		if skip := res.SessionOffsets["messages"]; !slices.Equal(got, want[skip:]) || skip != 26 {
			t.Fatalf("turn %d: %v offset %d", i, got, skip)
		}
	}
	if spy.notModified != 2 {
		t.Errorf("not-modified answers = %d, want 2 (the partial copy is cached)", spy.notModified)
	}
	st, err := g.SessionState(t.Context(), "s")
	if err != nil || !slices.Equal(chatMessages.Get(st), want) {
		t.Fatalf("SessionState = %v, %v; want the whole history", chatMessages.Get(st), err)
	}
}

// A last-write-wins race fallback saves the whole history, never the
// partial one.
func TestSessionTailRaceFallback(t *testing.T) {
	spy := newSpy()
	want := seedHistory(t, spy, "s", 25)
	g := chatGraph(t, tailConfig(spy, 3))
	spy.conflictAppends = 1
	if _, err := turn(t, g, "s", "x"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "x", "reply 26")
	if got := storedList(t, spy, "s", "messages"); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if spy.saves != 1 {
		t.Errorf("saves = %d, want the one fallback", spy.saves)
	}
	// The binding stays in the state's coordinates: the next turn
	// appends after it.
	if _, err := turn(t, g, "s", "y"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "y", "reply 27")
	if got := storedList(t, spy, "s", "messages"); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
}

// When the left-out items are gone (the session deleted or its list
// replaced between load and write), a write that needs them fails with
// session_write_conflict and stores nothing partial.
func TestSessionTailPrefixGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		meddle func(ctx context.Context, s *spyStore) error
		check  func(t *testing.T, s *spyStore)
	}{
		{"deleted", func(ctx context.Context, s *spyStore) error { return s.MemoryStore.Delete(ctx, "s") },
			func(t *testing.T, s *spyStore) {
				if _, err := s.MemoryStore.Load(t.Context(), session.LoadRequest{SessionID: "s"}); err == nil {
					t.Error("the deleted session was written again from a partial history")
				}
			}},
		{"replaced", func(ctx context.Context, s *spyStore) error {
			_, err := s.MemoryStore.Save(ctx, session.SaveRequest{SessionID: "s", SchemaVersion: "v1",
				State: map[string]json.RawMessage{"messages": json.RawMessage(`["new"]`)}})
			return err
		}, func(t *testing.T, s *spyStore) {
			if got := storedList(t, s, "s", "messages"); !slices.Equal(got, []string{"new"}) {
				t.Errorf("stored %v, want the replacing writer's list", got)
			}
		}},
		{"rewritten", func(ctx context.Context, s *spyStore) error {
			var l []string
			for i := range 30 {
				l = append(l, fmt.Sprint("other ", i))
			}
			b, _ := json.Marshal(l)
			_, err := s.MemoryStore.Save(ctx, session.SaveRequest{SessionID: "s", SchemaVersion: "v1",
				State: map[string]json.RawMessage{"messages": b}})
			return err
		}, func(t *testing.T, s *spyStore) {
			if got := storedList(t, s, "s", "messages"); len(got) != 30 || got[0] != "other 0" {
				t.Errorf("stored %v, want the replacing writer's list", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spy := newSpy()
			seedHistory(t, spy, "s", 20)
			g := chatGraph(t, tailConfig(spy, 3), func(ctx context.Context, s graph.State) (graph.Update, error) {
				return nil, tc.meddle(ctx, spy)
			})
			_, err := turn(t, g, "s", "x")
			if errcat.Of(err) != errcat.SessionWriteConflict {
				t.Fatalf("turn = %v, want session_write_conflict", err)
			}
			tc.check(t, spy)
		})
	}
}

// A suspension of a tail-loaded turn stores its paused state whole, and
// the resume continues with the whole history.
func TestSessionTailSuspendResume(t *testing.T) {
	spy := newSpy()
	ctx := t.Context()
	w, err := spy.MemoryStore.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"notes": json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 12 {
		want = append(want, fmt.Sprint("n", i))
		if w, err = spy.MemoryStore.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
			Append: map[string][]json.RawMessage{"notes": {json.RawMessage(fmt.Sprintf(`"n%d"`, i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	schema := mustSchema(t, notes, okField)
	var seen []string
	g := mustCompile(t, graph.NewBuilder(schema).
		AddNode("first", func(ctx context.Context, s graph.State) (graph.Update, error) { return notes.Add("asked"), nil }).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if v, _ := s.Get("ok"); v != nil {
				return nil, nil
			}
			return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig"})
		}).
		AddNode("last", func(ctx context.Context, s graph.State) (graph.Update, error) {
			seen = notes.Get(s)
			return notes.Add("done"), nil
		}).
		AddEdge("first", "gate").AddEdge("gate", "last").AddEdge("last", graph.End).SetEntry("first"),
		graph.WithSessions(graph.SessionConfig{Store: spy, Fields: []string{"notes"}, CacheSize: -1,
			Tail: []session.ListTail{{Field: "notes", Max: 2}}}))
	res, err := g.Invoke(ctx, nil, graph.WithSessionID("s"))
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("invoke: %v %v", res.Status, err)
	}
	want = append(want, "asked")
	if got := notes.Get(res.State); !slices.Equal(got, want[res.SessionOffsets["notes"]:]) || res.SessionOffsets["notes"] != 10 {
		t.Fatalf("suspended state %v offset %d", got, res.SessionOffsets["notes"])
	}
	if got := storedList(t, spy, "s", "notes"); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	r2, err := g.Resume(ctx, res.InvocationID, graph.Update{"ok": true}, graph.RefuseStaleResume())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("the resumed run saw %v, want the whole history %v", seen, want)
	}
	want = append(want, "done")
	if got := notes.Get(r2.State); !slices.Equal(got, want) || r2.SessionOffsets != nil {
		t.Fatalf("resumed state %v offsets %v", got, r2.SessionOffsets)
	}
	if got := storedList(t, spy, "s", "notes"); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
}

// noAppend hides a store's Appender.
type noAppend struct{ session.Store }

func TestSessionTailCompile(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  graph.SessionConfig
	}{
		{"not a session field", graph.SessionConfig{Store: newSpy(), Fields: []string{"turns"}, Tail: []session.ListTail{{Field: "messages", Max: 1}}}},
		{"not a list", graph.SessionConfig{Store: newSpy(), Tail: []session.ListTail{{Field: "turns", Max: 1}}}},
		{"no appender", graph.SessionConfig{Store: noAppend{newSpy()}, Tail: []session.ListTail{{Field: "messages", Max: 1}}}},
		{"bad max", graph.SessionConfig{Store: newSpy(), Tail: []session.ListTail{{Field: "messages", Max: 0}}}},
		{"twice", graph.SessionConfig{Store: newSpy(), Tail: []session.ListTail{{Field: "messages", Max: 1}, {Field: "messages", Max: 2}}}},
	} {
		_, err := graph.NewBuilder(mustSchema(t, chatMessages, chatTurns, chatScratch)).
			AddNode("n", func(ctx context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
			AddEdge("n", graph.End).SetEntry("n").Compile(graph.WithSessions(tc.cfg))
		if errcat.Of(err) != errcat.InvalidGraph {
			t.Errorf("%s: Compile = %v, want invalid_graph", tc.name, err)
		}
	}
}

// TestSessionTailRandomized interleaves turns of graphs with and without
// tails and caches, injected race fallbacks and whole reads, and checks
// the stored history against a model after every step.
func TestSessionTailRandomized(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	spy := newSpy()
	var graphs []*graph.Graph
	for _, max := range []int{1, 2, 5, 13} {
		for _, cache := range []int{-1, 0} {
			cfg := tailConfig(spy, max)
			cfg.CacheSize = cache
			graphs = append(graphs, chatGraph(t, cfg))
		}
	}
	graphs = append(graphs, chatGraph(t, graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}, SchemaVersion: "v1"}))
	var model []string
	turns := 0
	for step := range 150 {
		g := graphs[rng.IntN(len(graphs))]
		if rng.IntN(6) == 0 {
			spy.mu.Lock()
			spy.conflictAppends = 1
			spy.mu.Unlock()
		}
		msg := fmt.Sprint("u", step)
		res, err := turn(t, g, "s", msg)
		if err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		turns++
		model = append(model, msg, fmt.Sprintf("reply %d", turns))
		got := chatMessages.Get(res.State)
		if skip := res.SessionOffsets["messages"]; skip+len(got) != len(model) || !slices.Equal(got, model[skip:]) {
			t.Fatalf("seed %d step %d: state %v offset %d, model %v", seed, step, got, skip, model)
		}
		if got := storedList(t, spy, "s", "messages"); !slices.Equal(got, model) {
			t.Fatalf("seed %d step %d: stored %v, model %v", seed, step, got, model)
		}
	}
}

// WithSessionTail adds a tail hint where it can be honoured and is
// ignored elsewhere; SessionWholeState gives a node the whole history.
func TestSessionTailHint(t *testing.T) {
	spy := newSpy()
	want := seedHistory(t, spy, "s", 20)
	var whole []string
	var wholeErr error
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, chatMessages, chatTurns, chatScratch)).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			w, err := graph.SessionWholeState(ctx, s)
			whole, wholeErr = chatMessages.Get(w), err
			return chatMessages.Add("r"), nil
		}).SetEntry("reply").AddEdge("reply", graph.End),
		graph.WithSessionTail(session.ListTail{Field: "messages", Max: 2}, session.ListTail{Field: "turns", Max: 2}, session.ListTail{Field: "nope", Max: 1}),
		graph.WithSessions(graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}, SchemaVersion: "v1", CacheSize: -1}))
	res, err := turn(t, g, "s", "x")
	if err != nil || wholeErr != nil {
		t.Fatal(err, wholeErr)
	}
	want = append(want, "x")
	if res.SessionOffsets["messages"] != 18 || !slices.Equal(whole, want) {
		t.Fatalf("offsets %v, whole %v; want offset 18 and %v", res.SessionOffsets, whole, want)
	}
	want = append(want, "r")
	if got := storedList(t, spy, "s", "messages"); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	// Without an Appender the hint is ignored.
	g2 := mustCompile(t, graph.NewBuilder(mustSchema(t, chatMessages, chatTurns, chatScratch)).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
		SetEntry("reply").AddEdge("reply", graph.End),
		graph.WithSessionTail(session.ListTail{Field: "messages", Max: 2}),
		graph.WithSessions(graph.SessionConfig{Store: noAppend{spy}, SchemaVersion: "v1", CacheSize: -1}))
	res, err = turn(t, g2, "s", "y")
	if err != nil || res.SessionOffsets != nil {
		t.Fatalf("no appender: offsets %v, %v", res.SessionOffsets, err)
	}
}

// TestSessionTailSuspendRandomized interleaves turns, some suspending
// for an approval, on graphs with and without tails and caches sharing
// one session and paused-record store: each suspension is resumed,
// sometimes by another graph (a restarted worker), and sometimes the
// turn's append first loses an injected race. The stored history is
// checked against a model after every step.
func TestSessionTailSuspendRandomized(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	spy := newSpy()
	records := checkpoint.NewMemoryStore(nil)
	schema := mustSchema(t, chatMessages, chatTurns, okField)
	build := func(cfg graph.SessionConfig) *graph.Graph {
		return mustCompile(t, graph.NewBuilder(schema).
			AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
				n := chatTurns.Get(s) + 1
				return chatMessages.Add(fmt.Sprintf("reply %d", n)).With(chatTurns.Set(n)), nil
			}).
			AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
				msgs := chatMessages.Get(s)
				if v, _ := s.Get("ok"); v == nil && strings.HasPrefix(msgs[len(msgs)-2], "gate") {
					return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig"})
				}
				return nil, nil
			}).
			AddNode("done", func(ctx context.Context, s graph.State) (graph.Update, error) {
				if v, _ := s.Get("ok"); v != nil {
					return chatMessages.Add("approved"), nil
				}
				return nil, nil
			}).
			AddEdge("reply", "gate").AddEdge("gate", "done").AddEdge("done", graph.End).SetEntry("reply"),
			graph.WithSessions(cfg), graph.WithCheckpointStore(records))
	}
	var graphs []*graph.Graph
	for _, max := range []int{1, 4, 9} {
		for _, cache := range []int{-1, 0} {
			cfg := tailConfig(spy, max)
			cfg.CacheSize = cache
			graphs = append(graphs, build(cfg))
		}
	}
	graphs = append(graphs, build(graph.SessionConfig{Store: spy, Fields: []string{"messages", "turns"}, SchemaVersion: "v1"}))
	pick := func() *graph.Graph { return graphs[rng.IntN(len(graphs))] }
	race := func() {
		if rng.IntN(5) == 0 {
			spy.mu.Lock()
			spy.conflictAppends = 1
			spy.mu.Unlock()
		}
	}
	var model []string
	turns := 0
	check := func(step int, what string) {
		t.Helper()
		if got := storedList(t, spy, "s", "messages"); !slices.Equal(got, model) {
			t.Fatalf("seed %d step %d (%s): stored %v, model %v", seed, step, what, got, model)
		}
	}
	for step := range 120 {
		msg := fmt.Sprint("u", step)
		if rng.IntN(3) == 0 {
			msg = fmt.Sprint("gate", step)
		}
		race()
		res, err := pick().Invoke(t.Context(), chatMessages.Add(msg), graph.WithSessionID("s"))
		if err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		turns++
		model = append(model, msg, fmt.Sprintf("reply %d", turns))
		check(step, "turn")
		if res.Status != graph.Suspended {
			continue
		}
		race()
		r2, err := pick().Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}, graph.RefuseStaleResume())
		if errcat.Of(err) == errcat.SessionSaveFailed {
			// A resumed run never falls back to a whole save: it fails,
			// stores nothing, and its paused record stays for a retry.
			check(step, "failed resume")
			r2, err = pick().Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}, graph.RefuseStaleResume())
		}
		if err != nil || r2.Status != graph.Completed {
			t.Fatalf("seed %d step %d: resume %v, %v", seed, step, r2.Status, err)
		}
		model = append(model, "approved")
		if got := chatMessages.Get(r2.State); !slices.Equal(got, model) {
			t.Fatalf("seed %d step %d: the resumed state is not the whole history: %v, model %v", seed, step, got, model)
		}
		check(step, "resume")
	}
}

// A graph with a checkpointer loads whole: its checkpoints hold whole
// states.
func TestSessionTailCheckpointer(t *testing.T) {
	spy := newSpy()
	seedHistory(t, spy, "s", 20)
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, chatMessages, chatTurns, chatScratch)).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) { return chatMessages.Add("r"), nil }).
		SetEntry("reply").AddEdge("reply", graph.End),
		graph.WithSessions(tailConfig(spy, 2)), graph.WithCheckpointer(checkpoint.NewMemoryStore(nil)))
	res, err := turn(t, g, "s", "x")
	if err != nil || res.SessionOffsets != nil || len(chatMessages.Get(res.State)) != 22 {
		t.Fatalf("offsets %v, %d messages, %v", res.SessionOffsets, len(chatMessages.Get(res.State)), err)
	}
}
