package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
)

// recordingStore keeps every checkpoint record saved: a crash right after
// save k leaves record k as the latest.
type recordingStore struct {
	checkpoint.Store
	mu   sync.Mutex
	recs []checkpoint.Record
}

func (s *recordingStore) Save(ctx context.Context, r checkpoint.Record) error {
	if r.Kind == checkpoint.KindCheckpoint {
		s.mu.Lock()
		c := r
		c.Data = append(json.RawMessage(nil), r.Data...)
		s.recs = append(s.recs, c)
		s.mu.Unlock()
	}
	return s.Store.Save(ctx, r)
}

// resumeFromEveryCheckpoint runs build's graph uninterrupted, then resumes
// it from each of the run's checkpoints as the latest one, and requires
// every resume to end in the uninterrupted run's state.
func resumeFromEveryCheckpoint(t *testing.T, build func(t *testing.T, st checkpoint.Store) *graph.Graph, in graph.Update) {
	t.Helper()
	rec := &recordingStore{Store: checkpoint.NewMemoryStore(nil)}
	res, err := build(t, rec).Invoke(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(res.State.Map())
	if len(rec.recs) == 0 {
		t.Fatal("the run saved no checkpoint")
	}
	for k, r := range rec.recs {
		st := checkpoint.NewMemoryStore(nil)
		if err := st.Save(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		res, err := build(t, st).ResumeCheckpoint(t.Context(), r.InvocationID)
		if err != nil {
			t.Errorf("resume from checkpoint %d: %v", k, err)
			continue
		}
		if got := fmt.Sprint(res.State.Map()); got != want {
			t.Errorf("resume from checkpoint %d: state %s, want %s\nrecord: %s", k, got, want, r.Data)
		}
	}
}

// tenfoldLeaf sets result to ten times item.
func tenfoldLeaf(t *testing.T) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewField[int]("item"), graph.NewField[int]("result"))).
		AddNode("leaf", func(_ context.Context, s graph.State) (graph.Update, error) {
			v, _ := s.Get("item")
			return graph.Update{"result": v.(int) * 10}, nil
		}).AddEdge("leaf", graph.End).SetEntry("leaf"))
}

// loopRounds returns a subgraph that runs body (a fan-out node named
// "inner" configured by fan) twice in a loop, on the items roundItems
// gives each round.
func loopRounds(t *testing.T, fan graph.FanOut, roundItems func(round int) []int) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewField[int]("round"),
		graph.NewListField[int]("items", graph.LastWriteWins), graph.NewListField[int]("results", graph.Append))).
		AddNode("prep", func(_ context.Context, s graph.State) (graph.Update, error) {
			r, _ := s.Get("round")
			return graph.Update{"items": roundItems(r.(int))}, nil
		}).
		AddEdge("prep", "inner").
		AddFanOut("inner", fan).
		AddEdge("inner", "bump").
		AddNode("bump", func(_ context.Context, s graph.State) (graph.Update, error) {
			r, _ := s.Get("round")
			return graph.Update{"round": r.(int) + 1}, nil
		}).
		AddConditionalEdge("bump", func(_ context.Context, s graph.State) (string, error) {
			if r, _ := s.Get("round"); r.(int) < 2 {
				return "prep", nil
			}
			return graph.End, nil
		}, "prep", graph.End).
		SetEntry("prep"))
}

// TestCheckpointNestedFanOutInLoopResumesItsOwnRound: a fan-out nested in
// a fan-out instance and dispatched once per round of a loop keeps its
// saved progress to the round it was saved in. A crash in the second
// round must neither roll the second round's contributions into the
// first (same item count) nor fail the first round's count check
// (different item count).
func TestCheckpointNestedFanOutInLoopResumesItsOwnRound(t *testing.T) {
	for name, second := range map[string][]int{"same count": {100, 200}, "other count": {100, 200, 300}} {
		t.Run(name, func(t *testing.T) {
			build := func(t *testing.T, st checkpoint.Store) *graph.Graph {
				mid := loopRounds(t, graph.FanOut{Subgraph: tenfoldLeaf(t), ItemsField: "items", ItemField: "item",
					CollectField: "result", TargetField: "results", Concurrency: graph.Fixed(1)},
					func(round int) []int {
						if round == 0 {
							return []int{1, 2}
						}
						return second
					})
				return mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewListField[[]int]("out", graph.Append))).
					AddFanOut("outer", graph.FanOut{Subgraph: mid, Count: graph.Fixed(1), CollectField: "results", TargetField: "out"}).
					AddEdge("outer", graph.End).SetEntry("outer"), graph.WithCheckpointer(st))
			}
			resumeFromEveryCheckpoint(t, build, nil)
		})
	}
}

