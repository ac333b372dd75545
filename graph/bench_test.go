package graph_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/graph"
)

// linearGraph is the BenchmarkInvoke workload: three nodes in a line, each
// setting a counter and appending one log entry.
func linearGraph(b *testing.B) *graph.Graph {
	b.Helper()
	count := graph.NewField[int]("count")
	log := graph.NewListField[string]("log", graph.Append)
	node := func(name string) graph.NodeFunc {
		return func(ctx context.Context, s graph.State) (graph.Update, error) {
			return graph.Update{"count": count.Get(s) + 1, "log": []string{name}}, nil
		}
	}
	g, err := graph.NewBuilder(graph.MustSchema(count, log)).
		AddNode("a", node("a")).AddNode("b", node("b")).AddNode("c", node("c")).
		AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.End).
		SetEntry("a").
		Compile()
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkInvoke measures one invocation of a 3-node linear graph, with
// no observers and with one graph-attached observer (whose delivery runs
// on the invocation's background goroutine; the benchmark drains once at
// the end so every event is delivered inside the timed region).
func BenchmarkInvoke(b *testing.B) {
	ctx := context.Background()
	b.Run("observers=0", func(b *testing.B) {
		g := linearGraph(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Invoke(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("observers=1", func(b *testing.B) {
		g := linearGraph(b)
		var seen int
		if _, err := g.AddObserver(func(ctx context.Context, ev graph.Event) error {
			seen++
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Invoke(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := g.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		if seen == 0 {
			b.Fatal("observer saw no events")
		}
	})
}

// BenchmarkAppendHistory shows that merging one item into an append field
// costs the same whatever the list's length.
func BenchmarkAppendHistory(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run("len="+itoa(n), func(b *testing.B) {
			hist := graph.NewListField[string]("history", graph.Append)
			s := graph.MustSchema(hist)
			st, err := s.New(nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if st, err = st.Merge(hist.Add("m")); err != nil {
					b.Fatal(err)
				}
			}
			upd := hist.Add("next")
			b.ReportAllocs()
			for b.Loop() {
				next, err := st.Merge(upd)
				if err != nil {
					b.Fatal(err)
				}
				st = next
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}

// BenchmarkFanOut measures a fan-out of 100 items at concurrency 10 over
// a trivial one-node subgraph: one op is the whole fan-out, so ns/op / 100
// is the per-item cost (engine overhead: instance state, goroutine,
// ordering, fan-in).
func BenchmarkFanOut(b *testing.B) {
	x := graph.NewField[int]("x")
	y := graph.NewField[int]("y")
	leaf, err := graph.NewBuilder(graph.MustSchema(x, y)).
		AddNode("double", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return y.Set(2 * x.Get(s)), nil
		}).
		AddEdge("double", graph.End).SetEntry("double").Compile()
	if err != nil {
		b.Fatal(err)
	}
	items := graph.NewListField[int]("items", graph.LastWriteWins)
	results := graph.NewListField[int]("results", graph.Append)
	g, err := graph.NewBuilder(graph.MustSchema(items, results)).
		AddFanOut("map", graph.FanOut{
			Subgraph: leaf, ItemsField: "items", ItemField: "x",
			CollectField: "y", TargetField: "results", Concurrency: graph.Fixed(10),
		}).
		AddEdge("map", graph.End).SetEntry("map").Compile()
	if err != nil {
		b.Fatal(err)
	}
	in := make([]int, 100)
	for i := range in {
		in[i] = i
	}
	input := items.Set(in)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.Invoke(ctx, input)
		if err != nil {
			b.Fatal(err)
		}
		if len(results.Get(res.State)) != 100 {
			b.Fatal("lost results")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/item")
}

// BenchmarkRetry measures retry middleware around a node that succeeds on
// its first attempt, against the same node without middleware.
func BenchmarkRetry(b *testing.B) {
	n := graph.NewField[int]("n")
	node := func(ctx context.Context, s graph.State) (graph.Update, error) {
		return n.Set(1), nil
	}
	retry, err := graph.NewRetry(graph.RetryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []graph.NodeOption
	}{
		{"middleware=none", nil},
		{"middleware=retry", []graph.NodeOption{graph.WithMiddleware(retry)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g, err := graph.NewBuilder(graph.MustSchema(n)).
				AddNode("call", node, tc.opts...).
				AddEdge("call", graph.End).SetEntry("call").Compile()
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Invoke(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
