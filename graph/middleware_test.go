package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// ---------------------------------------------------------------------------
// Helpers shared by the middleware, fan-out and parallel-branches tests.

// evLog is an observer that records every event it receives (node events
// and framework-emitted events), in delivery order.
type evLog struct {
	mu  sync.Mutex
	evs []graph.Event
}

func (l *evLog) observe(_ context.Context, ev graph.Event) error {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
	return nil
}

func (l *evLog) nodeEvents() []*graph.NodeEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*graph.NodeEvent
	for _, ev := range l.evs {
		if ne, ok := ev.(*graph.NodeEvent); ok {
			out = append(out, ne)
		}
	}
	return out
}

func (l *evLog) isolationEvents() []*graph.FailureIsolationEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*graph.FailureIsolationEvent
	for _, ev := range l.evs {
		if fe, ok := ev.(*graph.FailureIsolationEvent); ok {
			out = append(out, fe)
		}
	}
	return out
}

// keys summarizes the node events (see evKey).
func (l *evLog) keys() []string {
	var out []string
	for _, e := range l.nodeEvents() {
		out = append(out, evKey(e))
	}
	return out
}

// evKey summarizes a node event as
// "<phase> <namespace> [aN] [f=<fan-out chain>] [b=<branch chain>] [!<category>]".
func evKey(e *graph.NodeEvent) string {
	var b strings.Builder
	b.WriteString(string(e.Phase))
	b.WriteByte(' ')
	b.WriteString(strings.Join(e.Namespace, "/"))
	if e.AttemptIndex != 0 {
		fmt.Fprintf(&b, " a%d", e.AttemptIndex)
	}
	if s, ok := intChain(e.FanOutIndexChain); ok {
		b.WriteString(" f=" + s)
	}
	if s, ok := strChain(e.BranchNameChain); ok {
		b.WriteString(" b=" + s)
	}
	if e.Err != nil {
		b.WriteString(" !" + string(e.ErrorCategory))
	}
	return b.String()
}

// intChain renders a lineage chain ("_" for nil entries); ok is false
// when no entry is set.
func intChain(c []*int) (s string, ok bool) {
	parts := make([]string, len(c))
	for i, p := range c {
		parts[i] = "_"
		if p != nil {
			parts[i], ok = fmt.Sprint(*p), true
		}
	}
	return strings.Join(parts, ","), ok
}

func strChain(c []*string) (s string, ok bool) {
	parts := make([]string, len(c))
	for i, p := range c {
		parts[i] = "_"
		if p != nil {
			parts[i], ok = *p, true
		}
	}
	return strings.Join(parts, ","), ok
}

// invokeObserved runs g with an invocation-scoped evLog and drains.
func invokeObserved(t *testing.T, g *graph.Graph, in graph.Update, opts ...graph.InvokeOption) (*graph.Result, *evLog, error) {
	t.Helper()
	l := &evLog{}
	res, err := g.Invoke(t.Context(), in, append(opts, graph.WithObserver(l.observe))...)
	drain(t, g)
	return res, l, err
}

// traceLog is a concurrency-safe list of strings.
type traceLog struct {
	mu sync.Mutex
	s  []string
}

func (tl *traceLog) add(s string) {
	tl.mu.Lock()
	tl.s = append(tl.s, s)
	tl.mu.Unlock()
}

func (tl *traceLog) get() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.s...)
}

// mw returns middleware recording "name>" in its pre-phase and "<name"
// in its post-phase.
func (tl *traceLog) mw(name string) graph.Middleware {
	return graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		tl.add(name + ">")
		u, err := next(ctx, s)
		tl.add("<" + name)
		return u, err
	})
}

// node returns logNode(name) that also records name.
func (tl *traceLog) node(name string) graph.NodeFunc {
	inner := logNode(name)
	return func(ctx context.Context, s graph.State) (graph.Update, error) {
		tl.add(name)
		return inner(ctx, s)
	}
}

// failing returns a node that fails with err on its first fails calls and
// then returns u; calls counts the calls.
func failing(fails int32, err error, u graph.Update) (fn graph.NodeFunc, calls *atomic.Int32) {
	calls = new(atomic.Int32)
	return func(context.Context, graph.State) (graph.Update, error) {
		if calls.Add(1) <= fails {
			return nil, err
		}
		return u, nil
	}, calls
}

func noBackoff(int) time.Duration { return 0 }

func mustRetry(t testing.TB, cfg graph.RetryConfig) *graph.Retry {
	t.Helper()
	if cfg.Backoff == nil {
		cfg.Backoff = noBackoff
	}
	r, err := graph.NewRetry(cfg)
	if err != nil {
		t.Fatalf("NewRetry: %v", err)
	}
	return r
}

func mustTiming(t testing.TB, cfg graph.TimingConfig) *graph.Timing {
	t.Helper()
	m, err := graph.NewTiming(cfg)
	if err != nil {
		t.Fatalf("NewTiming: %v", err)
	}
	return m
}

func mustIsolation(t testing.TB, cfg graph.FailureIsolationConfig) *graph.FailureIsolation {
	t.Helper()
	m, err := graph.NewFailureIsolation(cfg)
	if err != nil {
		t.Fatalf("NewFailureIsolation: %v", err)
	}
	return m
}

// single compiles a one-node graph over logSchema.
func single(t *testing.T, fn graph.NodeFunc, opts ...graph.NodeOption) *graph.Graph {
	t.Helper()
	return mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", fn, opts...).AddEdge("a", graph.End).SetEntry("a"))
}

func asNodeError(t *testing.T, err error) *graph.NodeError {
	t.Helper()
	var ne *graph.NodeError
	if !errors.As(err, &ne) {
		t.Fatalf("error %T (%v) is not a *graph.NodeError", err, err)
	}
	return ne
}

var (
	errTransient = errcat.New(errcat.ProviderUnavailable, "upstream down")
	errAuth      = errcat.New(errcat.ProviderAuthentication, "bad key")
)

// ---------------------------------------------------------------------------
// Middleware composition.

