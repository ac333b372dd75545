package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func TestNewMetadataValidation(t *testing.T) {
	tests := []struct {
		name     string
		in       map[string]any
		reserved bool
		invalid  bool
		want     map[string]any
	}{
		{name: "scalars", in: map[string]any{"tenantId": "acme", "seats": 42, "canary": true, "ratio": float32(0.5)},
			want: map[string]any{"tenantId": "acme", "seats": int64(42), "canary": true, "ratio": 0.5}},
		{name: "arrays", in: map[string]any{"tags": []any{"a", "b"}, "ns": []int{1, 2}},
			want: map[string]any{"tags": []string{"a", "b"}, "ns": []int64{1, 2}}},
		{name: "openarmature prefix", in: map[string]any{"openarmature.user.x": "x"}, reserved: true},
		{name: "gen_ai prefix", in: map[string]any{"gen_ai.system": "openai"}, reserved: true},
		{name: "reserved name step", in: map[string]any{"step": "checkout"}, reserved: true},
		{name: "reserved name correlation_id", in: map[string]any{"correlation_id": "c"}, reserved: true},
		{name: "prefix-like name is fine", in: map[string]any{"steps": "x"}, want: map[string]any{"steps": "x"}},
		{name: "nil value", in: map[string]any{"k": nil}, invalid: true},
		{name: "nested object", in: map[string]any{"k": map[string]any{"a": 1}}, invalid: true},
		{name: "mixed array", in: map[string]any{"k": []any{"a", 1}}, invalid: true},
		{name: "empty key", in: map[string]any{"": "v"}, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, err := graph.NewMetadata(tt.in)
			if tt.reserved || tt.invalid {
				var me *graph.MetadataError
				if !errors.As(err, &me) || !errors.Is(err, graph.ErrInvalidOption) || errcat.Of(err) != errcat.InvalidInvocationMetadata {
					t.Fatalf("err = %v, want a categorized *MetadataError", err)
				}
				if got := errors.Is(err, graph.ErrReservedMetadataKey); got != tt.reserved {
					t.Fatalf("errors.Is(ErrReservedMetadataKey) = %t, want %t", got, tt.reserved)
				}
				// The same check guards Invoke, before any work.
				ran := false
				g := mustCompile(t, graph.NewBuilder(mustSchema(t, graph.NewDynamicField("x", graph.TypeInt))).
					AddNode("n", func(context.Context, graph.State) (graph.Update, error) { ran = true; return nil, nil }).
					AddEdge("n", graph.End).SetEntry("n"))
				res, err := g.Invoke(t.Context(), nil, graph.WithMetadata(tt.in))
				if res != nil || !errors.As(err, &me) || ran {
					t.Fatalf("Invoke = %v, %v (ran %t), want a nil result and the *MetadataError", res, err, ran)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, md.Map()); diff != "" {
				t.Fatalf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

// metaCapture records InvocationMetadata per node run.
type metaCapture struct {
	mu   sync.Mutex
	seen map[string][]map[string]any
}

func (c *metaCapture) node(name string, add func(context.Context, graph.State) map[string]any, fail func(context.Context) bool) graph.NodeFunc {
	return func(ctx context.Context, s graph.State) (graph.Update, error) {
		if add != nil {
			if err := graph.SetInvocationMetadata(ctx, add(ctx, s)); err != nil {
				return nil, err
			}
		}
		c.mu.Lock()
		c.seen[name] = append(c.seen[name], graph.InvocationMetadata(ctx).Map())
		c.mu.Unlock()
		if fail != nil && fail(ctx) {
			return nil, errcat.New(errcat.ProviderUnavailable, "transient")
		}
		return nil, nil
	}
}

func TestInvocationMetadataScoping(t *testing.T) {
	ctx := t.Context()
	base := map[string]any{"tenantId": "T1"}
	t.Run("serial round trip and forward flow", func(t *testing.T) {
		c := &metaCapture{seen: map[string][]map[string]any{}}
		g := mustCompile(t, graph.NewBuilder(mustSchema(t, graph.NewDynamicField("x", graph.TypeInt))).
			AddNode("a", c.node("a", func(context.Context, graph.State) map[string]any { return map[string]any{"kind": "fraud"} }, nil)).
			AddNode("b", c.node("b", nil, nil)).
			AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
		if _, err := g.Invoke(ctx, nil, graph.WithMetadata(base)); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"tenantId": "T1", "kind": "fraud"}
		if diff := cmp.Diff(map[string][]map[string]any{"a": {want}, "b": {want}}, c.seen); diff != "" {
			t.Fatalf("reads (-want +got):\n%s", diff)
		}
		// Reset after the invocation: a second run starts afresh.
		c.seen = map[string][]map[string]any{}
		if _, err := g.Invoke(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := c.seen["a"][0]; !cmp.Equal(got, map[string]any{"kind": "fraud"}) {
			t.Fatalf("second invocation read %v", got)
		}
	})
	t.Run("fan-out instances are isolated", func(t *testing.T) {
		c := &metaCapture{seen: map[string][]map[string]any{}}
		leaf := fanLeaf(t, c.node("w", func(_ context.Context, s graph.State) map[string]any {
			i, _ := s.Get("item")
			return map[string]any{"item": fmt.Sprint(i)}
		}, nil))
		g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).
			AddFanOut("fan", itemsFan(leaf)).AddNode("after", c.node("after", nil, nil)).
			AddEdge("fan", "after").AddEdge("after", graph.End).SetEntry("fan"))
		if _, err := g.Invoke(ctx, graph.Update{"items": []int{1, 2, 3}}, graph.WithMetadata(base)); err != nil {
			t.Fatal(err)
		}
		var items []string
		for _, m := range c.seen["w"] {
			if len(m) != 2 || m["tenantId"] != "T1" {
				t.Fatalf("instance read %v", m)
			}
			items = append(items, m["item"].(string))
		}
		slices.Sort(items)
		if !slices.Equal(items, []string{"1", "2", "3"}) {
			t.Fatalf("instance items %v", items)
		}
		if diff := cmp.Diff([]map[string]any{base}, c.seen["after"]); diff != "" {
			t.Fatalf("after the join (-want +got):\n%s", diff)
		}
	})
	t.Run("retry attempts start from the baseline", func(t *testing.T) {
		c := &metaCapture{seen: map[string][]map[string]any{}}
		retry, err := graph.NewRetry(graph.RetryConfig{MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		flaky := func(ctx context.Context, _ graph.State) (graph.Update, error) {
			before := graph.InvocationMetadata(ctx).Map()
			marker := fmt.Sprint("attempt", graph.AttemptIndex(ctx))
			if err := graph.SetInvocationMetadata(ctx, map[string]any{"marker": marker}); err != nil {
				return nil, err
			}
			c.mu.Lock()
			c.seen["flaky"] = append(c.seen["flaky"], before)
			c.mu.Unlock()
			if graph.AttemptIndex(ctx) == 0 {
				return nil, errcat.New(errcat.ProviderUnavailable, "transient")
			}
			return nil, nil
		}
		g := mustCompile(t, graph.NewBuilder(mustSchema(t, graph.NewDynamicField("x", graph.TypeInt))).
			AddNode("flaky", flaky, graph.WithMiddleware(retry)).
			AddNode("down", c.node("down", nil, nil)).
			AddEdge("flaky", "down").AddEdge("down", graph.End).SetEntry("flaky"))
		if _, err := g.Invoke(ctx, nil, graph.WithMetadata(base)); err != nil {
			t.Fatal(err)
		}
		want := map[string][]map[string]any{
			"flaky": {base, base}, // attempt 1 does not see attempt 0's marker
			"down":  {{"tenantId": "T1", "marker": "attempt1"}},
		}
		if diff := cmp.Diff(want, c.seen); diff != "" {
			t.Fatalf("reads (-want +got):\n%s", diff)
		}
	})
	t.Run("outside an invocation", func(t *testing.T) {
		if md := graph.InvocationMetadata(ctx); md.Len() != 0 {
			t.Fatalf("outside read %v", md.Map())
		}
		if err := graph.SetInvocationMetadata(ctx, map[string]any{"k": "v"}); err != nil {
			t.Fatalf("outside write: %v", err)
		}
		if err := graph.SetInvocationMetadata(ctx, map[string]any{"step": "v"}); !errors.Is(err, graph.ErrReservedMetadataKey) {
			t.Fatalf("outside reserved write: %v", err)
		}
	})
}

func TestMetadataEvents(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	obs := func(_ context.Context, ev graph.Event) error {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *graph.NodeEvent:
			got = append(got, fmt.Sprintf("%s %s %v", e.NodeName, e.Phase, e.Metadata.Map()))
		case *graph.MetadataEvent:
			got = append(got, fmt.Sprintf("augment %s %v %v", e.NodeName, e.Added.Map(), e.Metadata.Map()))
		case *graph.InvocationEvent:
			got = append(got, fmt.Sprintf("invocation %s %v", e.Phase, e.Metadata.Map()))
		}
		return nil
	}
	c := &metaCapture{seen: map[string][]map[string]any{}}
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, graph.NewDynamicField("x", graph.TypeInt))).
		AddNode("a", c.node("a", func(context.Context, graph.State) map[string]any { return map[string]any{"req": "r1"} }, nil)).
		AddEdge("a", graph.End).SetEntry("a"))
	if _, err := g.Invoke(t.Context(), nil, graph.WithMetadata(map[string]any{"t": "T"}),
		graph.WithObserver(obs, graph.InvocationEvents())); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"invocation started map[t:T]",
		"a started map[t:T]",
		"augment a map[req:r1] map[req:r1 t:T]",
		"a completed map[req:r1 t:T]",
		"invocation completed map[req:r1 t:T]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}
