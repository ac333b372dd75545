package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// A linear graph: three nodes, each appending to a log and counting.
func Example() {
	var (
		count = graph.NewField[int]("count")
		log   = graph.NewListField[string]("log", graph.Append)
	)
	step := func(name string) graph.NodeFunc {
		return func(ctx context.Context, s graph.State) (graph.Update, error) {
			return count.Set(count.Get(s) + 1).With(log.Add(name)), nil
		}
	}
	g, err := graph.NewBuilder(graph.MustSchema(count, log)).
		AddNode("fetch", step("fetch")).
		AddNode("summarize", step("summarize")).
		AddNode("reply", step("reply")).
		AddEdge("fetch", "summarize").
		AddEdge("summarize", "reply").
		AddEdge("reply", graph.End).
		SetEntry("fetch").
		Compile()
	if err != nil {
		panic(err)
	}
	res, err := g.Invoke(context.Background(), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, count.Get(res.State), log.Get(res.State))
	// Output: completed 3 [fetch summarize reply]
}

// Conditional routing: the edge function sees the state after the node's
// update and picks the next node or graph.End.
func Example_conditionalRouting() {
	var (
		attempts = graph.NewField[int]("attempts")
		answer   = graph.NewField[string]("answer")
	)
	g, err := graph.NewBuilder(graph.MustSchema(attempts, answer)).
		AddNode("draft", func(ctx context.Context, s graph.State) (graph.Update, error) {
			n := attempts.Get(s) + 1
			return attempts.Set(n).With(answer.Set(strings.Repeat("!", n))), nil
		}).
		AddNode("publish", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return answer.Set("published " + answer.Get(s)), nil
		}).
		AddConditionalEdge("draft", func(ctx context.Context, s graph.State) (string, error) {
			if attempts.Get(s) < 3 {
				return "draft", nil // try again
			}
			return "publish", nil
		}, "draft", "publish").
		AddEdge("publish", graph.End).
		SetEntry("draft").
		Compile()
	if err != nil {
		panic(err)
	}
	res, _ := g.Invoke(context.Background(), nil)
	fmt.Println(res.Path)
	fmt.Println(answer.Get(res.State))
	// Output:
	// [draft draft draft publish]
	// published !!!
}

// A subgraph with its own schema, connected by explicit projections: the
// parent's "question" goes in as "input", the subgraph's "output" comes
// back as the parent's "answer".
func Example_subgraph() {
	var (
		input  = graph.NewField[string]("input")
		output = graph.NewField[string]("output")
	)
	inner, err := graph.NewBuilder(graph.MustSchema(input, output)).
		AddNode("shout", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return output.Set(strings.ToUpper(input.Get(s))), nil
		}).
		AddEdge("shout", graph.End).
		SetEntry("shout").
		Compile()
	if err != nil {
		panic(err)
	}

	var (
		question = graph.NewField[string]("question")
		answer   = graph.NewField[string]("answer")
	)
	outer, err := graph.NewBuilder(graph.MustSchema(question, answer)).
		AddSubgraph("loud", inner,
			graph.Inputs(map[string]string{"input": "question"}),
			graph.Outputs(map[string]string{"answer": "output"})).
		AddEdge("loud", graph.End).
		SetEntry("loud").
		Compile()
	if err != nil {
		panic(err)
	}
	res, _ := outer.Invoke(context.Background(), question.Set("hello"))
	fmt.Println(answer.Get(res.State))
	// Output: HELLO
}

// An observer sees every node's started and completed events, delivered in
// order on a background goroutine; Drain waits for delivery.
func Example_observer() {
	n := graph.NewField[int]("n")
	g, err := graph.NewBuilder(graph.MustSchema(n)).
		AddNode("inc", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return n.Set(n.Get(s) + 1), nil
		}).
		AddNode("fail", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return nil, errors.New("out of tokens")
		}).
		AddEdge("inc", "fail").
		AddEdge("fail", graph.End).
		SetEntry("inc").
		Compile()
	if err != nil {
		panic(err)
	}
	_, err = g.AddObserver(func(ctx context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.NodeEvent); ok {
			line := fmt.Sprint("step ", e.Step, " ", e.Phase, " ", e.NodeName)
			if e.ErrorCategory != "" {
				line += " " + string(e.ErrorCategory)
			}
			fmt.Println(line)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	_, err = g.Invoke(context.Background(), nil)
	if _, derr := g.Drain(context.Background()); derr != nil {
		panic(derr)
	}
	fmt.Println(errors.Is(err, errcat.NodeException), errcat.Of(err))
	// Output:
	// step 0 started inc
	// step 0 completed inc
	// step 1 started fail
	// step 1 completed fail node_exception
	// true node_exception
}

// Errors carry spec categories and keep the node's own error reachable.
func ExampleNodeError() {
	errQuota := errors.New("quota exceeded")
	v := graph.NewField[string]("v")
	g, _ := graph.NewBuilder(graph.MustSchema(v)).
		AddNode("call", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return nil, fmt.Errorf("calling the model: %w", errQuota)
		}).
		AddEdge("call", graph.End).
		SetEntry("call").
		Compile()
	_, err := g.Invoke(context.Background(), v.Set("before"))

	var ne *graph.NodeError
	if errors.As(err, &ne) {
		fmt.Println(ne.Category(), ne.Node, errors.Is(err, errQuota))
		fmt.Println(v.Get(ne.State)) // recoverable state
	}
	// Output:
	// node_exception call true
	// before
}