func TestMiddlewareOrder(t *testing.T) {
	tests := []struct {
		name  string
		build func(tl *traceLog) *graph.Builder
		want  []string
	}{
		{
			name: "per-node chain runs outer to inner, post phases reversed",
			build: func(tl *traceLog) *graph.Builder {
				return graph.NewBuilder(logSchema(t)).AddNode("a", tl.node("a"), graph.WithMiddleware(tl.mw("m1"), tl.mw("m2"), tl.mw("m3")))
			},
			want: []string{"m1>", "m2>", "m3>", "a", "<m3", "<m2", "<m1"},
		},
		{
			name: "per-graph composes outside per-node",
			build: func(tl *traceLog) *graph.Builder {
				return graph.NewBuilder(logSchema(t)).Use(tl.mw("g1"), tl.mw("g2")).AddNode("a", tl.node("a"), graph.WithMiddleware(tl.mw("n1")))
			},
			want: []string{"g1>", "g2>", "n1>", "a", "<n1", "<g2", "<g1"},
		},
		{
			name: "repeated Use and WithMiddleware append inward",
			build: func(tl *traceLog) *graph.Builder {
				return graph.NewBuilder(logSchema(t)).AddNode("a", tl.node("a"), graph.WithMiddleware(tl.mw("n1")), graph.WithMiddleware(tl.mw("n2"))).
					Use(tl.mw("g1")).Use(tl.mw("g2"))
			},
			want: []string{"g1>", "g2>", "n1>", "n2>", "a", "<n2", "<n1", "<g2", "<g1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := &traceLog{}
			g := mustCompile(t, tt.build(tl).AddEdge("a", graph.End).SetEntry("a"))
			res, l, err := invokeObserved(t, g, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tl.get()); diff != "" {
				t.Errorf("trace (-want +got):\n%s", diff)
			}
			if got, want := stateJSON(t, res.State), `{"n":1,"log":["a"]}`; got != want {
				t.Errorf("final = %s, want %s", got, want)
			}
			// Middleware does not add events: one pair for the node.
			if diff := cmp.Diff([]string{"started a", "completed a"}, l.keys()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMiddlewareShortCircuit(t *testing.T) {
	tl := &traceLog{}
	short := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		tl.add("short")
		return graph.Update{"log": []any{"short"}}, nil
	})
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).
		AddNode("a", tl.node("a"), graph.WithMiddleware(tl.mw("outer"), short, tl.mw("inner"))).
		AddNode("b", tl.node("b")).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
	res, l, err := invokeObserved(t, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The inner middleware and the node body never run; the outer
	// middleware's post phase still does.
	if diff := cmp.Diff([]string{"outer>", "short", "<outer", "b"}, tl.get()); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
	if got, want := stateJSON(t, res.State), `{"n":1,"log":["short","b"]}`; got != want {
		t.Errorf("final = %s, want %s (the short-circuit update is merged)", got, want)
	}
	if diff := cmp.Diff([]string{"started b", "completed b"}, l.keys()); diff != "" {
		t.Errorf("events (-want +got):\n%s (a short-circuited node emits no events)", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, res.Path); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
}

func TestMiddlewareTransformsState(t *testing.T) {
	var seenBefore, seenAfter, nodeSaw any
	m := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		seenBefore, _ = s.Get("n")
		s2, err := s.Merge(graph.Update{"n": 100})
		if err != nil {
			return nil, err
		}
		u, err := next(ctx, s2)
		seenAfter, _ = s.Get("n")
		return u, err
	})
	body := func(ctx context.Context, s graph.State) (graph.Update, error) {
		nodeSaw, _ = s.Get("n")
		return logNode("a")(ctx, s)
	}
	g := single(t, body, graph.WithMiddleware(m))
	res, l, err := invokeObserved(t, g, graph.Update{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if nodeSaw != 100 {
		t.Errorf("node saw n=%v, want the transformed 100", nodeSaw)
	}
	if seenBefore != 1 || seenAfter != 1 {
		t.Errorf("middleware's own input n = %v before / %v after next, want 1 / 1 (untouched)", seenBefore, seenAfter)
	}
	// The update is merged into the engine's state, not the transformed one.
	if got, want := stateJSON(t, res.State), `{"n":101,"log":["a"]}`; got != want {
		t.Errorf("final = %s, want %s", got, want)
	}
	evs := l.nodeEvents()
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2", len(evs))
	}
	if got := stateJSON(t, evs[0].PreState); got != `{"n":100,"log":[]}` {
		t.Errorf("started pre_state = %s, want the state the node received", got)
	}
}

func TestMiddlewareErrors(t *testing.T) {
	errMW := errors.New("middleware failure")
	tests := []struct {
		name   string
		node   graph.NodeFunc
		mw     graph.MiddlewareFunc
		cause  error // errors.Is target on the result error
		panics bool
		events []string
	}{
		{
			name: "node error is seen by middleware and propagates",
			node: func(context.Context, graph.State) (graph.Update, error) { return nil, errUser },
			mw: func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
				u, err := next(ctx, s)
				if !errors.Is(err, errUser) {
					return nil, fmt.Errorf("middleware saw %v, want errUser", err)
				}
				var ne *graph.NodeError
				if errors.As(err, &ne) {
					return nil, fmt.Errorf("middleware saw an engine wrapper %v, want the node's own error", err)
				}
				return u, err
			},
			cause:  errUser,
			events: []string{"started a", "completed a !node_exception"},
		},
		{
			name: "middleware raising in its pre phase",
			node: logNode("a"),
			mw: func(context.Context, graph.State, graph.Next) (graph.Update, error) {
				return nil, errMW
			},
			cause:  errMW,
			events: nil,
		},
		{
			name: "middleware raising after a successful next",
			node: logNode("a"),
			mw: func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
				if _, err := next(ctx, s); err != nil {
					return nil, err
				}
				return nil, errMW
			},
			cause:  errMW,
			events: []string{"started a", "completed a !node_exception"},
		},
		{
			name: "middleware panic",
			node: logNode("a"),
			mw: func(context.Context, graph.State, graph.Next) (graph.Update, error) {
				panic("middleware boom")
			},
			panics: true,
		},
		{
			name: "panic below middleware is seen as a PanicError",
			node: func(context.Context, graph.State) (graph.Update, error) { panic("node boom") },
			mw: func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
				return next(ctx, s)
			},
			panics: true,
			events: []string{"started a", "completed a !node_exception"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := single(t, tt.node, graph.WithMiddleware(tt.mw))
			res, l, err := invokeObserved(t, g, graph.Update{"n": 7})
			if err == nil {
				t.Fatal("Invoke succeeded, want node_exception")
			}
			ne := asNodeError(t, err)
			if ne.Category() != errcat.NodeException || ne.Node != "a" {
				t.Errorf("error = %s at %q, want node_exception at a", ne.Category(), ne.Node)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("errors.Is(err, cause) = false for %v", err)
			}
			if tt.panics {
				var pe *graph.PanicError
				if !errors.As(err, &pe) || len(pe.Stack) == 0 {
					t.Errorf("cause of %v is not a *graph.PanicError with a stack", err)
				}
			}
			// Recoverable state: the pre-node state.
			if got := stateJSON(t, res.State); got != `{"n":7,"log":[]}` {
				t.Errorf("recoverable state = %s", got)
			}
			if tt.events != nil || !tt.panics {
				if diff := cmp.Diff(tt.events, l.keys()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestMiddlewareRecovery(t *testing.T) {
	recoverMW := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		u, err := next(ctx, s)
		if err != nil {
			return graph.Update{"n": 99, "log": []any{"recovered"}}, nil
		}
		return u, nil
	})
	body := func(context.Context, graph.State) (graph.Update, error) { return nil, errUser }
	g := single(t, body, graph.WithMiddleware(recoverMW))
	res, l, err := invokeObserved(t, g, nil)
	if err != nil {
		t.Fatalf("Invoke: %v, want the recovery to complete the graph", err)
	}
	if got, want := stateJSON(t, res.State), `{"n":99,"log":["recovered"]}`; got != want {
		t.Errorf("final = %s, want %s", got, want)
	}
	t.Run("completed event reflects the recovered outcome", func(t *testing.T) {
		// Conformance fixture 006 (pipeline-utilities §2, §5; graph-engine
		// §6): the node's observer event carries post_state and no error.
		evs := l.nodeEvents()
		if len(evs) == 0 {
			t.Fatal("no events")
		}
		last := evs[len(evs)-1]
		if last.Phase != graph.PhaseCompleted || last.Err != nil || stateJSON(t, last.PostState) != `{"n":99,"log":["recovered"]}` {
			t.Errorf("events = %v", l.keys())
		}
	})
}

func TestMiddlewareSubgraphIsolation(t *testing.T) {
	tl := &traceLog{}
	named := func(label string) graph.Middleware {
		return graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
			info, _ := graph.CurrentNode(ctx)
			tl.add(label + ":" + strings.Join(info.Namespace, "/"))
			return next(ctx, s)
		})
	}
	inner := mustCompile(t, graph.NewBuilder(logSchema(t)).Use(named("I")).
		AddNode("x", logNode("x"), graph.WithMiddleware(named("X"))).AddNode("y", logNode("y")).
		AddEdge("x", "y").AddEdge("y", graph.End).SetEntry("x"))
	outer := mustCompile(t, graph.NewBuilder(logSchema(t)).Use(named("P")).
		AddNode("a", logNode("a")).
		AddSubgraph("sub", inner, graph.WithMiddleware(named("N"))).
		AddNode("b", logNode("b")).
		AddEdge("a", "sub").AddEdge("sub", "b").AddEdge("b", graph.End).SetEntry("a"))
	res, err := outer.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"P:a", "P:sub", "N:sub", "I:sub/x", "X:sub/x", "I:sub/y", "P:b"}
	if diff := cmp.Diff(want, tl.get()); diff != "" {
		t.Errorf("middleware dispatches (-want +got):\n%s", diff)
	}
	if got, want := stateJSON(t, res.State), `{"n":3,"log":["a","x","y","b"]}`; got != want {
		t.Errorf("final = %s, want %s", got, want)
	}
	// The inner graph run on its own sees only its own middleware.
	tl.s = nil
	if _, err := inner.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"I:x", "X:x", "I:y"}, tl.get()); diff != "" {
		t.Errorf("standalone inner (-want +got):\n%s", diff)
	}
}

