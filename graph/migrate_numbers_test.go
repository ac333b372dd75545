package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/session"
)

// A checkpoint migration that does not touch a field leaves it intact:
// the state decodes with exact numbers (as a session's does), so an int64
// above 2^53 is not rounded through float64.
func TestCheckpointMigrationKeepsLargeInts(t *testing.T) {
	id := graph.NewField[int64]("id")
	n := graph.NewField[int]("n")
	schema := mustSchema(t, id, n).WithVersion("v2")
	noop := func(s map[string]any) (map[string]any, error) { return s, nil }
	store := checkpoint.NewMemoryStore(nil)
	var seen int64
	g := mustCompile(t, graph.NewBuilder(schema).
		AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) {
			seen = id.Get(s)
			return n.Set(2), nil
		}).
		AddEdge("n", graph.End).SetEntry("n"),
		graph.WithCheckpointer(store, graph.CheckpointMigrations(migrate.Migration{From: "v1", To: "v2", Fn: noop})))
	rec := graph.CheckpointRecord{InvocationID: "old", SchemaVersion: "v1", Path: []string{"n"}, Rerun: true,
		State: []byte(`{"id":9007199254740993,"n":1}`)}
	stored, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	res, err := g.ResumeCheckpoint(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if seen != 9007199254740993 || id.Get(res.State) != 9007199254740993 {
		t.Fatalf("after a no-op checkpoint migration id = %d (node saw %d), want 9007199254740993", id.Get(res.State), seen)
	}
}

// The structural form a migration sees does not depend on whether it
// migrates a session or a checkpoint (migrate/doc.go): an integer is an
// int in both, so a migration written once (s["n"].(int)) serves both.
func TestCheckpointMigrationSeesIntsLikeSessions(t *testing.T) {
	n := graph.NewField[int]("n")
	schema := mustSchema(t, n).WithVersion("v2")
	addTen := func(s map[string]any) (map[string]any, error) {
		v, ok := s["n"].(int)
		if !ok {
			return nil, fmt.Errorf("n is %T, not int as in a session migration", s["n"])
		}
		s["n"] = v + 10
		return s, nil
	}
	// The session path: the migration applies.
	sess := session.NewMemoryStore(session.MemoryConfig{})
	if _, err := sess.Save(t.Context(), session.SaveRequest{SessionID: "m", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"n": json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	sg := mustCompile(t, graph.NewBuilder(schema).
		AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
		AddEdge("n", graph.End).SetEntry("n"),
		graph.WithSessions(graph.SessionConfig{Store: sess, SchemaVersion: "v2", Migrations: []migrate.Migration{{From: "v1", To: "v2", Fn: addTen}}}))
	res, err := sg.Invoke(t.Context(), nil, graph.WithSessionID("m"))
	if err != nil || n.Get(res.State) != 11 {
		t.Fatalf("session migration: n = %d, %v", n.Get(res.State), err)
	}
	// The checkpoint path: the same migration.
	store := checkpoint.NewMemoryStore(nil)
	g := mustCompile(t, graph.NewBuilder(schema).
		AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
		AddEdge("n", graph.End).SetEntry("n"),
		graph.WithCheckpointer(store, graph.CheckpointMigrations(migrate.Migration{From: "v1", To: "v2", Fn: addTen})))
	rec := graph.CheckpointRecord{InvocationID: "old", SchemaVersion: "v1", Path: []string{"n"}, Rerun: true,
		State: []byte(`{"n":1}`)}
	stored, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	res, err = g.ResumeCheckpoint(t.Context(), "old")
	if err != nil || n.Get(res.State) != 11 {
		t.Fatalf("checkpoint migration: n = %v, %v", res, err)
	}
}

// A session field holding a uint64 above MaxInt64 survives a session
// migration that does not touch it: the structural form keeps it a
// uint64, not a float64 that would re-encode as another integer.
func TestSessionMigrationKeepsUint64(t *testing.T) {
	h := graph.NewField[uint64]("h")
	schema := mustSchema(t, h).WithVersion("v2")
	sess := session.NewMemoryStore(session.MemoryConfig{})
	if _, err := sess.Save(t.Context(), session.SaveRequest{SessionID: "m", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"h": json.RawMessage(`18446744073709551615`)}}); err != nil {
		t.Fatal(err)
	}
	noop := func(s map[string]any) (map[string]any, error) { return s, nil }
	g := mustCompile(t, graph.NewBuilder(schema).
		AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
		AddEdge("n", graph.End).SetEntry("n"),
		graph.WithSessions(graph.SessionConfig{Store: sess, SchemaVersion: "v2", Migrations: []migrate.Migration{{From: "v1", To: "v2", Fn: noop}}}))
	res, err := g.Invoke(t.Context(), nil, graph.WithSessionID("m"))
	if err != nil || h.Get(res.State) != 18446744073709551615 {
		t.Fatalf("after a no-op session migration h = %v, %v; want 18446744073709551615", res, err)
	}
}
