package graph_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func noop(context.Context, graph.State) (graph.Update, error) { return nil, nil }

func routeTo(dest string) graph.RouteFunc {
	return func(context.Context, graph.State) (string, error) { return dest, nil }
}

// subgraphFixture compiles a one-node subgraph over fields sub fields.
func subgraphFixture(t *testing.T, fields ...graph.FieldSpec) *graph.Graph {
	t.Helper()
	return mustCompile(t, graph.NewBuilder(mustSchema(t, fields...)).
		AddNode("n", noop).AddEdge("n", graph.End).SetEntry("n"))
}

func TestCompileErrors(t *testing.T) {
	parent := mustSchema(t,
		graph.NewDynamicField("a", graph.TypeInt),
		graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append)),
	)
	sub := subgraphFixture(t, graph.NewDynamicField("a", graph.TypeInt), graph.NewDynamicField("s", graph.TypeInt))
	withSub := func(opts ...graph.NodeOption) func() *graph.Builder {
		return func() *graph.Builder {
			return graph.NewBuilder(parent).AddSubgraph("sub", sub, opts...).AddEdge("sub", graph.End).SetEntry("sub")
		}
	}
	tests := []struct {
		name  string
		build func() *graph.Builder
		want  errcat.Category
		node  string
		field string
	}{
		{name: "no entry", want: errcat.NoDeclaredEntry, build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddEdge("a", graph.End)
		}},
		{name: "unreachable node", want: errcat.UnreachableNode, node: "b", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddNode("b", noop).
				AddEdge("a", graph.End).AddEdge("b", graph.End).SetEntry("a")
		}},
		{name: "unreachable past declared conditional destinations", want: errcat.UnreachableNode, node: "c", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddNode("b", noop).AddNode("c", noop).
				AddConditionalEdge("a", routeTo("b"), "b", graph.End).AddEdge("b", graph.End).AddEdge("c", graph.End).SetEntry("a")
		}},
		{name: "dangling static edge target", want: errcat.DanglingEdge, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddEdge("a", "ghost").SetEntry("a")
		}},
		{name: "dangling edge source", want: errcat.DanglingEdge, node: "ghost", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddEdge("a", graph.End).AddEdge("ghost", "a").SetEntry("a")
		}},
		{name: "dangling conditional edge source", want: errcat.DanglingEdge, node: "ghost", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddEdge("a", graph.End).
				AddConditionalEdge("ghost", routeTo("a")).SetEntry("a")
		}},
		{name: "dangling conditional destination", want: errcat.DanglingEdge, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddConditionalEdge("a", routeTo(graph.End), "ghost", graph.End).SetEntry("a")
		}},
		{name: "entry not a node", want: errcat.DanglingEdge, node: "ghost", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddEdge("a", graph.End).SetEntry("ghost")
		}},
		{name: "END is not a node name", want: errcat.DanglingEdge, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddEdge("a", "END").SetEntry("a")
		}},
		{name: "two static edges", want: errcat.MultipleOutgoingEdges, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddNode("b", noop).
				AddEdge("a", "b").AddEdge("a", graph.End).AddEdge("b", graph.End).SetEntry("a")
		}},
		{name: "static and conditional edge", want: errcat.MultipleOutgoingEdges, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).
				AddEdge("a", graph.End).AddConditionalEdge("a", routeTo(graph.End)).SetEntry("a")
		}},
		{name: "inputs names undeclared parent field", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "nope",
			build: withSub(graph.Inputs(map[string]string{"a": "nope"}))},
		{name: "inputs names undeclared subgraph field", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "nope",
			build: withSub(graph.Inputs(map[string]string{"nope": "a"}))},
		{name: "outputs names undeclared parent field", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "nope",
			build: withSub(graph.Outputs(map[string]string{"nope": "s"}))},
		{name: "outputs names undeclared subgraph field", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "nope",
			build: withSub(graph.Outputs(map[string]string{"a": "nope"}))},
		{name: "in-set names a field missing from the subgraph", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "log",
			build: withSub(graph.ProjectIn("log"))},
		{name: "in-set names a field missing from the parent", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "s",
			build: withSub(graph.ProjectIn("s"))},
		{name: "out-set names an undeclared field", want: errcat.MappingReferencesUndeclaredField, node: "sub", field: "zz",
			build: withSub(graph.ProjectIn("a"), graph.ProjectOut("zz"))},
		{name: "sets and inputs", want: errcat.ConflictingProjectionForms, node: "sub",
			build: withSub(graph.ProjectIn("a"), graph.Inputs(map[string]string{"a": "a"}))},
		{name: "sets and outputs", want: errcat.ConflictingProjectionForms, node: "sub",
			build: withSub(graph.Outputs(map[string]string{"a": "a"}), graph.ProjectOut())},
		{name: "duplicate node", want: errcat.InvalidGraph, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddNode("a", noop).AddEdge("a", graph.End).SetEntry("a")
		}},
		{name: "duplicate subgraph node", want: errcat.InvalidGraph, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddSubgraph("a", sub).AddEdge("a", graph.End).SetEntry("a")
		}},
		{name: "empty node name", want: errcat.InvalidGraph, build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("", noop).AddEdge("", graph.End).SetEntry("")
		}},
		{name: "NUL in node name", want: errcat.InvalidGraph, node: "a\x00b", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a\x00b", noop).SetEntry("a\x00b")
		}},
		{name: "nil node function", want: errcat.InvalidGraph, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", nil).AddEdge("a", graph.End).SetEntry("a")
		}},
		{name: "nil route function", want: errcat.InvalidGraph, node: "a", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddNode("a", noop).AddConditionalEdge("a", nil).SetEntry("a")
		}},
		{name: "nil subgraph", want: errcat.InvalidGraph, node: "s", build: func() *graph.Builder {
			return graph.NewBuilder(parent).AddSubgraph("s", nil).SetEntry("s")
		}},
		{name: "nil schema", want: errcat.InvalidGraph, build: func() *graph.Builder {
			return graph.NewBuilder(nil).AddNode("a", noop).AddEdge("a", graph.End).SetEntry("a")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := tt.build().Compile()
			checkCompileErr(t, g, err, tt.want, tt.node, tt.field)
		})
	}
}