func TestMiddlewareContext(t *testing.T) {
	type seen struct {
		Name      string
		Namespace []string
		Attempt   int
		InvID     string
		OK        bool
	}
	var mu sync.Mutex
	var got []seen
	probe := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		info, ok := graph.CurrentNode(ctx)
		mu.Lock()
		got = append(got, seen{info.Name, info.Namespace, info.AttemptIndex, graph.InvocationID(ctx), ok})
		mu.Unlock()
		return next(ctx, s)
	})
	body, _ := failing(1, errTransient, graph.Update{"n": 1})
	retry := mustRetry(t, graph.RetryConfig{MaxAttempts: 2})
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).Use(probe).
		AddNode("a", body, graph.WithMiddleware(retry, probe)).AddEdge("a", graph.End).SetEntry("a"))
	res, err := g.Invoke(t.Context(), nil, graph.WithInvocationID("inv-1"))
	if err != nil {
		t.Fatal(err)
	}
	ns := []string{"a"}
	want := []seen{
		{"a", ns, 0, "inv-1", true}, // per-graph, outside retry
		{"a", ns, 0, "inv-1", true}, // per-node inside retry, attempt 0
		{"a", ns, 1, "inv-1", true}, // attempt 1
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("context inside middleware (-want +got):\n%s", diff)
	}
	if res.InvocationID != "inv-1" {
		t.Errorf("InvocationID = %q", res.InvocationID)
	}
}

func TestNilMiddlewareCompileErrors(t *testing.T) {
	sub := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", logNode("x")).AddEdge("x", graph.End).SetEntry("x"))
	parent := func() *graph.Schema {
		return mustSchema(t, graph.NewDynamicField("n", graph.TypeInt), graph.NewDynamicField("out", graph.ListOf(nil), graph.WithReducer(graph.Append)))
	}
	tests := []struct {
		name string
		b    func() *graph.Builder
		node string
	}{
		{"per-node", func() *graph.Builder {
			return graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a"), graph.WithMiddleware(nil))
		}, "a"},
		{"per-node among others", func() *graph.Builder {
			return graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a"), graph.WithMiddleware((&traceLog{}).mw("ok"), nil))
		}, "a"},
		{"per-graph", func() *graph.Builder {
			return graph.NewBuilder(logSchema(t)).Use(nil).AddNode("a", logNode("a"))
		}, ""},
		{"fan-out instance middleware", func() *graph.Builder {
			return graph.NewBuilder(parent()).AddFanOut("a", graph.FanOut{Subgraph: sub, Count: graph.Fixed(1),
				CollectField: "n", TargetField: "out", InstanceMiddleware: []graph.Middleware{nil}})
		}, "a"},
		{"branch middleware", func() *graph.Builder {
			return graph.NewBuilder(parent()).AddParallelBranches("a", graph.ParallelBranches{Branches: []graph.Branch{
				{Name: "x", Call: noop, Middleware: []graph.Middleware{nil}}}})
		}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := tt.b().AddEdge("a", graph.End).SetEntry("a").Compile()
			checkCompileErr(t, g, err, errcat.InvalidGraph, tt.node, "")
		})
	}
}

// ---------------------------------------------------------------------------
// Retry (§6.1).

