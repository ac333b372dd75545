package graph_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/syncbuf"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// subgraphPipeline: a → sub(x) → b → END over logSchema.
func subgraphPipeline(t *testing.T) (outer, inner *graph.Graph) {
	inner = mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", logNode("x")).AddEdge("x", graph.End).SetEntry("x"))
	outer = mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddSubgraph("sub", inner).
		AddNode("b", logNode("b")).AddEdge("a", "sub").AddEdge("sub", "b").AddEdge("b", graph.End).SetEntry("a"))
	return outer, inner
}

func mustObserve(t *testing.T, g *graph.Graph, obs graph.Observer, opts ...graph.ObserverOption) func() {
	t.Helper()
	remove, err := g.AddObserver(obs, opts...)
	if err != nil {
		t.Fatalf("AddObserver: %v", err)
	}
	return remove
}

func TestObserverEventShapes(t *testing.T) {
	g, _ := subgraphPipeline(t)
	r := newRecorder("obs", nil)
	defer mustObserve(t, g, r.observe)()
	res, err := g.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, g)
	const (
		s0 = `{"n":0,"log":[]}`
		s1 = `{"n":1,"log":["a"]}`
		i1 = `{"n":1,"log":["x"]}`
		s2 = `{"n":1,"log":["a","x"]}`
		s3 = `{"n":2,"log":["a","x","b"]}`
	)
	id := res.InvocationID
	none := []string{}
	want := []evRec{
		{Observer: "obs", Phase: graph.PhaseStarted, Node: "a", Namespace: []string{"a"}, Step: 0, Pre: s0, ParentStates: none, InvID: id},
		{Observer: "obs", Phase: graph.PhaseCompleted, Node: "a", Namespace: []string{"a"}, Step: 0, Pre: s0, Post: s1, ParentStates: none, InvID: id},
		{Observer: "obs", Phase: graph.PhaseStarted, Node: "x", Namespace: []string{"sub", "x"}, Step: 1, Pre: s0, ParentStates: []string{s1}, ChainLen: 1, InvID: id},
		{Observer: "obs", Phase: graph.PhaseCompleted, Node: "x", Namespace: []string{"sub", "x"}, Step: 1, Pre: s0, Post: i1, ParentStates: []string{s1}, ChainLen: 1, InvID: id},
		{Observer: "obs", Phase: graph.PhaseStarted, Node: "b", Namespace: []string{"b"}, Step: 2, Pre: s2, ParentStates: none, InvID: id},
		{Observer: "obs", Phase: graph.PhaseCompleted, Node: "b", Namespace: []string{"b"}, Step: 2, Pre: s2, Post: s3, ParentStates: none, InvID: id},
	}
	got := r.events()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if len(e.ParentStates) != len(e.Namespace)-1 {
			t.Errorf("event %s/%s: len(parent_states)=%d, len(namespace)=%d", e.Node, e.Phase, len(e.ParentStates), len(e.Namespace))
		}
	}
}

