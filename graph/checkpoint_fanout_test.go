package graph_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/store/sqlite"
)

// checkpointBackends are the stores checkpointing runs against.
func checkpointBackends(t *testing.T) map[string]func() checkpoint.Store {
	return map[string]func() checkpoint.Store{
		"memory": func() checkpoint.Store { return checkpoint.NewMemoryStore(nil) },
		"sqlite": func() checkpoint.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "ckpt.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close(context.Background()) })
			return st.Checkpoints()
		},
	}
}

// countingLeaf is a fan-out leaf computing item*10 that fails the items in
// failing while armed, and counts its runs per item.
type countingLeaf struct {
	mu      sync.Mutex
	runs    map[int]int
	failing map[int]bool
}

func (l *countingLeaf) fn(_ context.Context, s graph.State) (graph.Update, error) {
	v, _ := s.Get("item")
	i := v.(int)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[i]++
	if l.failing[i] {
		return nil, errors.New("instance outage")
	}
	return graph.Update{"result": i * 10}, nil
}

func TestCheckpointFanOutResume(t *testing.T) {
	for name, open := range checkpointBackends(t) {
		for _, tt := range []struct {
			name       string
			flushEvery int
			fail       int
			// rerun lists the items the resume runs.
			rerun []int
		}{
			{"per instance", 0, 2, []int{2, 3}},
			{"batched: unflushed completions re-run", 2, 3, []int{2, 3}},
			{"batched: flushed", 3, 3, []int{3}},
		} {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				leaf := &countingLeaf{runs: map[int]int{}, failing: map[int]bool{tt.fail: true}}
				cfg := itemsFan(fanLeaf(t, leaf.fn))
				cfg.Concurrency = graph.Fixed(1)
				g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", cfg).AddEdge("fan", graph.End).SetEntry("fan"),
					graph.WithCheckpointer(open(), graph.BatchFanOutSaves(tt.flushEvery)))
				first, err := g.Invoke(t.Context(), graph.Update{"items": []any{0, 1, 2, 3}})
				if err == nil {
					t.Fatal("the first run must fail")
				}
				leaf.mu.Lock()
				leaf.failing, leaf.runs = nil, map[int]int{}
				leaf.mu.Unlock()
				res, err := g.ResumeCheckpoint(t.Context(), first.InvocationID)
				if err != nil {
					t.Fatalf("resume: %v", err)
				}
				if got := field(t, res.State, "results"); got != "[0,10,20,30]" {
					t.Errorf("results = %s; every instance must contribute exactly once", got)
				}
				for i := range 4 {
					want := 0
					for _, r := range tt.rerun {
						if r == i {
							want = 1
						}
					}
					if leaf.runs[i] != want {
						t.Errorf("item %d ran %d times on resume, want %d", i, leaf.runs[i], want)
					}
				}
			})
		}
	}
}