func TestRetryEvents(t *testing.T) {
	tests := []struct {
		name    string
		fails   int32
		err     error
		max     int
		calls   int32
		wantErr bool
		events  []string
	}{
		{
			name: "success on attempt 3", fails: 2, err: errTransient, max: 5, calls: 3,
			events: []string{
				"started a", "completed a !node_exception",
				"started a a1", "completed a a1 !node_exception",
				"started a a2", "completed a a2",
			},
		},
		{
			name: "exhaustion after MaxAttempts", fails: 10, err: errTransient, max: 2, calls: 2, wantErr: true,
			events: []string{"started a", "completed a !node_exception", "started a a1", "completed a a1 !node_exception"},
		},
		{
			name: "default MaxAttempts is 3", fails: 10, err: errTransient, max: 0, calls: 3, wantErr: true,
			events: []string{
				"started a", "completed a !node_exception",
				"started a a1", "completed a a1 !node_exception",
				"started a a2", "completed a a2 !node_exception",
			},
		},
		{
			name: "MaxAttempts 1 disables retry", fails: 10, err: errTransient, max: 1, calls: 1, wantErr: true,
			events: []string{"started a", "completed a !node_exception"},
		},
		{
			name: "non-retryable passes through", fails: 10, err: errAuth, max: 5, calls: 1, wantErr: true,
			events: []string{"started a", "completed a !node_exception"},
		},
		{
			name: "bare error is not retryable", fails: 10, err: errUser, max: 5, calls: 1, wantErr: true,
			events: []string{"started a", "completed a !node_exception"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, calls := failing(tt.fails, tt.err, graph.Update{"n": 7})
			g := single(t, body, graph.WithMiddleware(mustRetry(t, graph.RetryConfig{MaxAttempts: tt.max})))
			res, l, err := invokeObserved(t, g, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Invoke err = %v, wantErr %t", err, tt.wantErr)
			}
			if got := calls.Load(); got != tt.calls {
				t.Errorf("calls = %d, want %d", got, tt.calls)
			}
			if diff := cmp.Diff(tt.events, l.keys()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			evs := l.nodeEvents()
			for i, e := range evs {
				if e.Step != 0 {
					t.Errorf("event %d step = %d, want 0 (attempts share the dispatch's step)", i, e.Step)
				}
				if got := stateJSON(t, e.PreState); got != `{"n":0,"log":[]}` {
					t.Errorf("event %d pre_state = %s", i, got)
				}
				if e.Phase == graph.PhaseCompleted && e.Err != nil {
					if !e.PostState.IsZero() || !errors.Is(e.Err, tt.err) {
						t.Errorf("failed attempt %d: post=%v err=%v", e.AttemptIndex, !e.PostState.IsZero(), e.Err)
					}
				}
			}
			if !tt.wantErr {
				last := evs[len(evs)-1]
				if got := stateJSON(t, last.PostState); got != `{"n":7,"log":[]}` {
					t.Errorf("final completed post_state = %s", got)
				}
				if got := stateJSON(t, res.State); got != `{"n":7,"log":[]}` {
					t.Errorf("final = %s", got)
				}
			} else if !errors.Is(err, tt.err) || errcat.Of(err) != errcat.NodeException {
				t.Errorf("err = %v, want node_exception caused by the last attempt's error", err)
			}
		})
	}
}

func TestRetryClassifierAndCallbacks(t *testing.T) {
	type call struct {
		Attempt int
		Err     string
	}
	tests := []struct {
		name       string
		input      int
		classifier func(error, graph.State) bool
		calls      int32
	}{
		{"state-aware classifier retries below a threshold", 1, func(_ error, s graph.State) bool {
			n, _ := s.Get("n")
			return n.(int) < 5
		}, 3},
		{"state-aware classifier refuses above it", 9, func(_ error, s graph.State) bool {
			n, _ := s.Get("n")
			return n.(int) < 5
		}, 1},
		{"classifier receives the attempt's error", 0, func(err error, _ graph.State) bool {
			return errors.Is(err, errUser)
		}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, calls := failing(2, errUser, graph.Update{"log": []any{"ok"}})
			var mu sync.Mutex
			var onRetry []call
			var backoffs []int
			r := mustRetry(t, graph.RetryConfig{
				MaxAttempts: 3,
				Classifier:  tt.classifier,
				OnRetry: func(_ context.Context, err error, attempt int) {
					mu.Lock()
					onRetry = append(onRetry, call{attempt, err.Error()})
					mu.Unlock()
				},
				Backoff: func(attempt int) time.Duration {
					mu.Lock()
					backoffs = append(backoffs, attempt)
					mu.Unlock()
					return 0
				},
			})
			g := single(t, body, graph.WithMiddleware(r))
			_, err := g.Invoke(t.Context(), graph.Update{"n": tt.input})
			if got := calls.Load(); got != tt.calls {
				t.Fatalf("calls = %d, want %d (err %v)", got, tt.calls, err)
			}
			var wantCalls []call
			var wantBackoffs []int
			for i := 0; i < int(tt.calls)-1; i++ {
				wantCalls = append(wantCalls, call{i, errUser.Error()})
				wantBackoffs = append(wantBackoffs, i)
			}
			if diff := cmp.Diff(wantCalls, onRetry); diff != "" {
				t.Errorf("OnRetry calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantBackoffs, backoffs); diff != "" {
				t.Errorf("Backoff attempts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryCancellation(t *testing.T) {
	t.Run("cancellation during backoff stops retrying", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		body, calls := failing(10, errTransient, nil)
		r := mustRetry(t, graph.RetryConfig{
			MaxAttempts: 5,
			Backoff:     func(int) time.Duration { return time.Hour },
			OnRetry:     func(context.Context, error, int) { cancel() },
		})
		g := single(t, body, graph.WithMiddleware(r))
		start := time.Now()
		_, err := g.Invoke(ctx, nil)
		if err == nil {
			t.Fatal("Invoke succeeded")
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Invoke took %s: the backoff wait was not cut short", d)
		}
		if got := calls.Load(); got != 1 {
			t.Errorf("calls = %d, want 1", got)
		}
	})
	t.Run("a node returning the cancellation is not retried", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var calls atomic.Int32
		body := func(ctx context.Context, _ graph.State) (graph.Update, error) {
			calls.Add(1)
			cancel()
			return nil, ctx.Err()
		}
		r := mustRetry(t, graph.RetryConfig{MaxAttempts: 5, Classifier: func(error, graph.State) bool { return true }})
		g := single(t, body, graph.WithMiddleware(r))
		_, err := g.Invoke(ctx, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if got := calls.Load(); got != 1 {
			t.Errorf("calls = %d, want 1 (cancellation is never retried, even by a permissive classifier)", got)
		}
	})
}

func TestNewRetryValidation(t *testing.T) {
	if _, err := graph.NewRetry(graph.RetryConfig{MaxAttempts: -1}); !errors.Is(err, graph.ErrInvalidOption) {
		t.Errorf("NewRetry(MaxAttempts: -1) err = %v, want ErrInvalidOption", err)
	}
	if _, err := graph.NewRetry(graph.RetryConfig{}); err != nil {
		t.Errorf("NewRetry(zero config) = %v", err)
	}
}

func TestJitterBackoff(t *testing.T) {
	tests := []struct {
		name        string
		base, limit time.Duration
		attempt     int
		bound       time.Duration // exclusive upper bound
	}{
		{"attempt 0 is below base", 10 * time.Millisecond, time.Second, 0, 10 * time.Millisecond},
		{"attempt 3 is below base*8", 10 * time.Millisecond, time.Second, 3, 80 * time.Millisecond},
		{"capped", 10 * time.Millisecond, 50 * time.Millisecond, 4, 50 * time.Millisecond},
		{"huge attempt stays below the cap", time.Second, 30 * time.Second, 200, 30 * time.Second},
		{"spec default at attempt 1", time.Second, 30 * time.Second, 1, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := graph.JitterBackoff(tt.base, tt.limit)
			distinct := map[time.Duration]bool{}
			for range 500 {
				d := b(tt.attempt)
				if d < 0 || d >= tt.bound {
					t.Fatalf("backoff(%d) = %s, want in [0, %s)", tt.attempt, d, tt.bound)
				}
				distinct[d] = true
			}
			if len(distinct) < 2 {
				t.Errorf("500 samples gave %d distinct values: no jitter", len(distinct))
			}
		})
	}
	t.Run("zero base waits zero", func(t *testing.T) {
		// §6.1: uniform(0, min(cap, base·2^attempt)) is 0 for base 0.
		if d := graph.JitterBackoff(0, time.Second)(3); d != 0 {
			t.Errorf("backoff = %s, want 0", d)
		}
	})
}

// tErr declares itself transient (or not).
type tErr bool

func (e tErr) Error() string   { return fmt.Sprintf("transient=%t", bool(e)) }
func (e tErr) Transient() bool { return bool(e) }

func TestDefaultRetryable(t *testing.T) {
	// Real engine carriers, obtained by running graphs.
	oneCarrier := func(cause error) error {
		g := single(t, func(context.Context, graph.State) (graph.Update, error) { return nil, cause })
		_, err := g.Invoke(t.Context(), nil)
		return err
	}
	st := mustSchema(t, graph.NewDynamicField("n", graph.TypeInt)).Defaults()
	twoCarriers := fanOutFailure(t, errTransient)
	callBranch := branchFailure(t, errTransient, false)
	subBranch := branchFailure(t, errTransient, true)

	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"provider_unavailable", errcat.New(errcat.ProviderUnavailable, "x"), true},
		{"provider_rate_limit", errcat.New(errcat.ProviderRateLimit, "x"), true},
		{"provider_model_not_loaded", errcat.New(errcat.ProviderModelNotLoaded, "x"), true},
		{"provider_authentication", errcat.New(errcat.ProviderAuthentication, "x"), false},
		{"provider_invalid_request", errcat.New(errcat.ProviderInvalidRequest, "x"), false},
		{"provider_invalid_model", errcat.New(errcat.ProviderInvalidModel, "x"), false},
		{"provider_invalid_response", errcat.New(errcat.ProviderInvalidResponse, "x"), false},
		{"fan_out_empty", errcat.New(errcat.FanOutEmpty, "x"), false},
		{"bare error", errUser, false},
		{"fmt-wrapped transient", fmt.Errorf("calling: %w", errTransient), true},
		{"surface non-transient category over a transient cause", errcat.Wrap(errcat.ProviderInvalidRequest, "x", errTransient), false},
		{"self-declared transient", tErr(true), true},
		{"self-declared not transient", tErr(false), false},
		{"wrapped self-declared transient", fmt.Errorf("w: %w", tErr(true)), true},
		{"context.Canceled", context.Canceled, false},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false},
		{"wrapped cancellation", fmt.Errorf("w: %w", context.Canceled), false},
		{"node_exception carrier over a transient", oneCarrier(errTransient), true},
		{"node_exception carrier over a fmt-wrapped transient", oneCarrier(fmt.Errorf("w: %w", errTransient)), true},
		{"node_exception carrier over a self-declared transient", oneCarrier(tErr(true)), true},
		{"node_exception carrier over a non-transient", oneCarrier(errAuth), false},
		{"fmt-wrapped carrier over a transient", fmt.Errorf("w: %w", oneCarrier(errTransient)), true},
		{"two carriers deep (fan-out over a node)", twoCarriers, false},
		{"branch_failed carrier over a call branch's transient", callBranch, true},
		// §11.9: a failed branch inherits the §6.1 classification of the
		// node_exception it wraps.
		{"branch over a node carrier inherits (§11.9)", subBranch, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := graph.DefaultRetryable(tt.err, st); got != tt.want {
				t.Errorf("DefaultRetryable(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestRetryAttemptIndexPropagation(t *testing.T) {
	// The leaf subgraph: x → y; y fails once per run when flaky is set.
	type cfg struct {
		name   string
		build  func(t *testing.T, leaf *graph.Graph) *graph.Graph
		leafMW []graph.Middleware
		fails  int32
		want   []string
		out    string
	}
	leafSchema := func(t *testing.T) *graph.Schema {
		return mustSchema(t, graph.NewDynamicField("n", graph.TypeInt))
	}
	parentSchema := func(t *testing.T) *graph.Schema {
		return mustSchema(t, graph.NewDynamicField("n", graph.TypeInt),
			graph.NewDynamicField("out", graph.ListOf(nil), graph.WithReducer(graph.Append)))
	}
	tests := []cfg{
		{
			name: "instance middleware retry: inner events carry the instance attempt",
			build: func(t *testing.T, leaf *graph.Graph) *graph.Graph {
				return mustCompile(t, graph.NewBuilder(parentSchema(t)).AddFanOut("fan", graph.FanOut{
					Subgraph: leaf, Count: graph.Fixed(1), CollectField: "n", TargetField: "out",
					InstanceMiddleware: []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 3})},
				}).AddEdge("fan", graph.End).SetEntry("fan"))
			},
			out:   `{"n":0,"out":[5]}`,
			fails: 1,
			want: []string{
				"started fan", "started fan/x f=0", "completed fan/x f=0", "started fan/y f=0", "completed fan/y f=0 !node_exception",
				"started fan/x a1 f=0", "completed fan/x a1 f=0", "started fan/y a1 f=0", "completed fan/y a1 f=0", "completed fan",
			},
		},
		{
			name: "branch middleware retry: inner events carry the branch attempt",
			build: func(t *testing.T, leaf *graph.Graph) *graph.Graph {
				return mustCompile(t, graph.NewBuilder(parentSchema(t)).AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{
					{Name: "b1", Subgraph: leaf, Outputs: map[string]string{"n": "n"},
						Middleware: []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 3})}},
				}}).AddEdge("par", graph.End).SetEntry("par"))
			},
			out:   `{"n":5,"out":[]}`,
			fails: 1,
			want: []string{
				"started par", "started par/x b=b1", "completed par/x b=b1", "started par/y b=b1", "completed par/y b=b1 !node_exception",
				"started par/x a1 b=b1", "completed par/x a1 b=b1", "started par/y a1 b=b1", "completed par/y a1 b=b1", "completed par",
			},
		},
		{
			name: "innermost retry wins",
			build: func(t *testing.T, leaf *graph.Graph) *graph.Graph {
				return mustCompile(t, graph.NewBuilder(parentSchema(t)).AddFanOut("fan", graph.FanOut{
					Subgraph: leaf, Count: graph.Fixed(1), CollectField: "n", TargetField: "out",
					InstanceMiddleware: []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 3})},
				}).AddEdge("fan", graph.End).SetEntry("fan"))
			},
			// y's own retry (1 attempt) shadows the instance retry's counter.
			leafMW: []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 1})},
			out:    `{"n":0,"out":[5]}`,
			fails:  1,
			want: []string{
				"started fan", "started fan/x f=0", "completed fan/x f=0", "started fan/y f=0", "completed fan/y f=0 !node_exception",
				"started fan/x a1 f=0", "completed fan/x a1 f=0", "started fan/y f=0", "completed fan/y f=0", "completed fan",
			},
		},
		{
			name: "nodes without retry carry 0",
			build: func(t *testing.T, leaf *graph.Graph) *graph.Graph {
				return mustCompile(t, graph.NewBuilder(parentSchema(t)).AddFanOut("fan", graph.FanOut{
					Subgraph: leaf, Count: graph.Fixed(1), CollectField: "n", TargetField: "out",
				}).AddEdge("fan", graph.End).SetEntry("fan"))
			},
			out:  `{"n":0,"out":[5]}`,
			want: []string{"started fan", "started fan/x f=0", "completed fan/x f=0", "started fan/y f=0", "completed fan/y f=0", "completed fan"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y, _ := failing(tt.fails, errTransient, graph.Update{"n": 5})
			leaf := mustCompile(t, graph.NewBuilder(leafSchema(t)).AddNode("x", set(graph.Update{"n": 1})).
				AddNode("y", y, graph.WithMiddleware(tt.leafMW...)).AddEdge("x", "y").AddEdge("y", graph.End).SetEntry("x"))
			g := tt.build(t, leaf)
			res, l, err := invokeObserved(t, g, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, l.keys()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got := stateJSON(t, res.State); got != tt.out {
				t.Errorf("final = %s, want %s", got, tt.out)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Timing (§6.2).

// stepClock returns a clock advancing by step on every reading.
func stepClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

type timingSink struct {
	mu   sync.Mutex
	recs []graph.TimingRecord
	err  error
}

func (s *timingSink) onComplete(_ context.Context, r graph.TimingRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
	return s.err
}

func TestTiming(t *testing.T) {
	const step = 5 * time.Millisecond
	rec := func(name, outcome string, cat errcat.Category) graph.TimingRecord {
		return graph.TimingRecord{NodeName: name, Duration: step, Outcome: outcome, ExceptionCategory: cat}
	}
	tests := []struct {
		name    string
		build   func(t *testing.T, tm func(name string) *graph.Timing) *graph.Builder
		wantErr bool
		want    []graph.TimingRecord
	}{
		{
			name: "per-graph use names each node",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				return graph.NewBuilder(logSchema(t)).Use(tm("")).AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			want: []graph.TimingRecord{rec("a", "success", ""), rec("b", "success", "")},
		},
		{
			name: "explicit name",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				return graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a"), graph.WithMiddleware(tm("custom"))).AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			want: []graph.TimingRecord{rec("custom", "success", "")},
		},
		{
			name: "categorized exception",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				body, _ := failing(9, fmt.Errorf("calling: %w", errcat.New(errcat.ProviderRateLimit, "slow down")), nil)
				return graph.NewBuilder(logSchema(t)).Use(tm("")).AddNode("a", body).AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			wantErr: true,
			want:    []graph.TimingRecord{rec("a", "exception", errcat.ProviderRateLimit)},
		},
		{
			name: "uncategorized exception",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				body, _ := failing(9, errUser, nil)
				return graph.NewBuilder(logSchema(t)).Use(tm("")).AddNode("a", body).AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			wantErr: true,
			want:    []graph.TimingRecord{rec("a", "exception", "")},
		},
		{
			name: "timing wraps retry: one record",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				body, _ := failing(2, errTransient, graph.Update{"n": 1})
				return graph.NewBuilder(logSchema(t)).AddNode("a", body, graph.WithMiddleware(tm("a"), mustRetry(t, graph.RetryConfig{}))).
					AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			want: []graph.TimingRecord{rec("a", "success", "")},
		},
		{
			name: "retry wraps timing: one record per attempt",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				body, _ := failing(2, errTransient, graph.Update{"n": 1})
				return graph.NewBuilder(logSchema(t)).AddNode("a", body, graph.WithMiddleware(mustRetry(t, graph.RetryConfig{}), tm("a"))).
					AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			want: []graph.TimingRecord{
				rec("a", "exception", errcat.ProviderUnavailable), rec("a", "exception", errcat.ProviderUnavailable), rec("a", "success", ""),
			},
		},
		{
			name: "subgraph node is one dispatch",
			build: func(t *testing.T, tm func(string) *graph.Timing) *graph.Builder {
				inner := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", logNode("x")).AddNode("y", logNode("y")).
					AddEdge("x", "y").AddEdge("y", graph.End).SetEntry("x"))
				return graph.NewBuilder(logSchema(t)).Use(tm("")).AddSubgraph("a", inner).AddNode("b", logNode("b")).AddEdge("a", "b")
			},
			want: []graph.TimingRecord{rec("a", "success", ""), rec("b", "success", "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &timingSink{}
			clock := stepClock(step)
			tm := func(name string) *graph.Timing {
				return mustTiming(t, graph.TimingConfig{NodeName: name, OnComplete: sink.onComplete, Now: clock})
			}
			g := mustCompile(t, tt.build(t, tm).AddEdge("b", graph.End).SetEntry("a"))
			_, err := g.Invoke(t.Context(), nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Invoke err = %v, wantErr %t", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, sink.recs); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			for _, r := range sink.recs {
				if r.DurationMS() != 5 {
					t.Errorf("DurationMS = %v, want 5", r.DurationMS())
				}
			}
		})
	}
}

func TestTimingRealClock(t *testing.T) {
	sink := &timingSink{}
	g := single(t, logNode("a"), graph.WithMiddleware(mustTiming(t, graph.TimingConfig{OnComplete: sink.onComplete})))
	if _, err := g.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if len(sink.recs) != 1 || sink.recs[0].NodeName != "a" || sink.recs[0].Duration < 0 || sink.recs[0].Duration > 10*time.Second {
		t.Errorf("records = %+v", sink.recs)
	}
}

func TestTimingCallbackError(t *testing.T) {
	errCB := errors.New("metrics backend down")
	tests := []struct {
		name  string
		body  graph.NodeFunc
		also  error
		event []string
	}{
		{"after success", logNode("a"), nil, []string{"started a", "completed a !node_exception"}},
		{"after failure", func(context.Context, graph.State) (graph.Update, error) { return nil, errUser }, errUser,
			[]string{"started a", "completed a !node_exception"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &timingSink{err: errCB}
			g := single(t, tt.body, graph.WithMiddleware(mustTiming(t, graph.TimingConfig{OnComplete: sink.onComplete})))
			res, l, err := invokeObserved(t, g, nil)
			if errcat.Of(err) != errcat.NodeException || !errors.Is(err, errCB) {
				t.Fatalf("err = %v, want node_exception caused by the callback error", err)
			}
			if tt.also != nil && !errors.Is(err, tt.also) {
				t.Errorf("the node's own error is lost: %v", err)
			}
			if got := stateJSON(t, res.State); got != `{"n":0,"log":[]}` {
				t.Errorf("recoverable state = %s", got)
			}
			if diff := cmp.Diff(tt.event, l.keys()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewTimingValidation(t *testing.T) {
	if _, err := graph.NewTiming(graph.TimingConfig{}); !errors.Is(err, graph.ErrInvalidOption) {
		t.Errorf("NewTiming without OnComplete: err = %v, want ErrInvalidOption", err)
	}
}

// ---------------------------------------------------------------------------
// Failure isolation (§6.3).

func TestFailureIsolationGates(t *testing.T) {
	degraded := graph.Update{"log": []any{"degraded"}}
	isTarget := func(err error) bool { return errors.Is(err, errTransient) }
	tests := []struct {
		name      string
		err       error
		cfg       graph.FailureIsolationConfig
		caught    bool
		wantFinal string
	}{
		{name: "static degraded, no gates, bare error", err: errUser,
			cfg: graph.FailureIsolationConfig{Degraded: degraded}, caught: true, wantFinal: `{"n":3,"log":["degraded"]}`},
		{name: "empty static degraded", err: errUser,
			cfg: graph.FailureIsolationConfig{Degraded: graph.Update{}}, caught: true, wantFinal: `{"n":3,"log":[]}`},
		{name: "degraded func reads the state", err: errUser,
			cfg: graph.FailureIsolationConfig{DegradedFunc: func(_ context.Context, s graph.State) (graph.Update, error) {
				n, _ := s.Get("n")
				return graph.Update{"n": n.(int) * 10}, nil
			}}, caught: true, wantFinal: `{"n":30,"log":[]}`},
		{name: "catch matches the category", err: errTransient,
			cfg:    graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderRateLimit, errcat.ProviderUnavailable}},
			caught: true, wantFinal: `{"n":3,"log":["degraded"]}`},
		{name: "catch matches through fmt wrapping", err: fmt.Errorf("calling: %w", errTransient),
			cfg:    graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderUnavailable}},
			caught: true, wantFinal: `{"n":3,"log":["degraded"]}`},
		{name: "catch mismatch propagates", err: errAuth,
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderUnavailable}}},
		{name: "catch never matches an uncategorized error", err: errUser,
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderUnavailable}}},
		{name: "catch uses the outermost category, not a buried one", err: errcat.Wrap(errcat.ProviderInvalidRequest, "bad", errTransient),
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderUnavailable}}},
		{name: "predicate accepts", err: errTransient,
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Predicate: isTarget}, caught: true, wantFinal: `{"n":3,"log":["degraded"]}`},
		{name: "predicate rejects", err: errUser,
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Predicate: isTarget}},
		{name: "both gates pass", err: errTransient,
			cfg:    graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderUnavailable}, Predicate: isTarget},
			caught: true, wantFinal: `{"n":3,"log":["degraded"]}`},
		{name: "catch passes, predicate fails", err: errTransient,
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderUnavailable},
				Predicate: func(error) bool { return false }}},
		{name: "predicate passes, catch fails", err: errTransient,
			cfg: graph.FailureIsolationConfig{Degraded: degraded, Catch: []errcat.Category{errcat.ProviderAuthentication}, Predicate: isTarget}},
		{name: "context cancellation is never caught", err: fmt.Errorf("w: %w", context.Canceled),
			cfg: graph.FailureIsolationConfig{Degraded: degraded}},
		{name: "deadline is never caught", err: context.DeadlineExceeded,
			cfg: graph.FailureIsolationConfig{Degraded: degraded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var caught []error
			cfg := tt.cfg
			cfg.EventName = "iso"
			cfg.OnCaught = func(_ context.Context, err error) { caught = append(caught, err) }
			body, _ := failing(9, tt.err, nil)
			g := single(t, body, graph.WithMiddleware(mustIsolation(t, cfg)))
			res, l, err := invokeObserved(t, g, graph.Update{"n": 3})
			if !tt.caught {
				if err == nil || !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want the node's failure to propagate", err)
				}
				if len(caught) != 0 || len(l.isolationEvents()) != 0 {
					t.Errorf("OnCaught calls = %d, isolation events = %d, want none", len(caught), len(l.isolationEvents()))
				}
				return
			}
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if got := stateJSON(t, res.State); got != tt.wantFinal {
				t.Errorf("final = %s, want %s", got, tt.wantFinal)
			}
			if len(caught) != 1 || caught[0] != tt.err {
				t.Errorf("OnCaught got %v, want exactly the caught error", caught)
			}
			if n := len(l.isolationEvents()); n != 1 {
				t.Errorf("isolation events = %d, want 1", n)
			}
		})
	}
}

func TestFailureIsolationCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var caught atomic.Int32
	body := func(context.Context, graph.State) (graph.Update, error) {
		cancel()
		return nil, errUser // not itself a cancellation error
	}
	fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "iso", Degraded: graph.Update{},
		OnCaught: func(context.Context, error) { caught.Add(1) }})
	g := single(t, body, graph.WithMiddleware(fi))
	if _, err := g.Invoke(ctx, nil); err == nil {
		t.Fatal("Invoke succeeded: a failure under a cancelled context must not be degraded")
	}
	if caught.Load() != 0 {
		t.Error("OnCaught called under cancellation")
	}
}

func TestFailureIsolationDegradedFuncError(t *testing.T) {
	errDeg := errors.New("cannot degrade")
	fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "iso",
		DegradedFunc: func(context.Context, graph.State) (graph.Update, error) { return nil, errDeg }})
	body, _ := failing(9, errUser, nil)
	g := single(t, body, graph.WithMiddleware(fi))
	_, l, err := invokeObserved(t, g, nil)
	if errcat.Of(err) != errcat.NodeException || !errors.Is(err, errDeg) || !errors.Is(err, errUser) {
		t.Errorf("err = %v, want node_exception carrying both errors", err)
	}
	if len(l.isolationEvents()) != 0 {
		t.Error("an isolation event was emitted for a failed degrade")
	}
}