func TestObserverFailedCompletedEvents(t *testing.T) {
	tests := []struct {
		name  string
		b     graph.NodeFunc
		route graph.RouteFunc
		want  errcat.Category
		user  bool // the event's Err wraps errUser
	}{
		{name: "node exception", b: func(context.Context, graph.State) (graph.Update, error) { return nil, errUser },
			want: errcat.NodeException, user: true},
		{name: "reducer error", b: set(graph.Update{"log": 1}), want: errcat.ReducerError},
		{name: "state validation error", b: set(graph.Update{"n": "x"}), want: errcat.StateValidationError},
		{name: "routing error lands on the preceding node", b: logNode("b"), route: routeTo("ghost"), want: errcat.RoutingError},
		{name: "edge exception lands on the preceding node", b: logNode("b"),
			route: func(context.Context, graph.State) (string, error) { return "", errUser }, want: errcat.EdgeException, user: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bld := graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", tt.b).AddNode("c", logNode("c")).
				AddEdge("a", "b").AddEdge("c", graph.End).SetEntry("a")
			if tt.route != nil {
				bld.AddConditionalEdge("b", tt.route)
			} else {
				bld.AddEdge("b", "c")
			}
			g := mustCompile(t, bld)
			var mu sync.Mutex
			var evs []*graph.NodeEvent
			_, err := g.Invoke(t.Context(), nil, graph.WithObserver(func(_ context.Context, ev graph.Event) error {
				mu.Lock()
				evs = append(evs, ev.(*graph.NodeEvent))
				mu.Unlock()
				return nil
			}))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
			drain(t, g)
			var got []string
			for _, e := range evs {
				got = append(got, e.NodeName+"/"+string(e.Phase))
			}
			if diff := cmp.Diff([]string{"a/started", "a/completed", "b/started", "b/completed"}, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			last := evs[3]
			if last.ErrorCategory != tt.want || !errors.Is(last.Err, tt.want) {
				t.Errorf("completed event error = %v (%q), want %s", last.Err, last.ErrorCategory, tt.want)
			}
			if errors.Is(last.Err, errUser) != tt.user {
				t.Errorf("errors.Is(event.Err, errUser) = %v, want %v", !tt.user, tt.user)
			}
			if !last.PostState.IsZero() {
				t.Errorf("failed completed event has a post_state")
			}
			if got := stateJSON(t, last.PreState); got != `{"n":1,"log":["a"]}` {
				t.Errorf("failed completed event pre_state = %s", got)
			}
			for _, e := range evs[:3] {
				if e.Err != nil || e.ErrorCategory != "" {
					t.Errorf("event %s/%s carries an error", e.NodeName, e.Phase)
				}
			}
		})
	}
}

