package otelobserver_test

import (
	"context"
	"sync"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// Concurrent invocations through one observer each get a trace of their
// own: an invocation span and its node spans, parented under it, all
// naming its invocation id, and nothing left open.
func TestConcurrentInvocationsTraces(t *testing.T) {
	x := graph.NewField[int]("x")
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return x.Set(1), nil }).
		AddNode("b", func(context.Context, graph.State) (graph.Update, error) { return x.Set(2), nil }).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.attach(t, g)
	const n = 64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := g.Invoke(context.Background(), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	type trace struct {
		root  string // invocation span id
		inv   string // its invocation id
		nodes []string
	}
	traces := map[string]*trace{}
	ss := h.spans(t, g)
	for _, s := range ss {
		tr := traces[s.SpanContext.TraceID().String()]
		if tr == nil {
			tr = &trace{}
			traces[s.SpanContext.TraceID().String()] = tr
		}
		if s.Name == otelobserver.InvocationSpanName {
			tr.root, tr.inv = s.SpanContext.SpanID().String(), attrs(s)[otelobserver.AttrInvocationID].AsString()
		}
	}
	for _, s := range ss {
		if s.Name == otelobserver.InvocationSpanName {
			continue
		}
		tr := traces[s.SpanContext.TraceID().String()]
		if s.Parent.SpanID().String() != tr.root {
			t.Errorf("span %s not parented under its trace's invocation span", s.Name)
		}
		if id := attrs(s)[otelobserver.AttrInvocationID].AsString(); id != tr.inv {
			t.Errorf("span %s of invocation %s in the trace of %s", s.Name, id, tr.inv)
		}
		tr.nodes = append(tr.nodes, s.Name)
	}
	if len(traces) != n {
		t.Fatalf("%d traces, want %d", len(traces), n)
	}
	for id, tr := range traces {
		if tr.root == "" || len(tr.nodes) != 2 {
			t.Errorf("trace %s: root %q, node spans %v", id, tr.root, tr.nodes)
		}
	}
}
