package langfuse_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// A failed tool's error text goes into the Tool observation's
// metadata.error_message capped like a payload field (§5.5.5,
// PayloadMaxBytes): a tool whose error quotes a large upstream answer
// (3 MiB here) still has its ERROR observation reach Langfuse, rather
// than an event larger than a request may be, which the client drops.
func TestHugeToolErrorKeepsTheErrorObservation(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			_, _ = graph.CallTool(ctx, graph.ToolCall{Name: "fetch", ID: "c1"},
				func(context.Context) (string, error) {
					return "", errors.New("upstream 502: " + strings.Repeat("<html>", 3<<20/6))
				})
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	trs := h.traces(t, g)
	var tool *langfusetest.Observation
	for _, tr := range trs {
		langfusetest.Walk(tr.Observations, func(o *langfusetest.Observation) {
			if o.Type == "tool" {
				tool = o
			}
		})
	}
	if tool == nil {
		t.Fatalf("the failed tool call has no observation in Langfuse (client stats %+v)", h.client.Stats())
	}
}
