package langfuse_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// Export a graph's invocations to Langfuse: here a fake ingestion API
// stands in for https://cloud.langfuse.com.
func Example() {
	srv := langfusetest.NewServer()
	defer srv.Close()

	obs, err := langfuse.New(langfuse.Config{Client: srv.ClientConfig()})
	if err != nil {
		panic(err)
	}
	defer obs.Shutdown(context.Background())

	n := graph.NewField[int]("n")
	g, err := graph.NewBuilder(graph.MustSchema(n)).
		AddNode("double", func(_ context.Context, s graph.State) (graph.Update, error) {
			return n.Set(n.Get(s) * 2), nil
		}).
		AddEdge("double", graph.End).SetEntry("double").Compile()
	if err != nil {
		panic(err)
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		panic(err)
	}
	if _, err := g.Invoke(context.Background(), n.Set(21), graph.WithInvocationID("run_abc123")); err != nil {
		panic(err)
	}
	// Wait for the observer, then for the client.
	if _, err := g.Drain(context.Background()); err != nil {
		panic(err)
	}
	if err := obs.Flush(context.Background()); err != nil {
		panic(err)
	}

	for _, tr := range srv.Traces() {
		fmt.Println(tr.ID, tr.Fields["name"], tr.Metadata()["invocation_id"])
		for _, o := range tr.Observations {
			fmt.Println(" ", o.Type, o.Name(), o.Fields["level"])
		}
	}
	// Output:
	// 29b50a6c08dabfeaeb1696301f4fabe1 double run_abc123
	//   span double DEFAULT
}
