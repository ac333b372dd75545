package graph_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/armature-go/armature/graph"
)

// Caller-supplied invocation metadata: attached at Invoke, augmented and
// read inside a node, rejected up front when a key is reserved.
func ExampleWithMetadata() {
	count := graph.NewField[int]("count")
	g, err := graph.NewBuilder(graph.MustSchema(count)).
		AddNode("classify", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if err := graph.SetInvocationMetadata(ctx, map[string]any{"auditKind": "fraud"}); err != nil {
				return nil, err
			}
			for k, v := range graph.InvocationMetadata(ctx).All() {
				fmt.Println(k, v)
			}
			return count.Set(1), nil
		}).
		AddEdge("classify", graph.End).
		SetEntry("classify").
		Compile()
	if err != nil {
		panic(err)
	}
	if _, err := g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"tenantId": "acme", "seats": 42})); err != nil {
		panic(err)
	}
	_, err = g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"gen_ai.system": "x"}))
	fmt.Println(errors.Is(err, graph.ErrReservedMetadataKey))
	// Output:
	// auditKind fraud
	// seats 42
	// tenantId acme
	// true
}