func TestFailureIsolationEvent(t *testing.T) {
	l := &evLog{}
	cause := fmt.Errorf("calling model: %w", errcat.Wrap(errcat.ProviderUnavailable, "down", errors.New("socket reset")))
	body, _ := failing(9, cause, nil)
	fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "model_failed", Degraded: graph.Update{"log": []any{"deg"}}})
	g := single(t, body, graph.WithMiddleware(fi))
	// Phases(completed) must not filter the isolation event: it has no phase.
	defer mustObserve(t, g, l.observe, graph.Phases(graph.PhaseCompleted))()
	res, err := g.Invoke(t.Context(), graph.Update{"n": 2}, graph.WithCorrelationID("corr"))
	if err != nil {
		t.Fatal(err)
	}
	drain(t, g)
	evs := l.isolationEvents()
	if len(evs) != 1 {
		t.Fatalf("isolation events = %d, want 1", len(evs))
	}
	e := evs[0]
	if e.EventName != "model_failed" || e.AttemptIndex != 0 || e.FanOutIndex != nil || e.BranchName != nil ||
		e.InvocationID != res.InvocationID || e.CorrelationID != "corr" || e.EventInvocationID() != res.InvocationID {
		t.Errorf("event identity = %+v", e)
	}
	if diff := cmp.Diff([]string{"a"}, e.Namespace); diff != "" {
		t.Errorf("Namespace (-want +got):\n%s", diff)
	}
	if got := stateJSON(t, e.PreState); got != `{"n":2,"log":[]}` {
		t.Errorf("PreState = %s", got)
	}
	if diff := cmp.Diff(graph.Update{"log": []any{"deg"}}, e.PostState); diff != "" {
		t.Errorf("PostState (-want +got):\n%s", diff)
	}
	ce := e.CaughtException
	if ce.Category != errcat.ProviderUnavailable || ce.Message != "down" || ce.Err != cause {
		t.Errorf("CaughtException = %q %q %v", ce.Category, ce.Message, ce.Err)
	}
	want := []errcat.Link{
		{Message: "calling model"},
		{Category: errcat.ProviderUnavailable, Message: "down"},
		{Message: "socket reset"},
	}
	if diff := cmp.Diff(want, ce.Chain); diff != "" {
		t.Errorf("Chain (-want +got):\n%s", diff)
	}
	// The node events: the observer filtered to completed sees only those.
	var phases []graph.Phase
	for _, ne := range l.nodeEvents() {
		phases = append(phases, ne.Phase)
	}
	if diff := cmp.Diff([]graph.Phase{graph.PhaseCompleted}, phases); diff != "" {
		t.Errorf("node event phases (-want +got):\n%s", diff)
	}
}

