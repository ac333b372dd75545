package graph_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// failingDelete is a session store whose Delete fails.
type failingDelete struct{ session.Store }

func (failingDelete) Delete(context.Context, string) error { return errors.New("disk full") }

// DeleteSession calls the WithSessionForget functions of the graph and
// of the graphs it runs as subgraphs, once each, after the session's
// record is deleted; not when the delete fails (the session stays).
func TestDeleteSessionForgets(t *testing.T) {
	var got []string
	forget := func(who string) graph.CompileOption {
		return graph.WithSessionForget(func(id string) { got = append(got, who+":"+id) })
	}
	schema, err := graph.NewSchema(notes)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(ctx context.Context, s graph.State) (graph.Update, error) { return notes.Add("x"), nil }
	sub, err := graph.NewBuilder(schema).AddNode("n", leaf).AddEdge("n", graph.End).SetEntry("n").
		Compile(forget("sub"), graph.WithSessionForget(nil))
	if err != nil {
		t.Fatal(err)
	}
	build := func(store session.Store) *graph.Graph {
		g, err := graph.NewBuilder(schema).
			AddSubgraph("a", sub).AddSubgraph("b", sub). // one graph twice: forgotten once
			AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").
			Compile(graph.WithSessions(graph.SessionConfig{Store: store}), forget("outer"), forget("outer2"))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	if err := build(failingDelete{store}).DeleteSession(ctx, "s1"); err == nil {
		t.Fatal("a failed store delete succeeded")
	}
	if len(got) != 0 {
		t.Fatalf("a failed delete forgot %q", got)
	}
	if err := build(store).DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"outer:s1", "outer2:s1", "sub:s1"}, got); diff != "" {
		t.Fatalf("forgotten (-want +got):\n%s", diff)
	}
}

// A WithSessionForget function that panics does not stop the delete
// half done: the functions after it are called, the session's paused and
// checkpoint records are deleted, the delete succeeds, and the panic is
// logged at level ERROR with the session's id.
func TestDeleteSessionForgetPanics(t *testing.T) {
	schema, err := graph.NewSchema(notes)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var after []string
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	ckpt := checkpoint.NewMemoryStore(nil)
	leaf := func(ctx context.Context, s graph.State) (graph.Update, error) { return notes.Add("x"), nil }
	g, err := graph.NewBuilder(schema).AddNode("n", leaf).AddEdge("n", graph.End).SetEntry("n").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(ckpt),
			graph.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
			graph.WithSessionForget(func(string) { panic("forget broke") }),
			graph.WithSessionForget(func(id string) { after = append(after, id) }))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []checkpoint.Kind{checkpoint.KindSuspended, checkpoint.KindCheckpoint} {
		if err := ckpt.Save(ctx, checkpoint.Record{InvocationID: "inv-" + string(k), Kind: k, SessionID: "s1", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.DeleteSession(ctx, "s1"); err != nil {
		t.Fatalf("DeleteSession = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{"s1"}, after); diff != "" {
		t.Fatalf("the next forget (-want +got):\n%s", diff)
	}
	for _, k := range []checkpoint.Kind{checkpoint.KindSuspended, checkpoint.KindCheckpoint} {
		if _, err := ckpt.Load(ctx, checkpoint.Key{InvocationID: "inv-" + string(k), Kind: k}); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("the session's %s record after the delete: %v, want not found", k, err)
		}
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "forget broke") || !strings.Contains(l, "session_id=s1") {
		t.Errorf("log = %q, want the panic at ERROR with the session id", l)
	}
}