func checkCompileErr(t *testing.T, g *graph.Graph, err error, want errcat.Category, node, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Compile succeeded, want %s", want)
	}
	if g != nil {
		t.Errorf("Compile returned a graph with an error")
	}
	if !errors.Is(err, want) {
		t.Errorf("errors.Is(%v, %s) = false", err, want)
	}
	if got := errcat.Of(err); got != want {
		t.Errorf("errcat.Of = %q, want %q", got, want)
	}
	var ce *graph.CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *graph.CompileError", err)
	}
	if ce.Node != node || ce.Field != field {
		t.Errorf("CompileError Node/Field = %q/%q, want %q/%q", ce.Node, ce.Field, node, field)
	}
	if !strings.HasPrefix(err.Error(), "graph: "+string(want)+": ") {
		t.Errorf("message %q does not start with %q", err.Error(), "graph: "+string(want)+": ")
	}
}

// TestCompileSchemaCategories: the schema-level compile categories surface
// from NewSchema with the same error shape.
func TestCompileSchemaCategories(t *testing.T) {
	tests := []struct {
		name  string
		field graph.FieldSpec
		want  errcat.Category
	}{
		{"conflicting reducers", graph.NewDynamicField("f", graph.ListOf(nil),
			graph.WithReducer(graph.Append), graph.WithReducer(graph.Merge)), errcat.ConflictingReducers},
		{"bounded_append(0)", graph.NewListField[int]("f", graph.BoundedAppend(0)), errcat.ReducerConfigurationInvalid},
		{"merge_by_key(nil)", graph.NewListField[int]("f", graph.MergeByKey(nil)), errcat.ReducerConfigurationInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graph.NewSchema(tt.field)
			checkCompileErr(t, nil, err, tt.want, "", "f")
		})
	}
}

