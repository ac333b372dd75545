package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
)

type categorizedErr struct{ cat errcat.Category }

func (e *categorizedErr) Error() string             { return "provider said no" }
func (e *categorizedErr) Category() errcat.Category { return e.cat }

// TestClassifyThroughComposites: a provider_invalid_request raised
// in a node inside a parallel branch, a fan-out instance, a subgraph, a
// nested fan-out, is classified as provider_invalid_request /
// user_correctable at the turn boundary ("The turn's category is the
// derived category of the error's cause chain ... so a
// provider_unavailable raised inside a node is reported as
// provider_unavailable, not node_exception").
func TestClassifyThroughComposites(t *testing.T) {
	x := graph.NewField[int]("x")
	res := graph.NewListField[int]("res", graph.Append)
	sch := func() *graph.Schema { return graph.MustSchema(x, res) }
	mkLeaf := func(cat errcat.Category) *graph.Graph {
		g, err := graph.NewBuilder(sch()).AddNode("leaf", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return nil, &categorizedErr{cat}
		}).AddEdge("leaf", graph.End).SetEntry("leaf").Compile()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, cat := range []errcat.Category{errcat.ProviderInvalidRequest, errcat.ProviderUnavailable, errcat.SessionLoadFailed} {
		leaf := mkLeaf(cat)
		wrap := func(name string, add func(b *graph.Builder) *graph.Builder) {
			g, err := add(graph.NewBuilder(sch())).AddEdge("n", graph.End).SetEntry("n").Compile()
			if err != nil {
				t.Fatal(err)
			}
			_, ierr := g.Invoke(t.Context(), nil)
			c, b := harness.Classify(ierr)
			if c != cat || b != harness.BucketOf(cat) {
				t.Errorf("%s/%s: Classify = %s, %s; want %s, %s (error: %v)", cat, name, c, b, cat, harness.BucketOf(cat), ierr)
			}
		}
		wrap("subgraph", func(b *graph.Builder) *graph.Builder { return b.AddSubgraph("n", leaf) })
		wrap("fan-out", func(b *graph.Builder) *graph.Builder {
			return b.AddFanOut("n", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(2), CollectField: "x", TargetField: "res"})
		})
		wrap("branches subgraph", func(b *graph.Builder) *graph.Builder {
			return b.AddParallelBranches("n", graph.ParallelBranches{Branches: []graph.Branch{{Name: "a", Subgraph: leaf}}})
		})
		wrap("branches call", func(b *graph.Builder) *graph.Builder {
			return b.AddParallelBranches("n", graph.ParallelBranches{Branches: []graph.Branch{{Name: "a", Call: func(ctx context.Context, s graph.State) (graph.Update, error) {
				return nil, &categorizedErr{cat}
			}}}})
		})
		wrap("retry", func(b *graph.Builder) *graph.Builder {
			r, _ := graph.NewRetry(graph.RetryConfig{MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }})
			return b.AddNode("n", func(ctx context.Context, s graph.State) (graph.Update, error) { return nil, &categorizedErr{cat} }, graph.WithMiddleware(r))
		})
	}
}