func TestFailureIsolationThroughCarrier(t *testing.T) {
	// A failure inside a subgraph reaches the parent node's isolation as
	// a node_exception carrier; Catch classifies it by the cause.
	inner := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", func(context.Context, graph.State) (graph.Update, error) {
		return nil, errcat.New(errcat.ProviderUnavailable, "down")
	}).AddEdge("x", graph.End).SetEntry("x"))
	fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "sub_failed", Degraded: graph.Update{"log": []any{"deg"}},
		Catch: []errcat.Category{errcat.ProviderUnavailable}})
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).
		AddSubgraph("sub", inner, graph.WithMiddleware(fi)).AddEdge("sub", graph.End).SetEntry("sub"))
	res, l, err := invokeObserved(t, g, nil)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if got := stateJSON(t, res.State); got != `{"n":0,"log":["deg"]}` {
		t.Errorf("final = %s", got)
	}
	evs := l.isolationEvents()
	if len(evs) != 1 {
		t.Fatalf("isolation events = %d", len(evs))
	}
	want := []errcat.Link{
		{Category: errcat.NodeException, Message: `node "sub/x": node_exception`, Carrier: true},
		{Category: errcat.ProviderUnavailable, Message: "down"},
	}
	if diff := cmp.Diff(want, evs[0].CaughtException.Chain); diff != "" {
		t.Errorf("Chain (-want +got):\n%s", diff)
	}
	if evs[0].CaughtException.Category != errcat.ProviderUnavailable || evs[0].CaughtException.Message != "down" {
		t.Errorf("derived = %q %q", evs[0].CaughtException.Category, evs[0].CaughtException.Message)
	}
	if diff := cmp.Diff([]string{"sub"}, evs[0].Namespace); diff != "" {
		t.Errorf("Namespace (-want +got):\n%s", diff)
	}
	// A surface check sees only the carrier (§6.3 warns about this).
	if got := errcat.Of(evs[0].CaughtException.Err); got != errcat.NodeException {
		t.Errorf("surface error category = %q, want the node_exception carrier", got)
	}
}