// TestCheckpointDoublyNestedFanOutInLoopResumesItsOwnRound: the innermost
// fan-out runs in an instance of a fan-out dispatched once per loop
// round; its saved progress belongs to the enclosing fan-out's round too
// (the lineage records the enclosing fan-out's occurrence).
func TestCheckpointDoublyNestedFanOutInLoopResumesItsOwnRound(t *testing.T) {
	build := func(t *testing.T, st checkpoint.Store) *graph.Graph {
		// wrap: one instance per round, fanning out over the round's items.
		wrap := mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewListField[int]("items", graph.LastWriteWins),
			graph.NewListField[int]("results", graph.Append), graph.NewField[int]("total"))).
			AddFanOut("deep", graph.FanOut{Subgraph: tenfoldLeaf(t), ItemsField: "items", ItemField: "item",
				CollectField: "result", TargetField: "results", Concurrency: graph.Fixed(1)}).
			AddEdge("deep", "sum").
			AddNode("sum", func(_ context.Context, s graph.State) (graph.Update, error) {
				v, _ := s.Get("results")
				total := 0
				for i, r := range v.([]int) {
					total += (i + 1) * r // order-sensitive
				}
				return graph.Update{"total": total}, nil
			}).
			AddEdge("sum", graph.End).SetEntry("deep"))
		mid := loopRounds(t, graph.FanOut{Subgraph: wrap, Count: graph.Fixed(1), Inputs: map[string]string{"items": "items"},
			CollectField: "total", TargetField: "results"},
			func(round int) []int {
				if round == 0 {
					return []int{1, 2}
				}
				return []int{100, 200}
			})
		return mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewListField[[]int]("out", graph.Append))).
			AddFanOut("outer", graph.FanOut{Subgraph: mid, Count: graph.Fixed(1), CollectField: "results", TargetField: "out"}).
			AddEdge("outer", graph.End).SetEntry("outer"), graph.WithCheckpointer(st))
	}
	resumeFromEveryCheckpoint(t, build, nil)
}

// TestCheckpointNestedFanOutLegacyRecordResumes: a record written before
// fan-out progress carried its occurrence (no "occurrence" field) still
// loads, its nested progress applying to the node's first dispatch in
// the enclosing instance, as such records always were read.
func TestCheckpointNestedFanOutLegacyRecordResumes(t *testing.T) {
	build := func(st checkpoint.Store) *graph.Graph {
		sub := tenfoldLeaf(t)
		mid := mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewListField[int]("items", graph.LastWriteWins),
			graph.NewListField[int]("results", graph.Append))).
			AddNode("prep", func(context.Context, graph.State) (graph.Update, error) {
				return graph.Update{"items": []int{1, 2}}, nil
			}).
			AddEdge("prep", "inner").
			AddFanOut("inner", graph.FanOut{Subgraph: sub, ItemsField: "items", ItemField: "item",
				CollectField: "result", TargetField: "results", Concurrency: graph.Fixed(1)}).
			AddEdge("inner", graph.End).SetEntry("prep"))
		return mustCompile(t, graph.NewBuilder(graph.MustSchema(graph.NewListField[[]int]("out", graph.Append))).
			AddFanOut("outer", graph.FanOut{Subgraph: mid, Count: graph.Fixed(1), CollectField: "results", TargetField: "out"}).
			AddEdge("outer", graph.End).SetEntry("outer"), graph.WithCheckpointer(st))
	}
	// The previous format: instance 0 of the nested fan-out completed
	// (with a marker contribution a re-run would not produce).
	legacy := `{"format":1,"positions":[{"node":"outer","state":{"out":[]}}],"descriptor":{"signal_id":""},` +
		`"rerun_on_resume":true,"node_name":"outer","namespace":["outer"],"completed_positions":null,"fan_out_progress":[` +
		`{"namespace":[],"fan_out_node_name":"outer","instance_count":1,"instances":[{"state":"in_flight","result_is_error":false}]},` +
		`{"namespace":["outer"],"fan_out_node_name":"inner","instance_count":2,` +
		`"enclosing_fan_out_lineage":[{"namespace":[],"fan_out_node_name":"outer","fan_out_index":0}],` +
		`"instances":[{"state":"completed","result":-7,"result_is_error":false},{"state":"in_flight","result_is_error":false}]}]}`
	if strings.Contains(legacy, "occurrence") {
		t.Fatal("the legacy record must not carry the occurrence")
	}
	st := checkpoint.NewMemoryStore(nil)
	if err := st.Save(t.Context(), checkpoint.Record{InvocationID: "legacy", Kind: checkpoint.KindCheckpoint, Data: json.RawMessage(legacy)}); err != nil {
		t.Fatal(err)
	}
	res, err := build(st).ResumeCheckpoint(t.Context(), "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.State.Map()["out"]); got != "[[-7 20]]" {
		t.Errorf("out = %s, want the saved contribution of instance 0 then instance 1 run again", got)
	}
}
