package graph_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// flakyOnce fails its first call, then succeeds with u.
func flakyOnce(u graph.Update) (graph.NodeFunc, *atomic.Int32) {
	var calls atomic.Int32
	return func(ctx context.Context, s graph.State) (graph.Update, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("transient outage")
		}
		return u, nil
	}, &calls
}

func TestCheckpointResumeAfterFailure(t *testing.T) {
	store := checkpoint.NewMemoryStore(nil)
	var aCalls atomic.Int32
	b, bCalls := flakyOnce(trail.Add("b"))
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, trail)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			aCalls.Add(1)
			return trail.Add("a"), nil
		}).
		AddNode("b", b).
		AddNode("c", func(ctx context.Context, s graph.State) (graph.Update, error) { return trail.Add("c"), nil }).
		AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.End).SetEntry("a"),
		graph.WithCheckpointer(store))
	first, err := g.Invoke(t.Context(), nil, graph.WithCorrelationID("req-7"))
	if err == nil {
		t.Fatal("the first run must fail at b")
	}
	res, err := g.ResumeCheckpoint(t.Context(), first.InvocationID, graph.WithInvocationID("ignored"))
	if err != nil || res.Status != graph.Completed {
		t.Fatalf("ResumeCheckpoint = %v, %v", res.Status, err)
	}
	if res.InvocationID == first.InvocationID || res.InvocationID == "ignored" || res.CorrelationID != "req-7" {
		t.Errorf("resumed ids = %s / %s; want a fresh invocation id and the original correlation id", res.InvocationID, res.CorrelationID)
	}
	if fmt.Sprint(res.Path) != "[b c]" || aCalls.Load() != 1 || bCalls.Load() != 2 {
		t.Errorf("path %v, a ran %d times, b %d; the completed node must not run again", res.Path, aCalls.Load(), bCalls.Load())
	}
	if got := stateJSON(t, res.State); got != `{"trail":["a","b","c"]}` {
		t.Errorf("final state = %s", got)
	}
	// The completed run checkpointed too: resuming it continues after
	// the last node, i.e. finishes at once.
	again, err := g.ResumeCheckpoint(t.Context(), res.InvocationID)
	if err != nil || len(again.Path) != 0 || stateJSON(t, again.State) != `{"trail":["a","b","c"]}` {
		t.Errorf("resume of a completed run = %v %v, %v", again.Path, stateJSON(t, again.State), err)
	}
}

func TestCheckpointResumeInsideSubgraph(t *testing.T) {
	store := checkpoint.NewMemoryStore(nil)
	inner2, calls := flakyOnce(trail.Add("inner2"))
	sub := mustCompile(t, graph.NewBuilder(mustSchema(t, trail)).
		AddNode("inner1", func(ctx context.Context, s graph.State) (graph.Update, error) { return trail.Add("inner1"), nil }).
		AddNode("inner2", inner2).
		AddEdge("inner1", "inner2").AddEdge("inner2", graph.End).SetEntry("inner1"))
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, trail)).
		AddNode("pre", func(ctx context.Context, s graph.State) (graph.Update, error) { return trail.Add("pre"), nil }).
		AddSubgraph("sub", sub).
		AddNode("post", func(ctx context.Context, s graph.State) (graph.Update, error) { return trail.Add("post"), nil }).
		AddEdge("pre", "sub").AddEdge("sub", "post").AddEdge("post", graph.End).SetEntry("pre"),
		graph.WithCheckpointer(store))
	first, _ := g.Invoke(t.Context(), nil)
	res, err := g.ResumeCheckpoint(t.Context(), first.InvocationID)
	if err != nil || res.Status != graph.Completed {
		t.Fatalf("ResumeCheckpoint = %v, %v", res.Status, err)
	}
	if got := stateJSON(t, res.State); got != `{"trail":["pre","inner1","inner2","post"]}` || calls.Load() != 2 {
		t.Errorf("final = %s (inner2 calls %d); the subgraph must resume at its failed node", got, calls.Load())
	}
}

type failingSaves struct{ *checkpoint.MemoryStore }

func (failingSaves) Save(context.Context, checkpoint.Record) error { return errors.New("disk full") }

func TestCheckpointErrors(t *testing.T) {
	build := func(opts ...graph.CompileOption) *graph.Graph {
		return mustCompile(t, graph.NewBuilder(mustSchema(t, trail)).
			AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { return trail.Add("a"), nil }).
			AddEdge("a", graph.End).SetEntry("a"), opts...)
	}
	if _, err := build().ResumeCheckpoint(t.Context(), "x"); !errors.Is(err, errcat.CheckpointNotFound) {
		t.Errorf("without a checkpointer = %v", err)
	}
	store := checkpoint.NewMemoryStore(nil)
	g := build(graph.WithCheckpointer(store))
	if _, err := g.ResumeCheckpoint(t.Context(), "missing"); !errors.Is(err, errcat.CheckpointNotFound) {
		t.Errorf("unknown id = %v", err)
	}
	if err := store.Save(t.Context(), checkpoint.Record{InvocationID: "bad", Kind: checkpoint.KindCheckpoint, Data: []byte(`{"format":1,"positions":[{"node":"zzz","state":{}}]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ResumeCheckpoint(t.Context(), "bad"); !errors.Is(err, errcat.CheckpointRecordInvalid) {
		t.Errorf("a record for another graph = %v", err)
	}
	res, err := build(graph.WithCheckpointer(failingSaves{checkpoint.NewMemoryStore(nil)})).Invoke(t.Context(), nil)
	if !errors.Is(err, errcat.CheckpointSaveFailed) || res.Status != graph.Errored {
		t.Errorf("a failing checkpoint save = %v, %v", res.Status, err)
	}
}
