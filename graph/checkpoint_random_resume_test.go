package graph_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
)

var randInjected, randFailAt atomic.Int64

type randBlock struct {
	steps   []randStep
	loop    int
	mayFail bool
}

type randStep struct {
	kind   int // 0 func, 1 subgraph, 2 fan-out, 3 branches
	a, b   *randBlock
	k      int
	conc   int
	policy graph.ErrorPolicy
}

func genBlock(r *rand.Rand, depth int) *randBlock {
	b := &randBlock{}
	if r.Intn(3) == 0 {
		b.loop = 1 + r.Intn(2)
	}
	n := 1 + r.Intn(3)
	for i := 0; i < n; i++ {
		st := randStep{kind: 0}
		if depth > 0 {
			st.kind = r.Intn(4)
		}
		switch st.kind {
		case 1:
			st.a = genBlock(r, depth-1)
		case 2:
			st.a, st.k, st.conc = genBlock(r, depth-1), 1+r.Intn(3), 1+r.Intn(3)
			if r.Intn(3) == 0 {
				st.policy = graph.Collect
				st.a.mayFail = true
			}
		case 3:
			st.a, st.b = genBlock(r, depth-1), genBlock(r, depth-1)
		}
		b.steps = append(b.steps, st)
	}
	return b
}

func errorsFieldOf(p graph.ErrorPolicy) string {
	if p == graph.Collect {
		return "errs"
	}
	return ""
}

func randSchema(t *testing.T) *graph.Schema {
	return mustSchema(t,
		graph.NewDynamicField("item", graph.TypeInt),
		graph.NewDynamicField("round", graph.TypeInt),
		graph.NewDynamicField("items", graph.ListOf(graph.TypeInt)),
		graph.NewDynamicField("acc", graph.ListOf(nil), graph.WithReducer(graph.Append)),
		graph.NewDynamicField("errs", graph.ListOf(nil), graph.WithReducer(graph.Append)),
	)
}

func randHash(parts ...any) int {
	h := fnv.New32a()
	fmt.Fprint(h, parts...)
	return int(h.Sum32() % 1000)
}