func TestCheckpointFanOutCountDrift(t *testing.T) {
	store := checkpoint.NewMemoryStore(nil)
	leaf := &countingLeaf{runs: map[int]int{}, failing: map[int]bool{1: true}}
	g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", itemsFan(fanLeaf(t, leaf.fn))).
		AddEdge("fan", graph.End).SetEntry("fan"), graph.WithCheckpointer(store))
	first, _ := g.Invoke(t.Context(), graph.Update{"items": []any{0, 1, 2}})
	stored, err := store.Load(t.Context(), checkpoint.Key{InvocationID: first.InvocationID, Kind: checkpoint.KindCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := graph.DecodeCheckpoint(stored)
	if err != nil || len(rec.FanOutProgress) != 1 || rec.FanOutProgress[0].InstanceCount != 3 {
		t.Fatalf("saved progress = %+v, %v", rec, err)
	}
	rec.State = []byte(`{"items":[0,1]}`)
	out, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	leaf.runs = map[int]int{}
	_, err = g.ResumeCheckpoint(t.Context(), first.InvocationID)
	if !errors.Is(err, errcat.CheckpointRecordInvalid) || len(leaf.runs) != 0 {
		t.Errorf("resume with a changed count = %v (instances ran %v); want checkpoint_record_invalid before any instance", err, leaf.runs)
	}

	// More instance records than instances (a corrupted or foreign
	// record): refused too. Before, the resume panicked (index out of
	// range) out of ResumeCheckpoint.
	rec.State = []byte(`{"items":[0,1,2]}`)
	rec.FanOutProgress[0].Instances = append(rec.FanOutProgress[0].Instances, rec.FanOutProgress[0].Instances...)
	if out, err = rec.Encode(); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	_, err = g.ResumeCheckpoint(t.Context(), first.InvocationID)
	if !errors.Is(err, errcat.CheckpointRecordInvalid) || len(leaf.runs) != 0 {
		t.Errorf("resume with extra instance records = %v (instances ran %v); want checkpoint_record_invalid", err, leaf.runs)
	}
}

func TestCheckpointMigrations(t *testing.T) {
	x := graph.NewField[int]("x")
	extra := graph.NewField[string]("extra", graph.Required())
	schema := mustSchema(t, x, extra).WithVersion("v2")
	addExtra := func(s map[string]any) (map[string]any, error) { s["extra"] = "filled"; return s, nil }
	noop := func(s map[string]any) (map[string]any, error) { return s, nil }
	broken := func(map[string]any) (map[string]any, error) { return nil, errors.New("bug") }
	for _, tt := range []struct {
		name    string
		version string
		ms      []migrate.Migration
		want    errcat.Category
	}{
		{"chain applies", "v0", []migrate.Migration{{From: "v0", To: "v1", Fn: noop}, {From: "v1", To: "v2", Fn: addExtra}}, ""},
		{"versions match", "v2", []migrate.Migration{{From: "v1", To: "v2", Fn: broken}}, errcat.CheckpointRecordInvalid},
		{"missing", "v1", nil, errcat.CheckpointStateMigrationMissing},
		{"failing", "v1", []migrate.Migration{{From: "v1", To: "v2", Fn: broken}}, errcat.CheckpointStateMigrationFailed},
		{"does not decode", "v1", []migrate.Migration{{From: "v1", To: "v2", Fn: noop}}, errcat.CheckpointRecordInvalid},
		{"ambiguous", "v1", []migrate.Migration{{From: "v1", To: "a", Fn: noop}, {From: "a", To: "v2", Fn: addExtra},
			{From: "v1", To: "b", Fn: noop}, {From: "b", To: "v2", Fn: addExtra}}, errcat.CheckpointStateMigrationChainAmbiguous},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := checkpoint.NewMemoryStore(nil)
			g := mustCompile(t, graph.NewBuilder(schema).
				AddNode("n", func(context.Context, graph.State) (graph.Update, error) { return x.Set(2), nil }).
				AddEdge("n", graph.End).SetEntry("n"), graph.WithCheckpointer(store, graph.CheckpointMigrations(tt.ms...)))
			rec := graph.CheckpointRecord{InvocationID: "old", SchemaVersion: tt.version, Path: []string{"n"}, Rerun: true,
				State: []byte(`{"x":1}`)}
			stored, err := rec.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Save(t.Context(), stored); err != nil {
				t.Fatal(err)
			}
			res, err := g.ResumeCheckpoint(t.Context(), "old")
			if tt.want != "" {
				if !errors.Is(err, tt.want) {
					t.Fatalf("resume = %v, want %s", err, tt.want)
				}
				return
			}
			if err != nil || stateJSON(t, res.State) != `{"x":2,"extra":"filled"}` {
				t.Fatalf("resume = %v, %v", stateJSON(t, res.State), err)
			}
		})
	}
	if _, err := graph.NewBuilder(schema).AddNode("n", func(context.Context, graph.State) (graph.Update, error) { return nil, nil }).
		AddEdge("n", graph.End).SetEntry("n").Compile(graph.WithCheckpointer(checkpoint.NewMemoryStore(nil),
		graph.CheckpointMigrations(migrate.Migration{From: "a", To: "b", Fn: noop}, migrate.Migration{From: "a", To: "b", Fn: noop}))); !errors.Is(err, errcat.CheckpointStateMigrationChainAmbiguous) {
		t.Errorf("duplicate migration pair at compile = %v", err)
	}
}
