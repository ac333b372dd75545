package otelobserver_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// TestCallableBranchSpans: an inline-callable branch renders one dispatch
// span keyed by its name, with no node span beneath it (§5.7); a
// when-skipped branch renders none; a failed one is ERROR.
func TestCallableBranchSpans(t *testing.T) {
	y := graph.NewField[int]("y")
	never := func(context.Context, graph.State) (bool, error) { return false, nil }
	tests := []struct {
		name     string
		branches []graph.Branch
		policy   graph.ErrorPolicy
		wantOK   []string
		wantErr  []string
	}{{
		name: "dispatched and skipped",
		branches: []graph.Branch{
			{Name: "skipped", Call: set(9), When: never},
			{Name: "fts", Call: set(2)},
			{Name: "keyword", Call: func(context.Context, graph.State) (graph.Update, error) { return y.Set(3), nil }},
		},
		wantOK: []string{"fts", "keyword"},
	}, {
		name: "failed branch",
		branches: []graph.Branch{
			{Name: "vector", Call: func(context.Context, graph.State) (graph.Update, error) { return nil, errors.New("throttled") }},
		},
		policy:  graph.Collect,
		wantErr: []string{"vector"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			g, err := graph.NewBuilder(graph.MustSchema(x, y)).
				AddParallelBranches("retrieve", graph.ParallelBranches{Branches: tt.branches, ErrorPolicy: tt.policy}).
				AddEdge("retrieve", graph.End).SetEntry("retrieve").Compile()
			if err != nil {
				t.Fatal(err)
			}
			h.attach(t, g)
			_, _ = g.Invoke(context.Background(), nil)
			ss := h.spans(t, g)
			node := byName(t, ss, "retrieve")
			want := map[string]codes.Code{}
			for _, n := range tt.wantOK {
				want[n] = codes.Ok
			}
			for _, n := range tt.wantErr {
				want[n] = codes.Error
			}
			if got := attrs(node)[otelobserver.AttrBranchesBranchCount].AsInt64(); got != int64(len(want)) {
				t.Errorf("branch_count %d, want %d", got, len(want))
			}
			// The invocation, the node and one span per dispatched branch.
			if len(ss) != 2+len(want) {
				t.Errorf("got %d spans, want %d", len(ss), 2+len(want))
			}
			for name, code := range want {
				s := byName(t, ss, name)
				a := attrs(s)
				if s.Parent.SpanID() != node.SpanContext.SpanID() || s.Status.Code != code ||
					a[otelobserver.AttrNodeBranchName].AsString() != name ||
					a[otelobserver.AttrBranchesParentNodeName].AsString() != "retrieve" {
					t.Errorf("%s: parent %v, status %v, attributes %v", name, s.Parent.SpanID(), s.Status, a)
				}
				if _, ok := a[otelobserver.AttrNodeAttemptIndex]; !ok {
					t.Errorf("%s: no attempt index", name)
				}
			}
		})
	}
}

// TestBranchFailureCategory: a parallel-branches node failed by a
// callable branch reports the engine's carrier category, node_exception,
// on its span and on the branch's dispatch span (fixture 119), while a
// node that raises a categorized error itself reports that category
// (fixture 007).
func TestBranchFailureCategory(t *testing.T) {
	throttled := func(context.Context, graph.State) (graph.Update, error) {
		return nil, errcat.Wrap(errcat.ProviderRateLimit, "vector store throttled", nil)
	}
	tests := []struct {
		name  string
		build func(*graph.Builder) *graph.Builder
		want  map[string]string // span name → openarmature.error.category
	}{{
		name: "callable branch",
		build: func(b *graph.Builder) *graph.Builder {
			return b.AddParallelBranches("retrieve", graph.ParallelBranches{ErrorPolicy: graph.FailFast,
				Branches: []graph.Branch{{Name: "vector", Call: throttled}, {Name: "fts", Call: set(2)}}})
		},
		want: map[string]string{"retrieve": "node_exception", "vector": "node_exception"},
	}, {
		name:  "node raising",
		build: func(b *graph.Builder) *graph.Builder { return b.AddNode("retrieve", throttled) },
		want:  map[string]string{"retrieve": "provider_rate_limit"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			g, err := tt.build(graph.NewBuilder(graph.MustSchema(x))).
				AddEdge("retrieve", graph.End).SetEntry("retrieve").Compile()
			if err != nil {
				t.Fatal(err)
			}
			h.attach(t, g)
			if _, err := g.Invoke(context.Background(), nil); err == nil {
				t.Fatal("the invocation did not fail")
			}
			ss := h.spans(t, g)
			for name, cat := range tt.want {
				s := byName(t, ss, name)
				if got := attrs(s)[otelobserver.AttrErrorCategory].AsString(); got != cat || s.Status.Code != codes.Error || s.Status.Description != cat {
					t.Errorf("%s: category %q, status %v; want %q, ERROR", name, got, s.Status, cat)
				}
			}
		})
	}
}
