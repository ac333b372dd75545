package graph_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// A model call that fails transiently is retried by middleware. Each
// attempt is its own started/completed event pair with its attempt index.
func ExampleNewRetry() {
	reply := graph.NewField[string]("reply")
	var calls atomic.Int32
	callModel := func(ctx context.Context, s graph.State) (graph.Update, error) {
		if calls.Add(1) < 3 {
			// What an LLM provider returns for a 503.
			return nil, errcat.New(errcat.ProviderUnavailable, "upstream overloaded")
		}
		return reply.Set("Hello!"), nil
	}
	retry, err := graph.NewRetry(graph.RetryConfig{
		MaxAttempts: 5,
		Backoff:     graph.JitterBackoff(10*time.Millisecond, time.Second),
	})
	if err != nil {
		panic(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(reply)).
		AddNode("call_model", callModel, graph.WithMiddleware(retry)).
		AddEdge("call_model", graph.End).
		SetEntry("call_model").
		Compile()
	if err != nil {
		panic(err)
	}
	var attempts []int
	res, err := g.Invoke(context.Background(), nil, graph.WithObserver(
		func(ctx context.Context, ev graph.Event) error {
			if e, ok := ev.(*graph.NodeEvent); ok && e.Phase == graph.PhaseCompleted {
				attempts = append(attempts, e.AttemptIndex)
			}
			return nil
		}))
	if err != nil {
		panic(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(reply.Get(res.State), attempts)
	// Output: Hello! [0 1 2]
}

// Fan out over a list: the subgraph runs once per item, at most two at a
// time, and the results come back in item order whatever order the
// instances finish in.
func ExampleFanOut() {
	var (
		url    = graph.NewField[string]("url")
		status = graph.NewField[string]("status")
	)
	fetch, err := graph.NewBuilder(graph.MustSchema(url, status)).
		AddNode("fetch", func(ctx context.Context, s graph.State) (graph.Update, error) {
			u := url.Get(s)
			time.Sleep(time.Duration(len(u)) * time.Millisecond) // longer URLs take longer
			return status.Set("200 " + u), nil
		}).
		AddEdge("fetch", graph.End).
		SetEntry("fetch").
		Compile()
	if err != nil {
		panic(err)
	}

	var (
		urls    = graph.NewListField[string]("urls", graph.LastWriteWins)
		results = graph.NewListField[string]("results", graph.Append)
	)
	g, err := graph.NewBuilder(graph.MustSchema(urls, results)).
		AddFanOut("fetch_all", graph.FanOut{
			Subgraph:     fetch,
			ItemsField:   "urls",
			ItemField:    "url",
			CollectField: "status",
			TargetField:  "results",
			Concurrency:  graph.Fixed(2),
		}).
		AddEdge("fetch_all", graph.End).
		SetEntry("fetch_all").
		Compile()
	if err != nil {
		panic(err)
	}
	res, err := g.Invoke(context.Background(), urls.Set([]string{"example.com/a-long-page", "a.io", "example.org"}))
	if err != nil {
		panic(err)
	}
	for _, r := range results.Get(res.State) {
		fmt.Println(r)
	}
	// Output:
	// 200 example.com/a-long-page
	// 200 a.io
	// 200 example.org
}

// Two independent lookups run at once as parallel branches; each writes its
// own field, merged into the parent state when both are done.
func ExampleParallelBranches() {
	var (
		question = graph.NewField[string]("question")
		docs     = graph.NewListField[string]("docs", graph.Append)
		profile  = graph.NewField[string]("profile")
	)
	g, err := graph.NewBuilder(graph.MustSchema(question, docs, profile)).
		AddParallelBranches("gather", graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "search", Call: func(ctx context.Context, s graph.State) (graph.Update, error) {
				return docs.Add("doc about " + question.Get(s)), nil
			}},
			{Name: "user", Call: func(ctx context.Context, s graph.State) (graph.Update, error) {
				return profile.Set("prefers short answers"), nil
			}},
		}}).
		AddEdge("gather", graph.End).
		SetEntry("gather").
		Compile()
	if err != nil {
		panic(err)
	}
	res, err := g.Invoke(context.Background(), question.Set("tides"))
	if err != nil {
		panic(err)
	}
	fmt.Println(docs.Get(res.State), "/", profile.Get(res.State))
	// Output: [doc about tides] / prefers short answers
}

// Failure isolation turns a failing optional step into a degraded result
// instead of failing the whole run; observers get a FailureIsolationEvent
// naming the catch site and the cause.
func ExampleNewFailureIsolation() {
	summary := graph.NewField[string]("summary")
	isolate, err := graph.NewFailureIsolation(graph.FailureIsolationConfig{
		EventName: "summary_unavailable",
		Degraded:  summary.Set("(summary unavailable)"),
	})
	if err != nil {
		panic(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(summary)).
		AddNode("summarize", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return nil, errcat.New(errcat.ProviderRateLimit, "429 Too Many Requests")
		}, graph.WithMiddleware(isolate)).
		AddEdge("summarize", graph.End).
		SetEntry("summarize").
		Compile()
	if err != nil {
		panic(err)
	}
	res, err := g.Invoke(context.Background(), nil, graph.WithObserver(
		func(ctx context.Context, ev graph.Event) error {
			if e, ok := ev.(*graph.FailureIsolationEvent); ok {
				fmt.Println("isolated:", e.EventName, e.CaughtException.Category, strings.ToLower(e.CaughtException.Message))
			}
			return nil
		}))
	if err != nil {
		panic(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(res.Status, summary.Get(res.State))
	// Output:
	// isolated: summary_unavailable provider_rate_limit 429 too many requests
	// completed (summary unavailable)
}