func TestFailureIsolationRetryThreePiece(t *testing.T) {
	body, calls := failing(9, errTransient, nil)
	fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "extraction_failed", Degraded: graph.Update{"log": []any{"degraded"}}})
	g := single(t, body, graph.WithMiddleware(fi, mustRetry(t, graph.RetryConfig{MaxAttempts: 2})))
	res, l, err := invokeObserved(t, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Errorf("calls = %d, want 2", calls.Load())
	}
	if got := stateJSON(t, res.State); got != `{"n":0,"log":["degraded"]}` {
		t.Errorf("final = %s", got)
	}
	want := []string{"started a", "completed a !node_exception", "started a a1", "completed a a1 !node_exception"}
	if diff := cmp.Diff(want, l.keys()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	evs := l.isolationEvents()
	if len(evs) != 1 {
		t.Fatalf("isolation events = %d", len(evs))
	}
	if evs[0].CaughtException.Category != errcat.ProviderUnavailable {
		t.Errorf("category = %q", evs[0].CaughtException.Category)
	}
	t.Run("event lineage reports the final attempt", func(t *testing.T) {
		// Conformance fixture 061 (§6.3 three-piece composition).
		if evs[0].AttemptIndex != 1 {
			t.Errorf("AttemptIndex = %d, want 1", evs[0].AttemptIndex)
		}
	})
}

func TestNewFailureIsolationValidation(t *testing.T) {
	fn := func(context.Context, graph.State) (graph.Update, error) { return nil, nil }
	tests := []struct {
		name string
		cfg  graph.FailureIsolationConfig
	}{
		{"no event name", graph.FailureIsolationConfig{Degraded: graph.Update{}}},
		{"no degraded update", graph.FailureIsolationConfig{EventName: "e"}},
		{"both degraded forms", graph.FailureIsolationConfig{EventName: "e", Degraded: graph.Update{}, DegradedFunc: fn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := graph.NewFailureIsolation(tt.cfg); !errors.Is(err, graph.ErrInvalidOption) {
				t.Errorf("err = %v, want ErrInvalidOption", err)
			}
		})
	}
	// Catch is copied: mutating the caller's slice afterwards has no effect.
	catch := []errcat.Category{errcat.ProviderUnavailable}
	fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "e", Degraded: graph.Update{}, Catch: catch})
	catch[0] = errcat.ProviderAuthentication
	body, _ := failing(9, errTransient, nil)
	if _, err := single(t, body, graph.WithMiddleware(fi)).Invoke(t.Context(), nil); err != nil {
		t.Errorf("Invoke: %v (Catch was not copied)", err)
	}
}
