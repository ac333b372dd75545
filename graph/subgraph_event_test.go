package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// A subgraph node's run is bracketed by a SubgraphEvent pair, for
// observers opted into invocation events only; a failing subgraph's
// completed event carries the failure.
func TestSubgraphEvents(t *testing.T) {
	n := graph.NewField[int]("n")
	fail := false
	inner := mustCompile(t, graph.NewBuilder(mustSchema(t, n)).
		AddNode("x", func(context.Context, graph.State) (graph.Update, error) {
			if fail {
				return nil, errors.New("boom")
			}
			return n.Set(1), nil
		}).
		AddEdge("x", graph.End).SetEntry("x"))
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, n)).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return n.Set(2), nil }).
		AddSubgraph("sub", inner).
		AddEdge("a", "sub").AddEdge("sub", graph.End).SetEntry("a"))
	kind := func(ev graph.Event) string {
		switch e := ev.(type) {
		case *graph.NodeEvent:
			return fmt.Sprintf("node:%s:%s", strings.Join(e.Namespace, "/"), e.Phase)
		case *graph.SubgraphEvent:
			s := fmt.Sprintf("subgraph:%s:%s:%s", strings.Join(e.Namespace, "/"), e.Phase, e.ErrorCategory)
			if e.NodeName != "sub" || e.InvocationID == "" || e.CorrelationID == "" || e.Time.IsZero() || (e.Err == nil) != (e.ErrorCategory == "") {
				s += fmt.Sprintf(":bad %+v", *e)
			}
			return s
		case *graph.InvocationEvent:
			return "invocation:" + string(e.Phase)
		}
		return "?"
	}
	for _, tc := range []struct {
		fail        bool
		plain, opts string
	}{
		{false, "[node:a:started node:a:completed node:sub/x:started node:sub/x:completed]",
			"[invocation:started node:a:started node:a:completed subgraph:sub:started: node:sub/x:started node:sub/x:completed subgraph:sub:completed: invocation:completed]"},
		{true, "[node:a:started node:a:completed node:sub/x:started node:sub/x:completed]",
			"[invocation:started node:a:started node:a:completed subgraph:sub:started: node:sub/x:started node:sub/x:completed subgraph:sub:completed:" + string(errcat.NodeException) + " invocation:completed]"},
	} {
		fail = tc.fail
		var plain, opted []string
		_, _ = g.Invoke(t.Context(), nil,
			graph.WithObserver(func(_ context.Context, ev graph.Event) error { plain = append(plain, kind(ev)); return nil }),
			graph.WithObserver(func(_ context.Context, ev graph.Event) error { opted = append(opted, kind(ev)); return nil }, graph.InvocationEvents()),
		)
		drain(t, g)
		if got := fmt.Sprint(plain); got != tc.plain {
			t.Errorf("fail=%t: plain observer saw %s", tc.fail, got)
		}
		if got := fmt.Sprint(opted); got != tc.opts {
			t.Errorf("fail=%t: opted-in observer saw %s", tc.fail, got)
		}
	}
}
