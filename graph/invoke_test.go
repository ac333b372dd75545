package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/uuid"
)

// logSchema: n int, log list<string> (append).
func logSchema(t *testing.T) *graph.Schema {
	return mustSchema(t,
		graph.NewDynamicField("n", graph.TypeInt),
		graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append)),
	)
}

// logNode appends name to log and increments n.
func logNode(name string) graph.NodeFunc {
	return func(_ context.Context, s graph.State) (graph.Update, error) {
		n, _ := s.Get("n")
		return graph.Update{"log": []any{name}, "n": n.(int) + 1}, nil
	}
}

func TestInvokeLinear(t *testing.T) {
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).
		AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddNode("c", logNode("c")).
		AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.End).SetEntry("a"))
	res, err := g.Invoke(t.Context(), graph.Update{"log": []any{"init"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != graph.Completed || res.Status.String() != "completed" || res.Err != nil {
		t.Errorf("Status/Err = %v/%v", res.Status, res.Err)
	}
	if got, want := stateJSON(t, res.State), `{"n":3,"log":["init","a","b","c"]}`; got != want {
		t.Errorf("final state = %s, want %s", got, want)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, res.Path); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[graph.Status]string{graph.Completed: "completed", graph.Errored: "errored",
		graph.Suspended: "suspended", graph.Status(0): "Status(0)"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestConditionalRouting(t *testing.T) {
	// The route reads the post-update state: a's own increment decides.
	tests := []struct {
		name  string
		limit int
		path  []string
		final string
	}{
		{"loops until the post-update count reaches the limit", 3, []string{"a", "a", "a", "b"}, `{"n":4,"log":["a","a","a","b"]}`},
		{"exits after one pass", 1, []string{"a", "b"}, `{"n":2,"log":["a","b"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route := func(_ context.Context, s graph.State) (string, error) {
				n, _ := s.Get("n")
				if n.(int) < tt.limit {
					return "a", nil
				}
				return "b", nil
			}
			g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", logNode("b")).
				AddConditionalEdge("a", route, "a", "b").AddEdge("b", graph.End).SetEntry("a"))
			res, err := g.Invoke(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.path, res.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
			if got := stateJSON(t, res.State); got != tt.final {
				t.Errorf("final = %s, want %s", got, tt.final)
			}
		})
	}
}

var errUser = errors.New("user failure")

func TestInvokeErrors(t *testing.T) {
	fail := func(u graph.Update, err error) graph.NodeFunc {
		return func(context.Context, graph.State) (graph.Update, error) { return u, err }
	}
	boom := func(context.Context, graph.State) (graph.Update, error) { panic("node boom") }
	tests := []struct {
		name    string
		b       graph.NodeFunc // second node
		route   graph.RouteFunc
		want    errcat.Category
		state   string // recoverable state
		field   string
		reducer string
		check   func(t *testing.T, err error)
	}{
		{name: "node exception", b: fail(nil, fmt.Errorf("wrapped: %w", errUser)), want: errcat.NodeException,
			state: `{"n":1,"log":["a"]}`, check: func(t *testing.T, err error) {
				if !errors.Is(err, errUser) {
					t.Errorf("errors.Is(err, errUser) = false")
				}
			}},
		{name: "node exception with an update", b: fail(graph.Update{"n": 99}, errUser), want: errcat.NodeException,
			state: `{"n":1,"log":["a"]}`},
		{name: "node panic", b: boom, want: errcat.NodeException, state: `{"n":1,"log":["a"]}`,
			check: func(t *testing.T, err error) {
				var pe *graph.PanicError
				if !errors.As(err, &pe) || pe.Value != "node boom" || len(pe.Stack) == 0 {
					t.Errorf("cause = %v, want a *PanicError with value and stack", err)
				}
				if !strings.Contains(pe.Error(), "node boom") {
					t.Errorf("PanicError.Error() = %q", pe.Error())
				}
			}},
		{name: "edge exception", b: logNode("b"), route: func(context.Context, graph.State) (string, error) { return "", errUser },
			want: errcat.EdgeException, state: `{"n":2,"log":["a","b"]}`, check: func(t *testing.T, err error) {
				if !errors.Is(err, errUser) {
					t.Errorf("errors.Is(err, errUser) = false")
				}
			}},
		{name: "edge panic", b: logNode("b"), route: func(context.Context, graph.State) (string, error) { panic("edge boom") },
			want: errcat.EdgeException, state: `{"n":2,"log":["a","b"]}`, check: func(t *testing.T, err error) {
				var pe *graph.PanicError
				if !errors.As(err, &pe) || pe.Value != "edge boom" {
					t.Errorf("cause = %v, want a *PanicError", err)
				}
			}},
		{name: "routing error", b: logNode("b"), route: routeTo("ghost"), want: errcat.RoutingError, state: `{"n":2,"log":["a","b"]}`},
		{name: "reducer error", b: fail(graph.Update{"log": "not a list"}, nil), want: errcat.ReducerError,
			state: `{"n":1,"log":["a"]}`, field: "log", reducer: "append", check: func(t *testing.T, err error) {
				var me *graph.MergeError
				if !errors.As(err, &me) || me.Field != "log" {
					t.Errorf("cause = %v, want a *MergeError for log", err)
				}
			}},
		{name: "state validation error", b: fail(graph.Update{"n": "x", "log": []any{"b"}}, nil), want: errcat.StateValidationError,
			state: `{"n":1,"log":["a"]}`, field: "n", reducer: "last_write_wins"},
		{name: "undeclared update field", b: fail(graph.Update{"zz": 1, "log": []any{"b"}}, nil), want: errcat.StateValidationError,
			state: `{"n":1,"log":["a"]}`, field: "zz", reducer: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", tt.b).AddNode("c", logNode("c")).
				AddEdge("a", "b").AddEdge("c", graph.End).SetEntry("a")
			if tt.route != nil {
				b.AddConditionalEdge("b", tt.route)
			} else {
				b.AddEdge("b", "c")
			}
			g := mustCompile(t, b)
			res, err := g.Invoke(t.Context(), nil)
			if err == nil {
				t.Fatalf("Invoke succeeded: %s", stateJSON(t, res.State))
			}
			if res == nil || res.Status != graph.Errored || res.Err != err {
				t.Fatalf("Result = %+v, want Errored with Err == err", res)
			}
			if !errors.Is(err, tt.want) || errcat.Of(err) != tt.want {
				t.Errorf("err = %v (category %q), want %s", err, errcat.Of(err), tt.want)
			}
			var ne *graph.NodeError
			if !errors.As(err, &ne) {
				t.Fatalf("err %T is not a *graph.NodeError", err)
			}
			if ne.Node != "b" || !cmp.Equal(ne.Namespace, []string{"b"}) || len(ne.ParentStates) != 0 {
				t.Errorf("NodeError node/namespace/parents = %q/%v/%d", ne.Node, ne.Namespace, len(ne.ParentStates))
			}
			if ne.Field != tt.field || ne.Reducer != tt.reducer {
				t.Errorf("NodeError field/reducer = %q/%q, want %q/%q", ne.Field, ne.Reducer, tt.field, tt.reducer)
			}
			if got := stateJSON(t, ne.State); got != tt.state {
				t.Errorf("NodeError.State = %s, want %s", got, tt.state)
			}
			if got := stateJSON(t, res.State); got != tt.state {
				t.Errorf("Result.State = %s, want %s", got, tt.state)
			}
			if got := stateJSON(t, ne.OutermostState()); got != tt.state {
				t.Errorf("OutermostState = %s, want %s", got, tt.state)
			}
			if diff := cmp.Diff([]string{"a", "b"}, res.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(err.Error(), `graph: node "b": `+string(tt.want)) {
				t.Errorf("message = %q", err.Error())
			}
			if tt.check != nil {
				tt.check(t, err)
			}
		})
	}
}

func TestInvokeInvalidInput(t *testing.T) {
	ran := false
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", func(context.Context, graph.State) (graph.Update, error) {
		ran = true
		return nil, nil
	}).AddEdge("a", graph.End).SetEntry("a"))
	tests := []struct {
		name  string
		input graph.Update
		field string
	}{
		{"wrong type", graph.Update{"n": "x"}, "n"},
		{"undeclared field", graph.Update{"nope": 1}, "nope"},
		{"wrong element type", graph.Update{"log": []any{1}}, "log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := g.Invoke(t.Context(), tt.input)
			checkStateErr(t, err, tt.field)
			if res == nil || res.Status != graph.Errored || res.Err != err || len(res.Path) != 0 {
				t.Fatalf("Result = %+v", res)
			}
			if got := stateJSON(t, res.State); got != `{"n":0,"log":[]}` {
				t.Errorf("Result.State = %s, want the defaults", got)
			}
			if res.InvocationID == "" || res.CorrelationID == "" {
				t.Errorf("ids not set on an invalid-input result")
			}
		})
	}
	if ran {
		t.Errorf("a node ran for an invalid input")
	}
}

func TestNilGraph(t *testing.T) {
	var g *graph.Graph
	if _, err := g.Invoke(t.Context(), nil); !errors.Is(err, graph.ErrNilGraph) {
		t.Errorf("Invoke: %v", err)
	}
	if _, err := g.Drain(t.Context()); !errors.Is(err, graph.ErrNilGraph) {
		t.Errorf("Drain: %v", err)
	}
	if _, err := g.DrainEventsFor(t.Context(), "x"); !errors.Is(err, graph.ErrNilGraph) {
		t.Errorf("DrainEventsFor: %v", err)
	}
	if _, err := g.AddObserver(func(context.Context, graph.Event) error { return nil }); !errors.Is(err, graph.ErrNilGraph) {
		t.Errorf("AddObserver: %v", err)
	}
}

func oneNodeGraph(t *testing.T, fn graph.NodeFunc, opts ...graph.CompileOption) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", fn).AddEdge("a", graph.End).SetEntry("a"), opts...)
}

func TestInvocationIDs(t *testing.T) {
	t.Run("caller supplied ids are used verbatim", func(t *testing.T) {
		var inNode [2]string
		g := oneNodeGraph(t, func(ctx context.Context, _ graph.State) (graph.Update, error) {
			inNode = [2]string{graph.InvocationID(ctx), graph.CorrelationID(ctx)}
			return nil, nil
		})
		res, err := g.Invoke(t.Context(), nil, graph.WithInvocationID("inv-1.A_b~c:d"), graph.WithCorrelationID("corr-9"))
		if err != nil {
			t.Fatal(err)
		}
		want := [2]string{"inv-1.A_b~c:d", "corr-9"}
		if got := [2]string{res.InvocationID, res.CorrelationID}; got != want || inNode != want {
			t.Errorf("result ids %v, in-node ids %v, want %v", got, inNode, want)
		}
	})
	t.Run("minted ids are unique UUIDv4s", func(t *testing.T) {
		g := oneNodeGraph(t, noop)
		seen := map[string]bool{}
		for range 20 {
			res, err := g.Invoke(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{res.InvocationID, res.CorrelationID} {
				if !uuid.Valid(id) {
					t.Errorf("minted id %q is not a UUIDv4", id)
				}
				if seen[id] {
					t.Errorf("minted id %q twice", id)
				}
				seen[id] = true
			}
		}
	})
	t.Run("only the missing id is minted", func(t *testing.T) {
		g := oneNodeGraph(t, noop)
		res, err := g.Invoke(t.Context(), nil, graph.WithCorrelationID("c"))
		if err != nil {
			t.Fatal(err)
		}
		if res.CorrelationID != "c" || !uuid.Valid(res.InvocationID) {
			t.Errorf("ids = %q/%q", res.InvocationID, res.CorrelationID)
		}
	})
	t.Run("WithIDGenerator", func(t *testing.T) {
		n := 0
		g := oneNodeGraph(t, noop, graph.WithIDGenerator(func() string { n++; return fmt.Sprintf("id-%d", n) }))
		var got []string
		for range 2 {
			res, err := g.Invoke(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, res.InvocationID, res.CorrelationID)
		}
		if diff := cmp.Diff([]string{"id-1", "id-2", "id-3", "id-4"}, got); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
	})
	t.Run("invalid ids", func(t *testing.T) {
		ran := false
		g := oneNodeGraph(t, func(context.Context, graph.State) (graph.Update, error) { ran = true; return nil, nil })
		for _, id := range []string{"", "a b", "a/b", "a?b", "é", "a\x00", strings.Repeat("a", 513)} {
			for _, opt := range []struct {
				name string
				o    graph.InvokeOption
			}{{"invocation", graph.WithInvocationID(id)}, {"correlation", graph.WithCorrelationID(id)}} {
				t.Run(fmt.Sprintf("%s/%.12q", opt.name, id), func(t *testing.T) {
					res, err := g.Invoke(t.Context(), nil, opt.o)
					if !errors.Is(err, graph.ErrInvalidOption) {
						t.Errorf("err = %v, want ErrInvalidOption", err)
					}
					if res != nil {
						t.Errorf("Result = %+v, want nil", res)
					}
				})
			}
		}
		if ran {
			t.Errorf("a node ran despite an invalid option")
		}
	})
}

func TestContextAccessors(t *testing.T) {
	if graph.InvocationID(t.Context()) != "" || graph.CorrelationID(t.Context()) != "" {
		t.Errorf("ids outside an invocation")
	}
	if _, ok := graph.CurrentNode(t.Context()); ok {
		t.Errorf("CurrentNode outside an invocation")
	}
	type seen struct {
		Inv, Corr string
		Node      graph.NodeInfo
		OK        bool
	}
	var mu sync.Mutex
	var got []seen
	capture := func(ctx context.Context) {
		info, ok := graph.CurrentNode(ctx)
		mu.Lock()
		got = append(got, seen{graph.InvocationID(ctx), graph.CorrelationID(ctx), info, ok})
		mu.Unlock()
	}
	node := func(ctx context.Context, _ graph.State) (graph.Update, error) { capture(ctx); return nil, nil }
	inner := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", node).AddEdge("x", graph.End).SetEntry("x"))
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", node).AddSubgraph("sub", inner).
		AddConditionalEdge("a", func(ctx context.Context, _ graph.State) (string, error) { capture(ctx); return "sub", nil }, "sub").
		AddEdge("sub", graph.End).SetEntry("a"))
	if _, err := g.Invoke(t.Context(), nil, graph.WithInvocationID("i"), graph.WithCorrelationID("c")); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"i", "c", graph.NodeInfo{Name: "a", Namespace: []string{"a"}, Step: 0}, true},
		{"i", "c", graph.NodeInfo{Name: "a", Namespace: []string{"a"}, Step: 0}, true}, // the edge runs in a's scope
		{"i", "c", graph.NodeInfo{Name: "x", Namespace: []string{"sub", "x"}, Step: 1}, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("context values (-want +got):\n%s", diff)
	}
}

func TestCancellation(t *testing.T) {
	t.Run("cancelled between nodes", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ranB := false
		g := mustCompile(t, graph.NewBuilder(logSchema(t)).
			AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { cancel(); return logNode("a")(ctx, s) }).
			AddNode("b", func(context.Context, graph.State) (graph.Update, error) { ranB = true; return nil, nil }).
			AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
		res, err := g.Invoke(ctx, nil)
		if ranB {
			t.Errorf("node b ran after cancellation")
		}
		if !errors.Is(err, errcat.InvocationCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want invocation_cancelled wrapping context.Canceled", err)
		}
		var ne *graph.NodeError
		if !errors.As(err, &ne) || ne.Node != "b" {
			t.Errorf("err = %#v, want a NodeError naming the next node", err)
		}
		if got := stateJSON(t, res.State); got != `{"n":1,"log":["a"]}` {
			t.Errorf("state = %s", got)
		}
		if diff := cmp.Diff([]string{"a"}, res.Path); diff != "" {
			t.Errorf("Path (-want +got):\n%s", diff)
		}
	})
	t.Run("deadline before the first node", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
		defer cancel()
		g := oneNodeGraph(t, noop)
		res, err := g.Invoke(ctx, nil)
		if !errors.Is(err, errcat.InvocationCancelled) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if res.Status != graph.Errored || len(res.Path) != 0 {
			t.Errorf("Result = %+v", res)
		}
	})
	t.Run("cancelled inside a subgraph", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		inner := mustCompile(t, graph.NewBuilder(logSchema(t)).
			AddNode("x", func(ctx context.Context, s graph.State) (graph.Update, error) { cancel(); return logNode("x")(ctx, s) }).
			AddNode("y", logNode("y")).AddEdge("x", "y").AddEdge("y", graph.End).SetEntry("x"))
		g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddSubgraph("sub", inner).
			AddEdge("a", "sub").AddEdge("sub", graph.End).SetEntry("a"))
		res, err := g.Invoke(ctx, nil)
		var ne *graph.NodeError
		if !errors.As(err, &ne) || !errors.Is(err, errcat.InvocationCancelled) {
			t.Fatalf("err = %v", err)
		}
		if !cmp.Equal(ne.Namespace, []string{"sub", "y"}) {
			t.Errorf("Namespace = %v", ne.Namespace)
		}
		if got := stateJSON(t, res.State); got != `{"n":1,"log":["a"]}` {
			t.Errorf("Result.State = %s, want the outer state at subgraph entry", got)
		}
	})
}

// projection fixtures: the subgraph node reads x and s_in and writes x,
// y, s_out and log.
func projectionGraphs(t *testing.T) (parent *graph.Schema, sub *graph.Graph) {
	parent = mustSchema(t,
		graph.NewDynamicField("x", graph.TypeString, graph.Default("px")),
		graph.NewDynamicField("y", graph.TypeInt),
		graph.NewDynamicField("a", graph.TypeInt, graph.Default(5)),
		graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append), graph.Default([]any{"p"})),
		graph.NewDynamicField("res", graph.TypeString),
	)
	subSchema := mustSchema(t,
		graph.NewDynamicField("x", graph.TypeString, graph.Default("sx")),
		graph.NewDynamicField("y", graph.TypeInt),
		graph.NewDynamicField("s_in", graph.TypeInt),
		graph.NewDynamicField("s_out", graph.TypeString),
		graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append)),
	)
	sub = mustCompile(t, graph.NewBuilder(subSchema).AddNode("n", func(_ context.Context, s graph.State) (graph.Update, error) {
		x, _ := s.Get("x")
		in, _ := s.Get("s_in")
		return graph.Update{"x": x.(string) + "!", "y": in.(int) + 1, "s_out": fmt.Sprintf("in=%d", in), "log": []any{"sub"}}, nil
	}).AddEdge("n", graph.End).SetEntry("n"))
	return parent, sub
}

func TestSubgraphProjection(t *testing.T) {
	parent, sub := projectionGraphs(t)
	const untouched = `{"x":"px","y":0,"a":5,"log":["p"],"res":""}`
	tests := []struct {
		name string
		opts []graph.NodeOption
		want string
	}{
		{"default: nothing in, name-matching out", nil, `{"x":"sx!","y":1,"a":5,"log":["p","sub"],"res":""}`},
		{"inputs only: mapped in, name-matching out",
			[]graph.NodeOption{graph.Inputs(map[string]string{"s_in": "a", "x": "x"})},
			`{"x":"px!","y":6,"a":5,"log":["p","sub"],"res":""}`},
		{"outputs only: nothing in, only mapped out",
			[]graph.NodeOption{graph.Outputs(map[string]string{"res": "s_out"})},
			`{"x":"px","y":0,"a":5,"log":["p"],"res":"in=0"}`},
		{"inputs and outputs",
			[]graph.NodeOption{graph.Inputs(map[string]string{"s_in": "a"}), graph.Outputs(map[string]string{"res": "s_out", "y": "y"})},
			`{"x":"px","y":6,"a":5,"log":["p"],"res":"in=5"}`},
		{"empty maps project nothing",
			[]graph.NodeOption{graph.Inputs(map[string]string{}), graph.Outputs(map[string]string{})}, untouched},
		{"declared in-set only projects nothing out", []graph.NodeOption{graph.ProjectIn("x")}, untouched},
		{"declared out-set only", []graph.NodeOption{graph.ProjectOut("x", "y")}, `{"x":"sx!","y":1,"a":5,"log":["p"],"res":""}`},
		{"declared in and out", []graph.NodeOption{graph.ProjectIn("x"), graph.ProjectOut("x")}, `{"x":"px!","y":0,"a":5,"log":["p"],"res":""}`},
		{"declared empty sets", []graph.NodeOption{graph.ProjectIn(), graph.ProjectOut()}, untouched},
		{"declared empty in-set", []graph.NodeOption{graph.ProjectIn()}, untouched},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustCompile(t, graph.NewBuilder(parent).AddSubgraph("sub", sub, tt.opts...).AddEdge("sub", graph.End).SetEntry("sub"))
			res, err := g.Invoke(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := stateJSON(t, res.State); got != tt.want {
				t.Errorf("final state = %s\nwant          %s", got, tt.want)
			}
			if diff := cmp.Diff([]string{"sub"}, res.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubgraphProjectionFailures(t *testing.T) {
	parent, sub := projectionGraphs(t)
	tests := []struct {
		name  string
		opts  []graph.NodeOption
		want  errcat.Category
		state string
	}{
		// Compile-time type checks are a SHOULD; mismatches surface at run time.
		{"projection in of the wrong type", []graph.NodeOption{graph.Inputs(map[string]string{"s_in": "x"})},
			errcat.StateValidationError, `{"x":"px","y":0,"a":5,"log":["p"],"res":""}`},
		{"projection out of the wrong type", []graph.NodeOption{graph.Outputs(map[string]string{"y": "s_out"})},
			errcat.StateValidationError, `{"x":"px","y":0,"a":5,"log":["p"],"res":""}`},
		{"projection out through a failing reducer", []graph.NodeOption{graph.Outputs(map[string]string{"log": "x"})},
			errcat.ReducerError, `{"x":"px","y":0,"a":5,"log":["p"],"res":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustCompile(t, graph.NewBuilder(parent).AddSubgraph("sub", sub, tt.opts...).AddEdge("sub", graph.End).SetEntry("sub"))
			res, err := g.Invoke(t.Context(), nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
			var ne *graph.NodeError
			if !errors.As(err, &ne) || ne.Node != "sub" || !cmp.Equal(ne.Namespace, []string{"sub"}) {
				t.Errorf("err = %#v, want a NodeError for the subgraph node", err)
			}
			if got := stateJSON(t, res.State); got != tt.state {
				t.Errorf("state = %s, want %s", got, tt.state)
			}
		})
	}
}

// nested builds outer(o1 → mid → o2), mid(m1 → deep), deep(leaf); every
// node appends its name to log and records its NodeInfo.
func nested(t *testing.T, leaf graph.NodeFunc) (*graph.Graph, func() map[string]graph.NodeInfo) {
	var mu sync.Mutex
	infos := map[string]graph.NodeInfo{}
	wrap := func(name string, fn graph.NodeFunc) graph.NodeFunc {
		return func(ctx context.Context, s graph.State) (graph.Update, error) {
			info, _ := graph.CurrentNode(ctx)
			mu.Lock()
			infos[name] = info
			mu.Unlock()
			return fn(ctx, s)
		}
	}
	deep := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("leaf", wrap("leaf", leaf)).AddEdge("leaf", graph.End).SetEntry("leaf"))
	mid := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("m1", wrap("m1", logNode("m1"))).AddSubgraph("deep", deep).
		AddEdge("m1", "deep").AddEdge("deep", graph.End).SetEntry("m1"))
	outer := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("o1", wrap("o1", logNode("o1"))).AddSubgraph("mid", mid).
		AddNode("o2", wrap("o2", logNode("o2"))).AddEdge("o1", "mid").AddEdge("mid", "o2").AddEdge("o2", graph.End).SetEntry("o1"))
	return outer, func() map[string]graph.NodeInfo {
		mu.Lock()
		defer mu.Unlock()
		return infos
	}
}

func TestTwoLevelNesting(t *testing.T) {
	g, infos := nested(t, logNode("leaf"))
	res, err := g.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// n projects out by name too (last_write_wins): deep starts from its
	// defaults and ends with n=1, which replaces n at each level; o2 then
	// makes it 2.
	if got, want := stateJSON(t, res.State), `{"n":2,"log":["o1","m1","leaf","o2"]}`; got != want {
		t.Errorf("final state = %s, want %s", got, want)
	}
	if diff := cmp.Diff([]string{"o1", "mid", "o2"}, res.Path); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
	want := map[string]graph.NodeInfo{
		"o1":   {Name: "o1", Namespace: []string{"o1"}, Step: 0},
		"m1":   {Name: "m1", Namespace: []string{"mid", "m1"}, Step: 1},
		"leaf": {Name: "leaf", Namespace: []string{"mid", "deep", "leaf"}, Step: 2},
		"o2":   {Name: "o2", Namespace: []string{"o2"}, Step: 3},
	}
	if diff := cmp.Diff(want, infos()); diff != "" {
		t.Errorf("node infos (-want +got):\n%s", diff)
	}
}

func TestFailureInsideSubgraph(t *testing.T) {
	g, _ := nested(t, func(context.Context, graph.State) (graph.Update, error) { return nil, errUser })
	res, err := g.Invoke(t.Context(), nil)
	if !errors.Is(err, errcat.NodeException) || !errors.Is(err, errUser) {
		t.Fatalf("err = %v", err)
	}
	var ne *graph.NodeError
	if !errors.As(err, &ne) {
		t.Fatalf("err %T is not a NodeError", err)
	}
	if ne.Node != "leaf" || !cmp.Equal(ne.Namespace, []string{"mid", "deep", "leaf"}) {
		t.Errorf("Node/Namespace = %q/%v", ne.Node, ne.Namespace)
	}
	if got := stateJSON(t, ne.State); got != `{"n":0,"log":[]}` {
		t.Errorf("State (innermost pre-node) = %s", got)
	}
	var parents []string
	for _, p := range ne.ParentStates {
		parents = append(parents, stateJSON(t, p))
	}
	if diff := cmp.Diff([]string{`{"n":1,"log":["o1"]}`, `{"n":1,"log":["m1"]}`}, parents); diff != "" {
		t.Errorf("ParentStates (-want +got):\n%s", diff)
	}
	if got := stateJSON(t, ne.OutermostState()); got != `{"n":1,"log":["o1"]}` {
		t.Errorf("OutermostState = %s", got)
	}
	if got := stateJSON(t, res.State); got != `{"n":1,"log":["o1"]}` {
		t.Errorf("Result.State = %s", got)
	}
	if diff := cmp.Diff([]string{"o1", "mid"}, res.Path); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(err.Error(), `graph: node "mid/deep/leaf": node_exception`) {
		t.Errorf("message = %q", err.Error())
	}
}

// TestDeterminism runs one graph (a loop, a subgraph, observers) many
// times concurrently: every run must produce the same final state, path
// and observer event sequence.
func TestDeterminism(t *testing.T) {
	inner := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", logNode("x")).AddNode("y", logNode("y")).
		AddConditionalEdge("x", func(_ context.Context, s graph.State) (string, error) {
			if n, _ := s.Get("n"); n.(int) < 3 {
				return "x", nil
			}
			return "y", nil
		}, "x", "y").AddEdge("y", graph.End).SetEntry("x"))
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).
		AddSubgraph("sub", inner, graph.Inputs(map[string]string{"n": "n"})).AddNode("b", logNode("b")).
		AddConditionalEdge("a", func(_ context.Context, s graph.State) (string, error) {
			if n, _ := s.Get("n"); n.(int) < 2 {
				return "a", nil
			}
			return "sub", nil
		}, "a", "sub").AddEdge("sub", "b").AddEdge("b", graph.End).SetEntry("a"))
	attached := newRecorder("attached", nil)
	remove, err := g.AddObserver(attached.observe)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()

	const runs = 20
	type outcome struct {
		State  string
		Path   []string
		Events []evRec
	}
	outs := make([]outcome, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			r := newRecorder("scoped", nil)
			res, err := g.Invoke(t.Context(), graph.Update{"log": []any{"start"}}, graph.WithObserver(r.observe))
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := g.DrainEventsFor(t.Context(), res.InvocationID); err != nil {
				t.Error(err)
			}
			evs := r.events()
			for j := range evs {
				evs[j].InvID = ""
			}
			b, _ := res.State.MarshalJSON()
			outs[i] = outcome{string(b), res.Path, evs}
		})
	}
	wg.Wait()
	drain(t, g)
	want := `{"n":5,"log":["start","a","a","x","y","b"]}`
	if outs[0].State != want {
		t.Errorf("final state = %s, want %s", outs[0].State, want)
	}
	if len(outs[0].Events) != 10 {
		t.Errorf("run 0 saw %d events, want 10", len(outs[0].Events))
	}
	for i := 1; i < runs; i++ {
		if diff := cmp.Diff(outs[0], outs[i]); diff != "" {
			t.Errorf("run %d differs from run 0 (-run0 +run%d):\n%s", i, i, diff)
		}
	}
	if got := len(attached.events()); got != 10*runs {
		t.Errorf("graph-attached observer saw %d events, want %d", got, 10*runs)
	}
}