func TestObserverDeliveryOrder(t *testing.T) {
	outer, inner := subgraphPipeline(t)
	var log []evRec
	var inFlight, overlaps atomic.Int32
	serial := func(r *recorder) graph.Observer {
		return func(ctx context.Context, ev graph.Event) error {
			if inFlight.Add(1) != 1 {
				overlaps.Add(1)
			}
			defer inFlight.Add(-1)
			return r.observe(ctx, ev)
		}
	}
	defer mustObserve(t, outer, serial(newRecorder("outer1", &log)))()
	defer mustObserve(t, outer, serial(newRecorder("outer2", &log)))()
	defer mustObserve(t, inner, serial(newRecorder("inner1", &log)))()
	_, err := outer.Invoke(t.Context(), nil,
		graph.WithObserver(serial(newRecorder("inv1", &log))), graph.WithObserver(serial(newRecorder("inv2", &log))))
	if err != nil {
		t.Fatal(err)
	}
	drain(t, outer)
	var got []string
	for _, e := range log {
		got = append(got, e.Node+"/"+string(e.Phase)+" "+e.Observer)
	}
	var want []string
	for _, ev := range []struct{ node, obs string }{
		{"a", "outer"}, {"x", "inner"}, {"b", "outer"},
	} {
		for _, ph := range []string{"started", "completed"} {
			names := []string{"outer1", "outer2"}
			if ev.obs == "inner" {
				names = append(names, "inner1")
			}
			for _, n := range append(names, "inv1", "inv2") {
				want = append(want, ev.node+"/"+ph+" "+n)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivery order (-want +got):\n%s", diff)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d deliveries overlapped", n)
	}

	// Invoked directly, the subgraph's observers fire and the parent's do not.
	log = nil
	if _, err := inner.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	drain(t, inner)
	got = nil
	for _, e := range log {
		got = append(got, e.Node+"/"+string(e.Phase)+" "+e.Observer+" "+strings.Join(e.Namespace, "/"))
	}
	if diff := cmp.Diff([]string{"x/started inner1 x", "x/completed inner1 x"}, got); diff != "" {
		t.Errorf("direct subgraph run (-want +got):\n%s", diff)
	}
}

func TestObserverPhases(t *testing.T) {
	tests := []struct {
		name   string
		phases []graph.Phase
		want   []graph.Phase
	}{
		{"completed only", []graph.Phase{graph.PhaseCompleted}, []graph.Phase{graph.PhaseCompleted, graph.PhaseCompleted}},
		{"started only", []graph.Phase{graph.PhaseStarted}, []graph.Phase{graph.PhaseStarted, graph.PhaseStarted}},
		{"both", []graph.Phase{graph.PhaseStarted, graph.PhaseCompleted},
			[]graph.Phase{graph.PhaseStarted, graph.PhaseCompleted, graph.PhaseStarted, graph.PhaseCompleted}},
	}
	for _, tt := range tests {
		for _, mode := range []string{"graph-attached", "invocation-scoped"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", logNode("b")).
					AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
				r := newRecorder("r", nil)
				var opts []graph.InvokeOption
				if mode == "graph-attached" {
					defer mustObserve(t, g, r.observe, graph.Phases(tt.phases...))()
				} else {
					opts = append(opts, graph.WithObserver(r.observe, graph.Phases(tt.phases...)))
				}
				if _, err := g.Invoke(t.Context(), nil, opts...); err != nil {
					t.Fatal(err)
				}
				drain(t, g)
				var got []graph.Phase
				for _, e := range r.events() {
					got = append(got, e.Phase)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("phases (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestObserverOptionErrors(t *testing.T) {
	g := oneNodeGraph(t, noop)
	obs := func(context.Context, graph.Event) error { return nil }
	tests := []struct {
		name string
		obs  graph.Observer
		opts []graph.ObserverOption
	}{
		{"empty phase set", obs, []graph.ObserverOption{graph.Phases()}},
		{"unknown phase", obs, []graph.ObserverOption{graph.Phases("finished")}},
		{"nil observer", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remove, err := g.AddObserver(tt.obs, tt.opts...)
			if !errors.Is(err, graph.ErrInvalidOption) || remove != nil {
				t.Errorf("AddObserver = %v, %v; want ErrInvalidOption", remove != nil, err)
			}
			res, err := g.Invoke(t.Context(), nil, graph.WithObserver(tt.obs, tt.opts...))
			if !errors.Is(err, graph.ErrInvalidOption) || res != nil {
				t.Errorf("Invoke(WithObserver) = %v, %v; want nil, ErrInvalidOption", res, err)
			}
		})
	}
	for _, d := range []time.Duration{-1, -time.Second} {
		if _, err := g.Drain(t.Context(), graph.DrainTimeout(d)); !errors.Is(err, graph.ErrInvalidOption) {
			t.Errorf("Drain(DrainTimeout(%v)) err = %v, want ErrInvalidOption", d, err)
		}
		if _, err := g.DrainEventsFor(t.Context(), "x", graph.DrainTimeout(d)); !errors.Is(err, graph.ErrInvalidOption) {
			t.Errorf("DrainEventsFor(DrainTimeout(%v)) err = %v, want ErrInvalidOption", d, err)
		}
	}
}

func TestObserverIsolation(t *testing.T) {
	var logs syncbuf.Buffer
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", logNode("b")).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
		graph.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	before := newRecorder("before", nil)
	after := newRecorder("after", nil)
	scoped := newRecorder("scoped", nil)
	defer mustObserve(t, g, before.observe)()
	defer mustObserve(t, g, func(context.Context, graph.Event) error { panic("observer boom") })()
	defer mustObserve(t, g, func(context.Context, graph.Event) error { return errors.New("observer failed") })()
	defer mustObserve(t, g, after.observe)()
	res, err := g.Invoke(t.Context(), nil, graph.WithObserver(func(context.Context, graph.Event) error { panic("scoped boom") }),
		graph.WithObserver(scoped.observe))
	if err != nil || res.Status != graph.Completed {
		t.Fatalf("Invoke = %v, %v", res, err)
	}
	drain(t, g)
	for _, r := range []*recorder{before, after, scoped} {
		if n := len(r.events()); n != 4 {
			t.Errorf("observer %s received %d events, want 4", r.name, n)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "msg=\"graph: observer failed\""); n != 12 {
		t.Errorf("logged %d observer failures, want 12 (3 failing observers x 4 events)", n)
	}
	if !strings.Contains(out, "observer boom") || !strings.Contains(out, "scoped boom") {
		t.Errorf("panics not reported in the log:\n%s", out)
	}
}

func TestObserverRemoval(t *testing.T) {
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", logNode("b")).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
	var remove func()
	var self atomic.Int32
	remove = mustObserve(t, g, func(context.Context, graph.Event) error {
		self.Add(1)
		remove() // takes effect from the next invocation
		return nil
	})
	other := newRecorder("other", nil)
	removeOther := mustObserve(t, g, other.observe)
	var late atomic.Int32
	addedMidRun := false
	var g2 *graph.Graph
	var removeLate func()
	g2node := func(context.Context, graph.State) (graph.Update, error) {
		if !addedMidRun {
			addedMidRun = true
			removeLate = mustObserve(t, g2, func(context.Context, graph.Event) error { late.Add(1); return nil })
		}
		return nil, nil
	}
	g2 = mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", g2node).AddEdge("a", graph.End).SetEntry("a"))

	for range 2 {
		if _, err := g.Invoke(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		drain(t, g)
	}
	if n := self.Load(); n != 4 {
		t.Errorf("self-removing observer received %d events, want the 4 of the invocation it was removed in", n)
	}
	if n := len(other.events()); n != 8 {
		t.Errorf("remaining observer received %d events, want 8", n)
	}
	remove() // idempotent
	removeOther()
	removeOther()
	if _, err := g.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	drain(t, g)
	if n := len(other.events()); n != 8 {
		t.Errorf("removed observer received %d events after removal", n-8)
	}

	// An observer added during a run starts with the next invocation.
	for range 2 {
		if _, err := g2.Invoke(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		drain(t, g2)
	}
	removeLate()
	if n := late.Load(); n != 2 {
		t.Errorf("observer added mid-run received %d events, want the 2 of the next invocation", n)
	}
}

// blockingObserver records events but blocks on each one until release is
// closed or its context is cancelled.
type blockingObserver struct {
	release   chan struct{}
	mu        sync.Mutex
	got       map[string]int // invocation id → events delivered
	cancelled int
}

func newBlockingObserver() *blockingObserver {
	return &blockingObserver{release: make(chan struct{}), got: map[string]int{}}
}

func (b *blockingObserver) observe(ctx context.Context, ev graph.Event) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		b.mu.Lock()
		b.cancelled++
		b.mu.Unlock()
		return ctx.Err()
	}
	b.mu.Lock()
	b.got[ev.EventInvocationID()]++
	b.mu.Unlock()
	return nil
}

func (b *blockingObserver) count(id string) (delivered, cancelled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got[id], b.cancelled
}

func twoNodeGraph(t *testing.T) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", logNode("b")).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
}

func TestInvokeDoesNotWaitForObservers(t *testing.T) {
	g := twoNodeGraph(t)
	obs := newBlockingObserver()
	defer mustObserve(t, g, obs.observe)()
	res, err := g.Invoke(t.Context(), nil) // would deadlock if Invoke awaited the observer
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := obs.count(res.InvocationID); n != 0 {
		t.Errorf("observer finished %d events before release", n)
	}
	close(obs.release)
	drain(t, g)
	if n, c := obs.count(res.InvocationID); n != 4 || c != 0 {
		t.Errorf("delivered %d (cancelled %d), want 4 (0)", n, c)
	}
}

func TestDrainWaitsForAll(t *testing.T) {
	g, inner := subgraphPipeline(t)
	obs := newBlockingObserver()
	defer mustObserve(t, g, obs.observe)()
	innerObs := newBlockingObserver()
	close(innerObs.release)
	defer mustObserve(t, inner, innerObs.observe)()
	var ids []string
	for range 5 {
		res, err := g.Invoke(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.InvocationID)
	}
	go close(obs.release)
	sum, err := g.Drain(t.Context())
	if err != nil || sum != (graph.DrainSummary{}) {
		t.Fatalf("Drain = %v, %v; want a zero summary", sum, err)
	}
	for _, id := range ids {
		if n, _ := obs.count(id); n != 6 {
			t.Errorf("invocation %s: %d events delivered by the time Drain returned, want 6", id, n)
		}
		if n, _ := innerObs.count(id); n != 2 {
			t.Errorf("invocation %s: subgraph observer got %d events, want 2 (covered by the parent's drain)", id, n)
		}
	}
	// Nothing pending: a drain with a timeout returns a zero summary too.
	sum, err = g.Drain(t.Context(), graph.DrainTimeout(time.Minute))
	if err != nil || sum != (graph.DrainSummary{}) {
		t.Errorf("Drain with nothing pending = %v, %v", sum, err)
	}
	if got := sum.String(); got != "undelivered=0 timeout_reached=false" {
		t.Errorf("DrainSummary.String() = %q", got)
	}
}

func TestDrainTimeout(t *testing.T) {
	g := twoNodeGraph(t)
	obs := newBlockingObserver()
	defer mustObserve(t, g, obs.observe)()
	first, err := g.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 50 * time.Millisecond
	start := time.Now()
	sum, err := g.Drain(t.Context(), graph.DrainTimeout(timeout))
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if elapsed > timeout+2*time.Second {
		t.Errorf("Drain with a %v timeout took %v", timeout, elapsed)
	}
	if want := (graph.DrainSummary{Undelivered: 4, TimeoutReached: true}); sum != want {
		t.Errorf("summary = %v, want %v", sum, want)
	}

	// The graph stays usable: the next invocation is delivered in full and
	// none of the abandoned events leaks into it.
	close(obs.release)
	second, err := g.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, g)
	if n, c := obs.count(first.InvocationID); n != 0 || c != 1 {
		t.Errorf("abandoned invocation: delivered %d, cancelled %d; want 0 and 1 (only the in-flight event)", n, c)
	}
	if n, _ := obs.count(second.InvocationID); n != 4 {
		t.Errorf("next invocation: delivered %d, want 4", n)
	}
}

func TestDrainContextEnds(t *testing.T) {
	g := twoNodeGraph(t)
	obs := newBlockingObserver()
	defer mustObserve(t, g, obs.observe)()
	res, err := g.Invoke(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sum, err := g.Drain(ctx)
	if !errors.Is(err, context.Canceled) || sum.Undelivered != 4 || sum.TimeoutReached {
		t.Errorf("Drain(cancelled ctx) = %v, %v", sum, err)
	}
	close(obs.release)
	drain(t, g)
	if n, c := obs.count(res.InvocationID); n != 4 || c != 0 {
		t.Errorf("delivered %d, cancelled %d; a drain whose context ends must not cancel delivery", n, c)
	}
}

func TestDrainEventsFor(t *testing.T) {
	t.Run("from inside a node", func(t *testing.T) {
		var g *graph.Graph
		r := newRecorder("r", nil)
		var inNode []evRec
		var sum graph.DrainSummary
		var derr error
		b := func(ctx context.Context, _ graph.State) (graph.Update, error) {
			sum, derr = g.DrainEventsFor(ctx, graph.InvocationID(ctx))
			inNode = r.events()
			return nil, nil
		}
		g = mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", logNode("a")).AddNode("b", b).
			AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
		if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(r.observe)); err != nil {
			t.Fatal(err)
		}
		drain(t, g)
		if derr != nil || sum != (graph.DrainSummary{}) {
			t.Errorf("DrainEventsFor = %v, %v", sum, derr)
		}
		var got []string
		for _, e := range inNode {
			got = append(got, e.Node+"/"+string(e.Phase))
		}
		if diff := cmp.Diff([]string{"a/started", "a/completed", "b/started"}, got); diff != "" {
			t.Errorf("events delivered when DrainEventsFor returned (-want +got):\n%s", diff)
		}
		if n := len(r.events()); n != 4 {
			t.Errorf("%d events in total, want 4", n)
		}
	})
	t.Run("from inside a node without observers", func(t *testing.T) {
		var g *graph.Graph
		var sum graph.DrainSummary
		var derr error
		g = oneNodeGraph(t, func(ctx context.Context, _ graph.State) (graph.Update, error) {
			sum, derr = g.DrainEventsFor(ctx, graph.InvocationID(ctx), graph.DrainTimeout(time.Minute))
			return nil, nil
		})
		if _, err := g.Invoke(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if derr != nil || sum != (graph.DrainSummary{}) {
			t.Errorf("DrainEventsFor = %v, %v", sum, derr)
		}
	})
	t.Run("invocations sharing an id", func(t *testing.T) {
		// Two invocations with the same id, each with its own blocked
		// observer: when the first one's deliveries end, a drain for the
		// id still finds the second's, and Drain waits for both.
		g := twoNodeGraph(t)
		first, second := newBlockingObserver(), newBlockingObserver()
		for _, o := range []*blockingObserver{first, second} {
			if _, err := g.Invoke(t.Context(), nil, graph.WithInvocationID("same"), graph.WithObserver(o.observe)); err != nil {
				t.Fatal(err)
			}
		}
		if s, err := g.Drain(t.Context(), graph.DrainTimeout(20*time.Millisecond)); err != nil || s.Undelivered != 8 {
			t.Errorf("Drain with both blocked = %+v, %v; want 8 undelivered", s, err)
		}
	})
	t.Run("an id shared by live invocations", func(t *testing.T) {
		g := twoNodeGraph(t)
		first, second := newBlockingObserver(), newBlockingObserver()
		for _, o := range []*blockingObserver{first, second} {
			if _, err := g.Invoke(t.Context(), nil, graph.WithInvocationID("same"), graph.WithObserver(o.observe)); err != nil {
				t.Fatal(err)
			}
		}
		close(first.release)
		deadline := time.Now().Add(10 * time.Second)
		for n, _ := first.count("same"); n < 4 && time.Now().Before(deadline); n, _ = first.count("same") {
			time.Sleep(time.Millisecond)
		}
		// The first worker exits once its events are delivered (the
		// drain may see it until then); the second still holds the id.
		for {
			s, err := g.DrainEventsFor(t.Context(), "same", graph.DrainTimeout(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if s.Undelivered == 4 && s.TimeoutReached {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("DrainEventsFor with the second invocation blocked = %+v; want 4 undelivered", s)
			}
		}
		close(second.release)
		if s, err := g.DrainEventsFor(t.Context(), "same"); err != nil || s != (graph.DrainSummary{}) {
			t.Errorf("DrainEventsFor once delivered = %+v, %v", s, err)
		}
		drain(t, g)
		if n, _ := second.count("same"); n != 4 {
			t.Errorf("second observer got %d events, want 4", n)
		}
	})
	t.Run("timeout never cancels delivery", func(t *testing.T) {
		g := twoNodeGraph(t)
		obs := newBlockingObserver()
		defer mustObserve(t, g, obs.observe)()
		res, err := g.Invoke(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		const timeout = 30 * time.Millisecond
		start := time.Now()
		sum, err := g.DrainEventsFor(t.Context(), res.InvocationID, graph.DrainTimeout(timeout))
		if elapsed := time.Since(start); elapsed > timeout+2*time.Second {
			t.Errorf("DrainEventsFor with a %v timeout took %v", timeout, elapsed)
		}
		if want := (graph.DrainSummary{Undelivered: 4, TimeoutReached: true}); err != nil || sum != want {
			t.Errorf("summary = %v, %v; want %v", sum, err, want)
		}
		close(obs.release)
		drain(t, g)
		if n, c := obs.count(res.InvocationID); n != 4 || c != 0 {
			t.Errorf("delivered %d, cancelled %d; want 4 and 0", n, c)
		}
	})
	t.Run("scoped to one invocation", func(t *testing.T) {
		g := twoNodeGraph(t)
		blocked := newBlockingObserver()
		fast := newRecorder("fast", nil)
		slow, err := g.Invoke(t.Context(), nil, graph.WithObserver(blocked.observe))
		if err != nil {
			t.Fatal(err)
		}
		quick, err := g.Invoke(t.Context(), nil, graph.WithObserver(fast.observe))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := g.DrainEventsFor(t.Context(), quick.InvocationID)
		if err != nil || sum != (graph.DrainSummary{}) {
			t.Errorf("DrainEventsFor(other invocation) = %v, %v", sum, err)
		}
		if n := len(fast.events()); n != 4 {
			t.Errorf("quick invocation delivered %d events, want 4", n)
		}
		if n, _ := blocked.count(slow.InvocationID); n != 0 {
			t.Errorf("blocked invocation delivered %d events", n)
		}
		close(blocked.release)
		drain(t, g)
	})
	t.Run("unknown or finished invocation returns a zero summary", func(t *testing.T) {
		g := twoNodeGraph(t)
		r := newRecorder("r", nil)
		res, err := g.Invoke(t.Context(), nil, graph.WithObserver(r.observe))
		if err != nil {
			t.Fatal(err)
		}
		drain(t, g)
		for _, id := range []string{"no-such-invocation", res.InvocationID, ""} {
			sum, err := g.DrainEventsFor(t.Context(), id)
			if err != nil || sum != (graph.DrainSummary{}) {
				t.Errorf("DrainEventsFor(%q) = %v, %v", id, sum, err)
			}
		}
	})
}
