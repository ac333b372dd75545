package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

var (
	notes   = graph.NewListField[string]("notes", graph.Append)
	okField = graph.NewDynamicField("ok", graph.TypeAny)
)

// notesGraph: first appends "asked", gate suspends (with a payload
// schema requiring {"ok": boolean}), last appends "done".
func notesGraph(t *testing.T, store session.Store) *graph.Graph {
	t.Helper()
	schema, err := graph.NewSchema(notes, okField)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(schema).
		AddNode("first", func(ctx context.Context, s graph.State) (graph.Update, error) { return notes.Add("asked"), nil }).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if v, _ := s.Get("ok"); v != nil {
				return nil, nil
			}
			return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig",
				PayloadSchema: json.RawMessage(`{"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"}}}`)})
		}).
		AddNode("last", func(ctx context.Context, s graph.State) (graph.Update, error) { return notes.Add("done"), nil }).
		AddEdge("first", "gate").AddEdge("gate", "last").AddEdge("last", graph.End).
		SetEntry("first").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store, Fields: []string{"notes"}}))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func storedNotes(t *testing.T, store session.Store, id string) []string {
	t.Helper()
	rec, err := store.Load(t.Context(), session.LoadRequest{SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := json.Unmarshal(rec.State["notes"], &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A resume never writes the paused state over what the session gained
// after the suspension; with RefuseStaleResume it is refused instead.
func TestResumeRebasesOnTheStoredSession(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		store := session.NewMemoryStore(session.MemoryConfig{})
		g := notesGraph(t, store)
		ctx := t.Context()
		res, err := g.Invoke(ctx, nil, graph.WithSessionID("s"))
		if err != nil || res.Status != graph.Suspended {
			t.Fatalf("invoke: %v %v", res.Status, err)
		}
		rec, _ := store.Load(ctx, session.LoadRequest{SessionID: "s"})
		if _, err := store.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: rec.Version,
			Append: map[string][]json.RawMessage{"notes": {json.RawMessage(`"later"`)}}}); err != nil {
			t.Fatal(err)
		}
		var opts []graph.InvokeOption
		if refuse {
			opts = append(opts, graph.RefuseStaleResume())
		}
		r2, err := g.Resume(ctx, res.InvocationID, graph.Update{"ok": true}, opts...)
		if refuse {
			if !errors.Is(err, graph.ErrStaleResume) || errcat.Of(err) != errcat.SuspensionRecordInvalid {
				t.Fatalf("stale resume error = %v", err)
			}
			if got := storedNotes(t, store, "s"); !slices.Equal(got, []string{"asked", "later"}) {
				t.Fatalf("notes = %v", got)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := storedNotes(t, store, "s"); !slices.Equal(got, []string{"asked", "later", "done"}) {
			t.Fatalf("notes = %v, want the later note kept", got)
		}
		if got := notes.Get(r2.State); !slices.Equal(got, []string{"asked", "later", "done"}) {
			t.Fatalf("result state notes = %v", got)
		}
	}
}

func TestResumePayloadSchema(t *testing.T) {
	store := session.NewMemoryStore(session.MemoryConfig{})
	g := notesGraph(t, store)
	ctx := t.Context()
	res, _ := g.Invoke(ctx, nil, graph.WithSessionID("s"))
	for _, p := range []graph.Update{nil, {}, {"ok": 1}, {"ok": "yes"}} {
		_, err := g.Resume(ctx, res.InvocationID, p)
		if errcat.Of(err) != errcat.SuspensionResumePayloadInvalid {
			t.Fatalf("Resume(%v) error = %v, want suspension_resume_payload_invalid", p, err)
		}
	}
	if _, err := g.Resume(ctx, res.InvocationID, graph.Update{"ok": false}); err != nil {
		t.Fatalf("a valid payload after invalid ones: %v", err)
	}
}

func TestSessionCheckAndMarks(t *testing.T) {
	store := session.NewMemoryStore(session.MemoryConfig{})
	g := notesGraph(t, store)
	ctx := t.Context()
	refuse := errcat.New(errcat.ProviderInvalidResponse, "no")
	res, err := g.Invoke(ctx, nil, graph.WithSessionID("s"),
		graph.WithSessionCheck(func(stored, next graph.State) error { return refuse }))
	if !errors.Is(err, refuse) || res.Status != graph.Errored {
		t.Fatalf("a refused suspension: %v, %v", res.Status, err)
	}
	if _, err := store.Load(ctx, session.LoadRequest{SessionID: "s"}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a refused write stored the session: %v", err)
	}
	marks := func(inv string, next graph.State, susp *graph.Suspension) ([]session.Mark, error) {
		v, _ := json.Marshal(map[string]any{"inv": inv, "suspended": susp != nil, "notes": notes.Get(next)})
		return []session.Mark{{Key: "m", Value: v}}, nil
	}
	res, err = g.Invoke(ctx, nil, graph.WithSessionID("s"), graph.WithSessionMarks(marks))
	if err != nil {
		t.Fatal(err)
	}
	v, err := store.LoadMark(ctx, "s", "m")
	if err != nil || string(v) != `{"inv":"`+res.InvocationID+`","notes":["asked"],"suspended":true}` {
		t.Fatalf("mark = %s, %v", v, err)
	}
	if _, err := g.Resume(ctx, res.InvocationID, graph.Update{"ok": true}, graph.WithSessionMarks(marks)); err != nil {
		t.Fatal(err)
	}
	if v, _ := store.LoadMark(ctx, "s", "m"); string(v) != `{"inv":"`+res.InvocationID+`","notes":["asked","done"],"suspended":false}` {
		t.Fatalf("mark after the resume = %s", v)
	}
}

func FuzzResumePayload(f *testing.F) {
	for _, s := range []string{`{}`, `{"ok":true}`, `{"ok":1}`, `null`, `[]`, `{"ok":{"x":[1,2]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		store := session.NewMemoryStore(session.MemoryConfig{})
		g := notesGraph(t, store)
		res, err := g.Invoke(t.Context(), nil, graph.WithSessionID("s"))
		if err != nil {
			t.Fatal(err)
		}
		var p graph.Update
		if json.Unmarshal([]byte(raw), &p) != nil {
			return
		}
		_, err = g.Resume(t.Context(), res.InvocationID, p)
		_, isBool := p["ok"].(bool)
		if isBool != (err == nil) {
			t.Fatalf("Resume(%s) error = %v", raw, err)
		}
	})
}
