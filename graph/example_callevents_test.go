package graph_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// WithoutCallEvents suits an observer that needs only node events: it
// sees none of the model-call events another observer receives, and an
// invocation whose observers all opt out does not instrument its calls.
func ExampleWithoutCallEvents() {
	reply := graph.NewField[string]("reply")
	model := llmtest.New(llmtest.Reply("hi"), llmtest.Reply("hi again"))
	g, err := graph.NewBuilder(graph.MustSchema(reply)).
		AddNode("model", func(ctx context.Context, s graph.State) (graph.Update, error) {
			resp, err := llm.Complete(ctx, model, &llm.Request{Messages: []llm.Message{llm.UserText("hello")}})
			if err != nil {
				return nil, err
			}
			return reply.Set(resp.Message.Text()), nil
		}).
		AddEdge("model", graph.End).
		SetEntry("model").
		Compile()
	if err != nil {
		panic(err)
	}
	watch := func(who string) graph.Observer {
		return func(_ context.Context, ev graph.Event) error {
			fmt.Printf("%s: %T\n", who, ev)
			return nil
		}
	}
	ctx := context.Background()
	// The node events only: the call is not instrumented.
	if _, err := g.Invoke(ctx, nil, graph.WithObserver(watch("nodes"), graph.WithoutCallEvents(), graph.Synchronous())); err != nil {
		panic(err)
	}
	// Beside an observer of everything, it still sees only node events.
	if _, err := g.Invoke(ctx, nil,
		graph.WithObserver(watch("nodes"), graph.WithoutCallEvents(), graph.Synchronous()),
		graph.WithObserver(watch("all"), graph.Synchronous())); err != nil {
		panic(err)
	}
	// Output:
	// nodes: *graph.NodeEvent
	// nodes: *graph.NodeEvent
	// nodes: *graph.NodeEvent
	// all: *graph.NodeEvent
	// all: *graph.LLMCompletionEvent
	// nodes: *graph.NodeEvent
	// all: *graph.NodeEvent
}