func buildRandGraph(t *testing.T, b *randBlock, path string, opts ...graph.CompileOption) *graph.Graph {
	gb := graph.NewBuilder(randSchema(t))
	var names []string
	for i, st := range b.steps {
		name := fmt.Sprintf("s%d", i)
		p := path + "/" + name
		switch st.kind {
		case 0:
			gb.AddNode(name, func(_ context.Context, s graph.State) (graph.Update, error) {
				item, _ := s.Get("item")
				round, _ := s.Get("round")
				acc, _ := s.Get("acc")
				if randInjected.Add(1) == randFailAt.Load() {
					return nil, fmt.Errorf("injected outage at %s", p)
				}
				if b.mayFail && randHash(p, item, "f")%3 == 0 {
					return nil, fmt.Errorf("boom %s %v", p, item)
				}
				return graph.Update{"acc": []any{randHash(p, item, round, len(acc.([]any)))}}, nil
			})
		case 1:
			gb.AddSubgraph(name, buildRandGraph(t, st.a, p), graph.ProjectIn("item"), graph.ProjectOut("acc"))
		case 2:
			k := st.k
			prep := name + "prep"
			gb.AddNode(prep, func(_ context.Context, s graph.State) (graph.Update, error) {
				item, _ := s.Get("item")
				items := make([]any, k)
				for j := range items {
					items[j] = item.(int)*10 + j
				}
				return graph.Update{"items": items}, nil
			})
			names = append(names, prep)
			gb.AddFanOut(name, graph.FanOut{Subgraph: buildRandGraph(t, st.a, p), ItemsField: "items", ItemField: "item",
				CollectField: "acc", TargetField: "acc", Concurrency: graph.Fixed(st.conc), ErrorPolicy: st.policy, ErrorsField: errorsFieldOf(st.policy)})
		case 3:
			gb.AddParallelBranches(name, graph.ParallelBranches{Branches: []graph.Branch{
				{Name: "x", Subgraph: buildRandGraph(t, st.a, p+"x"), Inputs: map[string]string{"item": "item"}, Outputs: map[string]string{"acc": "acc"}},
				{Name: "y", Subgraph: buildRandGraph(t, st.b, p+"y"), Inputs: map[string]string{"item": "item"}, Outputs: map[string]string{"acc": "acc"}},
			}})
		}
		names = append(names, name)
	}
	for i := 0; i+1 < len(names); i++ {
		gb.AddEdge(names[i], names[i+1])
	}
	last := names[len(names)-1]
	if b.loop > 0 {
		loops := b.loop
		gb.AddNode("bump", func(_ context.Context, s graph.State) (graph.Update, error) {
			r, _ := s.Get("round")
			return graph.Update{"round": r.(int) + 1}, nil
		})
		gb.AddEdge(last, "bump")
		gb.AddConditionalEdge("bump", func(_ context.Context, s graph.State) (string, error) {
			if r, _ := s.Get("round"); r.(int) <= loops {
				return names[0], nil
			}
			return graph.End, nil
		}, names[0], graph.End)
	} else {
		gb.AddEdge(last, graph.End)
	}
	gb.SetEntry(names[0])
	g, err := gb.Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestCheckpointRandomResume resumes every checkpoint of random
// graphs (subgraphs, fan-outs, nested fan-outs, branches, loops whose
// nested fan-outs see the same items each round, masking the loop defect)
// and compares the final state with the uninterrupted run's.
func TestCheckpointRandomResume(t *testing.T) {
	seed := int64(57)
	if s := os.Getenv("GRAPH_RANDOM_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	n := 5
	if s := os.Getenv("GRAPH_RANDOM_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for it := 0; it < n; it++ {
		s := seed + int64(it)
		r := rand.New(rand.NewSource(s))
		blk := genBlock(r, 3)
		rec := &recordingStore{Store: checkpoint.NewMemoryStore(nil)}
		batch := 0
		if os.Getenv("GRAPH_RANDOM_BATCH") != "" {
			batch = 1 + r.Intn(3)
		}
		g := buildRandGraph(t, blk, "", graph.WithCheckpointer(rec, graph.BatchFanOutSaves(batch)))
		res, err := g.Invoke(t.Context(), graph.Update{"item": 1})
		if err != nil {
			t.Fatalf("seed %d: %v", s, err)
		}
		want := jsonOf(t, res.State.Map())
		for k, cr := range rec.recs {
			st := checkpoint.NewMemoryStore(nil)
			_ = st.Save(t.Context(), cr)
			g2 := buildRandGraph(t, blk, "", graph.WithCheckpointer(st, graph.BatchFanOutSaves(batch)))
			res2, err := g2.ResumeCheckpoint(t.Context(), cr.InvocationID)
			if err != nil {
				t.Errorf("seed %d checkpoint %d/%d: %v", s, k, len(rec.recs), err)
				continue
			}
			if got := jsonOf(t, res2.State.Map()); got != want {
				t.Errorf("seed %d checkpoint %d/%d:\n got %s\nwant %s\nrecord %s", s, k, len(rec.recs), got, want, cr.Data)
				break
			}
		}
		if t.Failed() {
			t.Logf("failing seed %d", s)
			return
		}
	}
}

// TestCheckpointRandomFailResume: random graphs whose run fails at
// the K-th node execution (a one-off outage), then ResumeCheckpoint: the
// final state must be the uninterrupted run's.
func TestCheckpointRandomFailResume(t *testing.T) {
	seed := int64(5700)
	if s := os.Getenv("GRAPH_RANDOM_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	n := 4
	if s := os.Getenv("GRAPH_RANDOM_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	defer randFailAt.Store(0)
	for it := 0; it < n; it++ {
		s := seed + int64(it)
		r := rand.New(rand.NewSource(s))
		blk := genBlock(r, 3)
		randFailAt.Store(-1)
		randInjected.Store(0)
		g0 := buildRandGraph(t, blk, "", graph.WithCheckpointer(checkpoint.NewMemoryStore(nil)))
		res, err := g0.Invoke(t.Context(), graph.Update{"item": 1})
		if err != nil {
			t.Fatalf("seed %d: %v", s, err)
		}
		want := jsonOf(t, res.State.Map())
		total := randInjected.Load()
		for k := int64(1); k <= total; k++ {
			st := checkpoint.NewMemoryStore(nil)
			g := buildRandGraph(t, blk, "", graph.WithCheckpointer(st))
			randInjected.Store(0)
			randFailAt.Store(k)
			first, err := g.Invoke(t.Context(), graph.Update{"item": 1})
			randFailAt.Store(-1)
			if err == nil {
				continue // collected by a collect-mode fan-out
			}
			res2, err := g.ResumeCheckpoint(t.Context(), first.InvocationID)
			if err != nil {
				t.Errorf("seed %d fail at %d/%d: resume: %v", s, k, total, err)
				break
			}
			if got := jsonOf(t, res2.State.Map()); got != want {
				t.Errorf("seed %d fail at %d/%d:\n got %s\nwant %s", s, k, total, got, want)
				break
			}
		}
		if t.Failed() {
			return
		}
	}
}