func TestRoundTripWarnings(t *testing.T) {
	parent := mustSchema(t,
		graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append)),
		graph.NewDynamicField("flat", graph.ListOf(graph.TypeString), graph.WithReducer(graph.ConcatFlatten)),
		graph.NewDynamicField("window", graph.ListOf(graph.TypeString), graph.WithReducer(graph.BoundedAppend(3))),
		graph.NewDynamicField("all", graph.DictOf(nil, nil), graph.WithReducer(graph.MergeAll)),
		graph.NewDynamicField("status", graph.TypeString),
		graph.NewDynamicField("meta", graph.DictOf(nil, nil), graph.WithReducer(graph.Merge)),
		graph.NewDynamicField("uniq", graph.ListOf(graph.TypeString), graph.WithReducer(graph.DedupeAppend(nil))),
		graph.NewDynamicField("recs", graph.ListOf(nil), graph.WithReducer(graph.MergeByKey(graph.FieldKey("id")))),
		graph.NewDynamicField("sum", graph.TypeInt, graph.WithReducer(graph.CustomReducer("sum",
			func(p, u any) (any, error) { return p.(int) + u.(int), nil }, false))),
		graph.NewDynamicField("keep", graph.TypeInt, graph.WithReducer(graph.CustomReducer("keep",
			func(p, u any) (any, error) { return u, nil }, true))),
	)
	var subFields []graph.FieldSpec
	for _, f := range parent.Fields() {
		r, _ := parent.Reducer(f)
		subFields = append(subFields, graph.NewDynamicField(f, parent.Type(f), graph.WithReducer(r)))
	}
	subFields = append(subFields,
		graph.NewDynamicField("sg_in", graph.ListOf(graph.TypeString)),
		graph.NewDynamicField("sg_out", graph.ListOf(graph.TypeString)))
	sub := subgraphFixture(t, subFields...)

	type warn struct{ Node, Field string }
	tests := []struct {
		name string
		opts []graph.NodeOption
		want []warn
	}{
		{"(a) declared sets into append", []graph.NodeOption{graph.ProjectIn("log"), graph.ProjectOut("log")}, []warn{{"sub", "log"}}},
		{"(a) declared sets into concat_flatten", []graph.NodeOption{graph.ProjectIn("flat"), graph.ProjectOut("flat")}, []warn{{"sub", "flat"}}},
		{"(a) declared sets into bounded_append", []graph.NodeOption{graph.ProjectIn("window"), graph.ProjectOut("window")}, []warn{{"sub", "window"}}},
		{"(a) declared sets into merge_all", []graph.NodeOption{graph.ProjectIn("all"), graph.ProjectOut("all")}, []warn{{"sub", "all"}}},
		{"(a) declared sets into non-idempotent custom", []graph.NodeOption{graph.ProjectIn("sum"), graph.ProjectOut("sum")}, []warn{{"sub", "sum"}}},
		{"(a) only the round-tripped fields warn", []graph.NodeOption{
			graph.ProjectIn("log", "flat", "status"), graph.ProjectOut("flat", "status", "window")}, []warn{{"sub", "flat"}}},
		{"(b) maps through the same subgraph field", []graph.NodeOption{
			graph.Inputs(map[string]string{"sg_in": "log"}), graph.Outputs(map[string]string{"log": "sg_in"})}, []warn{{"sub", "log"}}},
		{"(c) inputs only, same-named subgraph field", []graph.NodeOption{
			graph.Inputs(map[string]string{"log": "log"})}, []warn{{"sub", "log"}}},

		{"declared sets into last_write_wins", []graph.NodeOption{graph.ProjectIn("status"), graph.ProjectOut("status")}, nil},
		{"declared sets into merge", []graph.NodeOption{graph.ProjectIn("meta"), graph.ProjectOut("meta")}, nil},
		{"declared sets into dedupe_append", []graph.NodeOption{graph.ProjectIn("uniq"), graph.ProjectOut("uniq")}, nil},
		{"declared sets into merge_by_key", []graph.NodeOption{graph.ProjectIn("recs"), graph.ProjectOut("recs")}, nil},
		{"declared sets into idempotent custom", []graph.NodeOption{graph.ProjectIn("keep"), graph.ProjectOut("keep")}, nil},
		{"different subgraph fields", []graph.NodeOption{
			graph.Inputs(map[string]string{"sg_in": "log"}), graph.Outputs(map[string]string{"log": "sg_out"})}, nil},
		{"inputs only into a differently named field", []graph.NodeOption{graph.Inputs(map[string]string{"sg_in": "log"})}, nil},
		{"declared in-set only", []graph.NodeOption{graph.ProjectIn("log")}, nil},
		{"declared out-set only", []graph.NodeOption{graph.ProjectOut("log")}, nil},
		{"outputs only", []graph.NodeOption{graph.Outputs(map[string]string{"log": "log"})}, nil},
		{"default projection", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustCompile(t, graph.NewBuilder(parent).AddSubgraph("sub", sub, tt.opts...).AddEdge("sub", graph.End).SetEntry("sub"))
			var got []warn
			for _, w := range g.Warnings() {
				if w.Category != errcat.ProjectionReducerRoundTrip {
					t.Errorf("unexpected warning category %q", w.Category)
				}
				if w.Message == "" {
					t.Errorf("warning without a message")
				}
				got = append(got, warn{w.Node, w.Field})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRoundTripWarningIsBehaviourNeutral: the warning changes nothing at
// run time; an append field round-tripped through a subgraph is merged
// twice, exactly as the spec's example describes.
func TestRoundTripWarningIsBehaviourNeutral(t *testing.T) {
	log := graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append))
	sub := subgraphFixture(t, log)
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, log)).
		AddSubgraph("sub", sub, graph.ProjectIn("log"), graph.ProjectOut("log")).AddEdge("sub", graph.End).SetEntry("sub"))
	if len(g.Warnings()) != 1 {
		t.Fatalf("warnings = %v, want one", g.Warnings())
	}
	res, err := g.Invoke(t.Context(), graph.Update{"log": []any{"p0"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := stateJSON(t, res.State); got != `{"log":["p0","p0"]}` {
		t.Errorf("final state = %s", got)
	}
}

func TestNodeWithoutEdgeFailsAtRunTime(t *testing.T) {
	s := mustSchema(t, graph.NewDynamicField("v", graph.TypeString))
	g := mustCompile(t, graph.NewBuilder(s).AddNode("a", set(graph.Update{"v": "a"})).AddNode("b", set(graph.Update{"v": "b"})).
		AddEdge("a", "b").SetEntry("a"))
	if diff := cmp.Diff([]string{"a", "b"}, g.Nodes()); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}
	if g.Entry() != "a" || g.Schema() != s {
		t.Errorf("Entry/Schema accessors wrong")
	}
	res, err := g.Invoke(t.Context(), nil)
	if !errors.Is(err, errcat.RoutingError) {
		t.Fatalf("err = %v, want routing_error", err)
	}
	var ne *graph.NodeError
	if !errors.As(err, &ne) || ne.Node != "b" {
		t.Fatalf("err = %#v, want a *NodeError for b", err)
	}
	if got := stateJSON(t, res.State); got != `{"v":"b"}` {
		t.Errorf("recoverable state = %s, want the post-merge state", got)
	}
	if diff := cmp.Diff([]string{"a", "b"}, res.Path); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
}

func TestNodeNamedEND(t *testing.T) {
	s := mustSchema(t, graph.NewDynamicField("v", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append)))
	g := mustCompile(t, graph.NewBuilder(s).AddNode("END", set(graph.Update{"v": []any{"END"}})).
		AddNode("a", set(graph.Update{"v": []any{"a"}})).AddEdge("a", "END").AddEdge("END", graph.End).SetEntry("a"))
	res, err := g.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := stateJSON(t, res.State); got != `{"v":["a","END"]}` {
		t.Errorf("final state = %s", got)
	}
}
