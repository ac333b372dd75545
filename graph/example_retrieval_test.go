package graph_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
)

// exampleEmbedder is a stand-in embedding provider.
type exampleEmbedder struct{}

func (exampleEmbedder) Model() string               { return "text-embedding-3-small" }
func (exampleEmbedder) System() string              { return "openai" }
func (exampleEmbedder) Ready(context.Context) error { return nil }
func (exampleEmbedder) Embed(_ context.Context, in []string, _ retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	r := &retrieval.EmbeddingResponse{Model: "text-embedding-3-small", Dimensions: 2, Usage: &retrieval.EmbeddingUsage{InputTokens: 3}}
	for range in {
		r.Vectors = append(r.Vectors, []float64{0.6, 0.8})
	}
	return r, nil
}

// An embedding made with retrieval.Embed from a node reaches the
// observers as a typed EmbeddingEvent, with the node's identity and the
// prompt-context the call was made under.
func Example_embeddingEvents() {
	query := graph.NewField[string]("query")
	g, _ := graph.NewBuilder(graph.MustSchema(query)).
		AddNode("retrieve", func(ctx context.Context, s graph.State) (graph.Update, error) {
			ctx = llm.WithActivePrompt(ctx, &llm.PromptIdentity{Name: "rag_query", Version: "3"}, nil)
			_, err := retrieval.Embed(ctx, exampleEmbedder{}, []string{query.Get(s)}, retrieval.EmbeddingConfig{InputType: retrieval.InputQuery})
			return nil, err
		}).
		AddEdge("retrieve", graph.End).SetEntry("retrieve").Compile()
	_, _ = g.AddObserver(func(_ context.Context, ev graph.Event) error {
		switch e := ev.(type) {
		case *graph.EmbeddingEvent:
			fmt.Println(e.NodeName, e.Provider, e.Model, e.InputCount, e.Dimensions, e.Usage.InputTokens, e.Params, e.ActivePrompt.Name)
		case *graph.EmbeddingFailedEvent:
			fmt.Println("failed:", e.ErrorCategory)
		}
		return nil
	})
	_, _ = g.Invoke(context.Background(), graph.Update{"query": "capital of France"})
	_, _ = g.Drain(context.Background())
	// Output:
	// retrieve openai text-embedding-3-small 1 2 3 map[input_type:query] rag_query
}
