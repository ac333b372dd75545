package otelobserver_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// userAttrs returns a span's openarmature.user.* attributes as strings.
func userAttrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for k, v := range attrs(s) {
		if len(k) > len(otelobserver.AttrUserPrefix) && k[:len(otelobserver.AttrUserPrefix)] == otelobserver.AttrUserPrefix {
			m[k[len(otelobserver.AttrUserPrefix):]] = v.String()
		}
	}
	return m
}

// Caller metadata lands on every span as openarmature.user.<key>; a
// node's augmentation updates the open spans of its own context and of
// its call-stack ancestors, never a shared fan-out node span, a sibling
// instance or (past a fork) the invocation span (§3.4, §5.6).
func TestCallerMetadataSpans(t *testing.T) {
	result := graph.NewField[int]("result")
	results := graph.NewListField[int]("results", graph.Append)
	leaf, err := graph.NewBuilder(graph.MustSchema(result)).
		AddNode("leaf", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			ni, _ := graph.CurrentNode(ctx)
			if *ni.FanOutIndex == 1 {
				if err := graph.SetInvocationMetadata(ctx, map[string]any{"item": "one"}); err != nil {
					return nil, err
				}
			}
			return result.Set(1), nil
		}).
		AddEdge("leaf", graph.End).SetEntry("leaf").Compile()
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(results)).
		AddNode("prep", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			return nil, graph.SetInvocationMetadata(ctx, map[string]any{"req": "r1"})
		}).
		AddFanOut("fan", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(2), CollectField: "result", TargetField: "results"}).
		AddEdge("prep", "fan").AddEdge("fan", graph.End).SetEntry("prep").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"tenantId": "acme", "seats": 42})); err != nil {
		t.Fatal(err)
	}
	ss := h.spans(t, g)
	base := "tenantId=acme seats=42 req=r1"
	got := map[string]string{}
	for _, s := range ss {
		name := s.Name
		if i, ok := attrs(s)[otelobserver.AttrNodeFanOutIndex]; ok {
			name = fmt.Sprintf("%s#%d", name, i.AsInt64())
			if _, unit := attrs(s)[otelobserver.AttrFanOutParentNodeName]; unit {
				name += "/unit"
			}
		}
		u := userAttrs(s)
		got[name] = fmt.Sprintf("tenantId=%s seats=%s req=%s item=%s", u["tenantId"], u["seats"], u["req"], u["item"])
	}
	want := map[string]string{
		// The serial augmentation reached the open invocation and prep
		// spans in place.
		otelobserver.InvocationSpanName: base + " item=",
		"prep":                          base + " item=",
		"fan":                           base + " item=", // shared parent
		"fan#0/unit":                    base + " item=", // sibling
		"leaf#0":                        base + " item=",
		"fan#1/unit":                    base + " item=one", // the augmenting instance
		"leaf#1":                        base + " item=one",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: user attributes %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("spans %v", got)
	}
}

// A node replacing a metadata value (same keys, new value) is seen by
// the spans that start after it: the observer's per-invocation rendering
// of the user attributes must not outlive the values it rendered.
func TestCallerMetadataReplacedValue(t *testing.T) {
	x := graph.NewField[int]("x")
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			return nil, graph.SetInvocationMetadata(ctx, map[string]any{"k": "v2", "n": 2})
		}).
		AddNode("b", func(context.Context, graph.State) (graph.Update, error) { return nil, nil }).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil, graph.WithMetadata(map[string]any{"k": "v1", "n": 1})); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range h.spans(t, g) {
		if s.Name != "b" {
			continue
		}
		found = true
		if u := userAttrs(s); u["k"] != "v2" || u["n"] != "2" {
			t.Errorf("b: user attributes %v, want k=v2 n=2", u)
		}
	}
	if !found {
		t.Error("no span b")
	}
}
