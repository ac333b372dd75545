package graph_test

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// parParentSchema: q string, ansA string, ansB int, shared string
// (last_write_wins), log list<string> (append), errors list (append).
func parParentSchema(t testing.TB) *graph.Schema {
	return mustSchema(t,
		graph.NewDynamicField("q", graph.TypeString),
		graph.NewDynamicField("ansA", graph.TypeString),
		graph.NewDynamicField("ansB", graph.TypeInt),
		graph.NewDynamicField("shared", graph.TypeString),
		graph.NewDynamicField("log", graph.ListOf(graph.TypeString), graph.WithReducer(graph.Append)),
		graph.NewDynamicField("errors", graph.ListOf(nil), graph.WithReducer(graph.Append)),
	)
}

// branchA: {question, answer}; node x sets answer = "A(" + question + ")",
// failing with err when set.
func branchA(t testing.TB, err error) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(mustSchema(t,
		graph.NewDynamicField("question", graph.TypeString),
		graph.NewDynamicField("answer", graph.TypeString),
	)).AddNode("x", func(_ context.Context, s graph.State) (graph.Update, error) {
		if err != nil {
			return nil, err
		}
		q, _ := s.Get("question")
		return graph.Update{"answer": "A(" + q.(string) + ")"}, nil
	}).AddEdge("x", graph.End).SetEntry("x"))
}

// branchB: {text, length}; node y sets length = len(text).
func branchB(t testing.TB) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(mustSchema(t,
		graph.NewDynamicField("text", graph.TypeString),
		graph.NewDynamicField("length", graph.TypeInt),
	)).AddNode("y", func(_ context.Context, s graph.State) (graph.Update, error) {
		q, _ := s.Get("text")
		return graph.Update{"length": len(q.(string))}, nil
	}).AddEdge("y", graph.End).SetEntry("y"))
}

func parGraph(t testing.TB, cfg graph.ParallelBranches) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(parParentSchema(t)).AddParallelBranches("par", cfg).AddEdge("par", graph.End).SetEntry("par"))
}

// stdBranches: A and B subgraph branches over q, and a call branch C.
func stdBranches(t testing.TB) []graph.Branch {
	return []graph.Branch{
		{Name: "A", Subgraph: branchA(t, nil), Inputs: map[string]string{"question": "q"}, Outputs: map[string]string{"ansA": "answer"}},
		{Name: "B", Subgraph: branchB(t), Inputs: map[string]string{"text": "q"}, Outputs: map[string]string{"ansB": "length"}},
		{Name: "C", Call: set(graph.Update{"log": []any{"c"}})},
	}
}

// branchFailure returns the error of a fail_fast parallel-branches node
// whose only branch fails with cause: through a node of a subgraph
// branch (two carriers) or directly from a call branch (one carrier).
func branchFailure(t *testing.T, cause error, subgraph bool) error {
	t.Helper()
	br := graph.Branch{Name: "only", Call: func(context.Context, graph.State) (graph.Update, error) { return nil, cause }}
	if subgraph {
		br = graph.Branch{Name: "only", Subgraph: branchA(t, cause)}
	}
	_, err := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{br}}).Invoke(t.Context(), nil)
	if err == nil {
		t.Fatal("parallel branches succeeded")
	}
	return err
}

func sortedKeys(l *evLog) []string {
	k := l.keys()
	sort.Strings(k)
	return k
}

func TestParallelBranchesBasic(t *testing.T) {
	g := parGraph(t, graph.ParallelBranches{Branches: stdBranches(t)})
	res, l, err := invokeObserved(t, g, graph.Update{"q": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stateJSON(t, res.State), `{"q":"hi","ansA":"A(hi)","ansB":2,"shared":"","log":["c"],"errors":[]}`; got != want {
		t.Errorf("final = %s, want %s", got, want)
	}
	want := []string{
		"completed par", "completed par/C b=C", "completed par/x b=A", "completed par/y b=B",
		"started par", "started par/C b=C", "started par/x b=A", "started par/y b=B",
	}
	if diff := cmp.Diff(want, sortedKeys(l)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	evs := l.nodeEvents()
	if k := evKey(evs[0]); k != "started par" {
		t.Errorf("first event = %s", k)
	}
	if k := evKey(evs[len(evs)-1]); k != "completed par" {
		t.Errorf("last event = %s", k)
	}
	for _, e := range evs {
		switch e.NodeName {
		case "C": // the synthetic event of a call branch
			if e.BranchName == nil || *e.BranchName != "C" || e.FanOutIndex != nil {
				t.Errorf("%s: branch_name = %v", evKey(e), e.BranchName)
			}
			if e.Phase == graph.PhaseCompleted && stateJSON(t, e.PostState) != `{"q":"hi","ansA":"","ansB":0,"shared":"","log":["c"],"errors":[]}` {
				t.Errorf("call branch post_state = %s", stateJSON(t, e.PostState))
			}
		case "x":
			if got := stateJSON(t, e.PreState); got != `{"question":"hi","answer":""}` {
				t.Errorf("%s: pre_state = %s (projected through Inputs)", evKey(e), got)
			}
		}
		if len(e.ParentStates) != len(e.Namespace)-1 {
			t.Errorf("%s: %d parent states", evKey(e), len(e.ParentStates))
		}
	}
}

func TestParallelBranchesWhen(t *testing.T) {
	when := func(v bool) func(context.Context, graph.State) (bool, error) {
		return func(context.Context, graph.State) (bool, error) { return v, nil }
	}
	errWhen := errors.New("cannot decide")
	tests := []struct {
		name    string
		whens   [3]func(context.Context, graph.State) (bool, error)
		final   string
		events  []string
		count   int
		wantErr error
		panics  bool
	}{
		{"skipped branch has no events and no contribution", [3]func(context.Context, graph.State) (bool, error){nil, when(false), when(true)},
			`{"q":"hi","ansA":"A(hi)","ansB":0,"shared":"","log":["c"],"errors":[]}`,
			[]string{"completed par", "completed par/C b=C", "completed par/x b=A", "started par", "started par/C b=C", "started par/x b=A"}, 2, nil, false},
		{"when reads the parent state", [3]func(context.Context, graph.State) (bool, error){
			func(_ context.Context, s graph.State) (bool, error) { q, _ := s.Get("q"); return q == "other", nil }, nil, when(false)},
			`{"q":"hi","ansA":"","ansB":2,"shared":"","log":[],"errors":[]}`,
			[]string{"completed par", "completed par/y b=B", "started par", "started par/y b=B"}, 1, nil, false},
		{"all skipped is a no-op", [3]func(context.Context, graph.State) (bool, error){when(false), when(false), when(false)},
			`{"q":"hi","ansA":"","ansB":0,"shared":"","log":[],"errors":[]}`,
			[]string{"completed par", "started par"}, 0, nil, false},
		{"when failing fails the node", [3]func(context.Context, graph.State) (bool, error){nil,
			func(context.Context, graph.State) (bool, error) { return false, errWhen }, nil},
			"", []string{"completed par !node_exception", "started par"}, 1, errWhen, false},
		{"when panicking fails the node", [3]func(context.Context, graph.State) (bool, error){nil, nil,
			func(context.Context, graph.State) (bool, error) { panic("when boom") }},
			"", []string{"completed par !node_exception", "started par"}, 2, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brs := stdBranches(t)
			for i := range brs {
				brs[i].When = tt.whens[i]
			}
			res, l, err := invokeObserved(t, parGraph(t, graph.ParallelBranches{Branches: brs}), graph.Update{"q": "hi"})
			if diff := cmp.Diff(tt.events, sortedKeys(l)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, e := range l.nodeEvents() {
				if e.NodeName != "par" {
					continue
				}
				pc := e.ParallelBranchesConfig
				if pc == nil || pc.BranchCount != tt.count || !cmp.Equal(pc.BranchNames, []string{"A", "B", "C"}) {
					t.Errorf("%s: ParallelBranchesConfig = %+v, want all names and count %d", evKey(e), pc, tt.count)
				}
			}
			if tt.wantErr != nil || tt.panics {
				if errcat.Of(err) != errcat.NodeException {
					t.Fatalf("err = %v, want node_exception", err)
				}
				var pe *graph.PanicError
				if tt.panics && !errors.As(err, &pe) {
					t.Errorf("err = %v, want a PanicError cause", err)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want cause %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := stateJSON(t, res.State); got != tt.final {
				t.Errorf("final = %s, want %s", got, tt.final)
			}
		})
	}
}

func TestParallelBranchesDeterministicOrder(t *testing.T) {
	// Earlier branches finish last; start order and fan-in order are
	// still insertion order.
	slowWriter := func(delay time.Duration, v string) graph.NodeFunc {
		return func(context.Context, graph.State) (graph.Update, error) {
			time.Sleep(delay)
			return graph.Update{"shared": v, "log": []any{v}}, nil
		}
	}
	for run := 0; run < 5; run++ {
		g := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "first", Call: slowWriter(15*time.Millisecond, "first")},
			{Name: "second", Call: slowWriter(8*time.Millisecond, "second")},
			{Name: "third", Call: slowWriter(0, "third")},
		}})
		res, l, err := invokeObserved(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		// last_write_wins: the last listed wins; append: branch order.
		if got, want := stateJSON(t, res.State), `{"q":"","ansA":"","ansB":0,"shared":"third","log":["first","second","third"],"errors":[]}`; got != want {
			t.Fatalf("run %d: final = %s, want %s", run, got, want)
		}
		if n := len(l.nodeEvents()); n != 8 {
			t.Fatalf("run %d: %d events, want 8", run, n)
		}
	}
	t.Run("merge via outputs, subgraph branches", func(t *testing.T) {
		sub := func(delay time.Duration) *graph.Graph {
			return mustCompile(t, graph.NewBuilder(mustSchema(t,
				graph.NewDynamicField("question", graph.TypeString),
				graph.NewDynamicField("tags", graph.ListOf(graph.TypeString)),
			)).AddNode("x", func(_ context.Context, s graph.State) (graph.Update, error) {
				time.Sleep(delay)
				q, _ := s.Get("question")
				return graph.Update{"tags": []any{q}}, nil
			}).AddEdge("x", graph.End).SetEntry("x"))
		}
		out := map[string]string{"shared": "question", "log": "tags"}
		g := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "slow", Subgraph: sub(10 * time.Millisecond), Inputs: map[string]string{"question": "ansA"}, Outputs: out},
			{Name: "fast", Subgraph: sub(0), Inputs: map[string]string{"question": "q"}, Outputs: out},
		}})
		res, err := g.Invoke(t.Context(), graph.Update{"q": "from-q", "ansA": "from-ansA"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := stateJSON(t, res.State), `{"q":"from-q","ansA":"from-ansA","ansB":0,"shared":"from-q","log":["from-ansA","from-q"],"errors":[]}`; got != want {
			t.Errorf("final = %s, want %s", got, want)
		}
	})
}

func TestParallelBranchesStartOrder(t *testing.T) {
	// §11.8: branches' started events fire in insertion order. As for
	// fan-out, the start signal fires before the event is queued.
	slow := func(delay time.Duration) graph.NodeFunc {
		return func(context.Context, graph.State) (graph.Update, error) { time.Sleep(delay); return nil, nil }
	}
	var names []string
	var brs []graph.Branch
	for i := range 8 {
		name := string(rune('a' + i))
		names = append(names, name)
		brs = append(brs, graph.Branch{Name: name, Call: slow(time.Duration(8-i) * time.Millisecond)})
	}
	for run := 0; run < 20; run++ {
		_, l, err := invokeObserved(t, parGraph(t, graph.ParallelBranches{Branches: brs}), nil)
		if err != nil {
			t.Fatal(err)
		}
		var starts []string
		for _, e := range l.nodeEvents() {
			if e.Phase == graph.PhaseStarted && e.BranchName != nil {
				starts = append(starts, *e.BranchName)
			}
		}
		if diff := cmp.Diff(names, starts); diff != "" {
			t.Fatalf("run %d: branch start order (-want +got):\n%s", run, diff)
		}
	}
}

func TestParallelBranchesFailFast(t *testing.T) {
	tests := []struct {
		name    string
		failing graph.Branch
		derived errcat.Category
	}{
		{"call branch", graph.Branch{Name: "bad", Call: func(context.Context, graph.State) (graph.Update, error) {
			return nil, errcat.Wrap(errcat.ProviderInvalidRequest, "rejected", errUser)
		}}, errcat.ProviderInvalidRequest},
		{"subgraph branch", graph.Branch{Name: "bad", Subgraph: branchA(t, errcat.Wrap(errcat.ProviderInvalidRequest, "rejected", errUser))},
			errcat.ProviderInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sawCancel atomic.Bool
			blocked := graph.Branch{Name: "slow", Call: func(ctx context.Context, _ graph.State) (graph.Update, error) {
				select {
				case <-ctx.Done():
					sawCancel.Store(true)
					return nil, ctx.Err()
				case <-time.After(10 * time.Second):
					return graph.Update{"shared": "late"}, nil
				}
			}}
			g := mustCompile(t, graph.NewBuilder(parParentSchema(t)).
				AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{
					blocked, tt.failing, {Name: "ok", Call: set(graph.Update{"log": []any{"ok"}})},
				}}).
				AddNode("after", set(graph.Update{"shared": "after"})).
				AddEdge("par", "after").AddEdge("after", graph.End).SetEntry("par"))
			start := time.Now()
			res, l, err := invokeObserved(t, g, graph.Update{"q": "hi", "log": []any{"prior"}})
			if err == nil {
				t.Fatal("Invoke succeeded")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("fail_fast took %s", d)
			}
			if !sawCancel.Load() {
				t.Error("the blocked sibling did not see ctx.Done")
			}
			ne := asNodeError(t, err)
			if ne.Category() != errcat.ParallelBranchesBranchFailed || ne.Node != "par" || ne.BranchName != "bad" || !ne.Carrier() {
				t.Errorf("err = %v (category %s, node %q, branch %q)", err, ne.Category(), ne.Node, ne.BranchName)
			}
			if !errors.Is(err, errUser) || !errors.Is(err, errcat.ParallelBranchesBranchFailed) {
				t.Errorf("err = %v does not carry its cause", err)
			}
			if cat, _ := errcat.Derived(err); cat != tt.derived {
				t.Errorf("derived = %q, want %q", cat, tt.derived)
			}
			if got, want := stateJSON(t, res.State), `{"q":"hi","ansA":"","ansB":0,"shared":"","log":["prior"],"errors":[]}`; got != want {
				t.Errorf("recoverable state = %s, want the entry state %s", got, want)
			}
			if diff := cmp.Diff([]string{"par"}, res.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
			for _, e := range l.nodeEvents() {
				if e.NodeName == "par" && e.Phase == graph.PhaseCompleted {
					if e.ErrorCategory != errcat.ParallelBranchesBranchFailed || e.ParallelBranchesConfig == nil {
						t.Errorf("par completed = %s config %+v", evKey(e), e.ParallelBranchesConfig)
					}
				}
			}
		})
	}
}

func TestParallelBranchesCollect(t *testing.T) {
	g := mustCompile(t, graph.NewBuilder(parParentSchema(t)).
		AddParallelBranches("par", graph.ParallelBranches{ErrorPolicy: graph.Collect, ErrorsField: "errors", Branches: []graph.Branch{
			{Name: "A", Subgraph: branchA(t, errUser), Inputs: map[string]string{"question": "q"}, Outputs: map[string]string{"ansA": "answer"}},
			{Name: "B", Subgraph: branchB(t), Inputs: map[string]string{"text": "q"}, Outputs: map[string]string{"ansB": "length"}},
			{Name: "C", Call: func(context.Context, graph.State) (graph.Update, error) {
				return nil, errcat.New(errcat.ProviderRateLimit, "slow down")
			}},
		}}).
		AddNode("after", set(graph.Update{"shared": "after"})).
		AddEdge("par", "after").AddEdge("after", graph.End).SetEntry("par"))
	res, l, err := invokeObserved(t, g, graph.Update{"q": "hey"})
	if err != nil {
		t.Fatalf("Invoke: %v (collect never fails the node)", err)
	}
	want := `{"q":"hey","ansA":"","ansB":3,"shared":"after","log":[],"errors":[` +
		`{"branch_name":"A","category":"node_exception","message":"graph: node \"par/x\": node_exception: user failure"},` +
		`{"branch_name":"C","category":"node_exception","message":"graph: node \"par/C\": node_exception: provider_rate_limit: slow down"}]}`
	if got := stateJSON(t, res.State); got != want {
		t.Errorf("final = %s\nwant    %s", got, want)
	}
	for _, e := range l.nodeEvents() {
		if e.NodeName == "par" && e.ParallelBranchesConfig.ErrorPolicy != "collect" {
			t.Errorf("%s: config = %+v", evKey(e), e.ParallelBranchesConfig)
		}
	}
}

func TestParallelBranchesBranchMiddleware(t *testing.T) {
	t.Run("retry re-runs a subgraph branch", func(t *testing.T) {
		x, calls := failing(1, errTransient, graph.Update{"answer": "ok"})
		sub := mustCompile(t, graph.NewBuilder(mustSchema(t, graph.NewDynamicField("answer", graph.TypeString))).
			AddNode("x", x).AddEdge("x", graph.End).SetEntry("x"))
		g := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "A", Subgraph: sub, Outputs: map[string]string{"ansA": "answer"},
				Middleware: []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 2})}},
		}})
		res, l, err := invokeObserved(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 2 || field(t, res.State, "ansA") != `"ok"` {
			t.Errorf("calls = %d, ansA = %s", calls.Load(), field(t, res.State, "ansA"))
		}
		want := []string{"started par", "started par/x b=A", "completed par/x b=A !node_exception", "started par/x a1 b=A", "completed par/x a1 b=A", "completed par"}
		if diff := cmp.Diff(want, l.keys()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("retry re-runs a call branch", func(t *testing.T) {
		c, calls := failing(2, errTransient, graph.Update{"log": []any{"c"}})
		g := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "C", Call: c, Middleware: []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 3})}},
		}})
		res, l, err := invokeObserved(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 3 || field(t, res.State, "log") != `["c"]` {
			t.Errorf("calls = %d, log = %s", calls.Load(), field(t, res.State, "log"))
		}
		want := []string{"started par",
			"started par/C b=C", "completed par/C b=C !node_exception",
			"started par/C a1 b=C", "completed par/C a1 b=C !node_exception",
			"started par/C a2 b=C", "completed par/C a2 b=C",
			"completed par"}
		if diff := cmp.Diff(want, l.keys()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("heterogeneous chains; degrade skips uncovered outputs", func(t *testing.T) {
		tl := &traceLog{}
		fi := mustIsolation(t, graph.FailureIsolationConfig{EventName: "A_degraded", Degraded: graph.Update{"log": []any{"degraded"}}})
		g := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "A", Subgraph: branchA(t, errUser), Outputs: map[string]string{"ansA": "answer"}, Middleware: []graph.Middleware{fi}},
			{Name: "B", Subgraph: branchB(t), Inputs: map[string]string{"text": "q"}, Outputs: map[string]string{"ansB": "length"},
				Middleware: []graph.Middleware{tl.mw("b1"), tl.mw("b2")}},
		}})
		res, l, err := invokeObserved(t, g, graph.Update{"q": "four", "ansA": "prior"})
		if err != nil {
			t.Fatal(err)
		}
		// The degraded result is in subgraph field names and projected
		// through Outputs: it covers no output ("log" is not one), so the
		// branch contributes nothing and ansA keeps its prior value.
		if got, want := stateJSON(t, res.State), `{"q":"four","ansA":"prior","ansB":4,"shared":"","log":[],"errors":[]}`; got != want {
			t.Errorf("final = %s, want %s", got, want)
		}
		if diff := cmp.Diff([]string{"b1>", "b2>", "<b2", "<b1"}, tl.get()); diff != "" {
			t.Errorf("branch B chain (-want +got):\n%s", diff)
		}
		evs := l.isolationEvents()
		if len(evs) != 1 {
			t.Fatalf("isolation events = %d", len(evs))
		}
		if e := evs[0]; e.BranchName == nil || *e.BranchName != "A" || e.FanOutIndex != nil || !cmp.Equal(e.Namespace, []string{"par"}) {
			t.Errorf("isolation lineage = %v branch %v fan %v", e.Namespace, e.BranchName, e.FanOutIndex)
		}
	})
}

func TestParallelBranchesConfigOnEvents(t *testing.T) {
	g := mustCompile(t, graph.NewBuilder(parParentSchema(t)).AddNode("before", noop).
		AddParallelBranches("par", graph.ParallelBranches{Branches: stdBranches(t)}).
		AddEdge("before", "par").AddEdge("par", graph.End).SetEntry("before"))
	_, l, err := invokeObserved(t, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := graph.ParallelBranchesConfig{BranchNames: []string{"A", "B", "C"}, BranchCount: 3, ErrorPolicy: "fail_fast", ParentNodeName: "par"}
	n := 0
	for _, e := range l.nodeEvents() {
		if e.FanOutConfig != nil {
			t.Errorf("%s: FanOutConfig set", evKey(e))
		}
		if e.NodeName != "par" {
			if e.ParallelBranchesConfig != nil {
				t.Errorf("%s: ParallelBranchesConfig on a non-parallel-branches event", evKey(e))
			}
			continue
		}
		n++
		if e.ParallelBranchesConfig == nil {
			t.Fatalf("%s: no ParallelBranchesConfig", evKey(e))
		}
		if diff := cmp.Diff(want, *e.ParallelBranchesConfig); diff != "" {
			t.Errorf("%s: config (-want +got):\n%s", evKey(e), diff)
		}
		if e.BranchName != nil {
			t.Errorf("%s: the node's own event carries branch_name", evKey(e))
		}
	}
	if n != 2 {
		t.Errorf("par events = %d, want 2", n)
	}
}

func TestParallelBranchesCompileErrors(t *testing.T) {
	a := branchA(t, nil)
	tests := []struct {
		name  string
		cfg   graph.ParallelBranches
		want  errcat.Category
		field string
	}{
		{"no branches", graph.ParallelBranches{}, errcat.ParallelBranchesNoBranches, ""},
		{"both subgraph and call", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Subgraph: a, Call: noop}}},
			errcat.ParallelBranchesInvalidBranchSpec, ""},
		{"neither subgraph nor call", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x"}}},
			errcat.ParallelBranchesInvalidBranchSpec, ""},
		{"duplicate name", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Call: noop}, {Name: "x", Call: noop}}},
			errcat.ParallelBranchesInvalidBranchSpec, ""},
		{"empty name", graph.ParallelBranches{Branches: []graph.Branch{{Call: noop}}},
			errcat.ParallelBranchesInvalidBranchSpec, ""},
		{"call with inputs", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Call: noop, Inputs: map[string]string{"question": "q"}}}},
			errcat.ParallelBranchesInvalidBranchSpec, ""},
		{"call with outputs", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Call: noop, Outputs: map[string]string{"q": "question"}}}},
			errcat.ParallelBranchesInvalidBranchSpec, ""},
		{"inputs: undeclared subgraph field", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Subgraph: a, Inputs: map[string]string{"nope": "q"}}}},
			errcat.MappingReferencesUndeclaredField, "nope"},
		{"inputs: undeclared parent field", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Subgraph: a, Inputs: map[string]string{"question": "nope"}}}},
			errcat.MappingReferencesUndeclaredField, "nope"},
		{"outputs: undeclared parent field", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Subgraph: a, Outputs: map[string]string{"nope": "answer"}}}},
			errcat.MappingReferencesUndeclaredField, "nope"},
		{"outputs: undeclared subgraph field", graph.ParallelBranches{Branches: []graph.Branch{{Name: "x", Subgraph: a, Outputs: map[string]string{"ansA": "nope"}}}},
			errcat.MappingReferencesUndeclaredField, "nope"},
		{"errors field undeclared", graph.ParallelBranches{ErrorsField: "nope", Branches: []graph.Branch{{Name: "x", Call: noop}}},
			errcat.MappingReferencesUndeclaredField, "nope"},
		{"errors field not a list", graph.ParallelBranches{ErrorsField: "q", Branches: []graph.Branch{{Name: "x", Call: noop}}},
			errcat.MappingReferencesUndeclaredField, "q"},
		{"unknown error policy", graph.ParallelBranches{ErrorPolicy: "ignore", Branches: []graph.Branch{{Name: "x", Call: noop}}},
			errcat.InvalidGraph, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := graph.NewBuilder(parParentSchema(t)).AddParallelBranches("par", tt.cfg).AddEdge("par", graph.End).SetEntry("par").Compile()
			checkCompileErr(t, g, err, tt.want, "par", tt.field)
		})
	}
	t.Run("round-trip warning", func(t *testing.T) {
		sub := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("x", noop).AddEdge("x", graph.End).SetEntry("x"))
		g := parGraph(t, graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "append", Subgraph: sub, Inputs: map[string]string{"log": "log"}, Outputs: map[string]string{"log": "log"}},
			{Name: "lww", Subgraph: a, Inputs: map[string]string{"question": "q"}, Outputs: map[string]string{"q": "question"}},
		}})
		var got []string
		for _, w := range g.Warnings() {
			if w.Category != errcat.ProjectionReducerRoundTrip || w.Node != "par" {
				t.Errorf("warning = %+v", w)
			}
			got = append(got, w.Field)
		}
		if diff := cmp.Diff([]string{"log"}, got); diff != "" {
			t.Errorf("warned fields (-want +got):\n%s", diff)
		}
	})
}

func TestParallelBranchesComposition(t *testing.T) {
	t.Run("fan-out inside a branch", func(t *testing.T) {
		mid := mustCompile(t, graph.NewBuilder(mustSchema(t,
			graph.NewDynamicField("vals", graph.ListOf(nil), graph.WithReducer(graph.Append)),
		)).AddFanOut("fan", graph.FanOut{Subgraph: fanLeaf(t, set(graph.Update{"result": "r"})), Count: graph.Fixed(2),
			CollectField: "result", TargetField: "vals"}).AddEdge("fan", graph.End).SetEntry("fan"))
		g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).
			AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{
				{Name: "F", Subgraph: mid, Outputs: map[string]string{"results": "vals"}},
			}}).AddEdge("par", graph.End).SetEntry("par"))
		res, l, err := invokeObserved(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := field(t, res.State, "results"); got != `["r","r"]` {
			t.Errorf("results = %s", got)
		}
		want := []string{
			"completed par", "completed par/fan b=F", "completed par/fan/w f=_,0 b=F,_", "completed par/fan/w f=_,1 b=F,_",
			"started par", "started par/fan b=F", "started par/fan/w f=_,0 b=F,_", "started par/fan/w f=_,1 b=F,_",
		}
		if diff := cmp.Diff(want, sortedKeys(l)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		for _, e := range l.nodeEvents() {
			if e.NodeName == "w" && (e.BranchName == nil || *e.BranchName != "F" || e.FanOutIndex == nil) {
				t.Errorf("%s: scalars branch=%v fan=%v, want both", evKey(e), e.BranchName, e.FanOutIndex)
			}
			if (e.NodeName == "fan") != (e.FanOutConfig != nil) {
				t.Errorf("%s: FanOutConfig = %+v", evKey(e), e.FanOutConfig)
			}
		}
	})
	t.Run("branches inside a fan-out instance", func(t *testing.T) {
		inner := mustCompile(t, graph.NewBuilder(mustSchema(t, graph.NewDynamicField("answer", graph.TypeString))).
			AddNode("x", set(graph.Update{"answer": "s"})).AddEdge("x", graph.End).SetEntry("x"))
		mid := mustCompile(t, graph.NewBuilder(fanLeafSchema(t)).
			AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{
				{Name: "s", Subgraph: inner, Outputs: map[string]string{"result": "answer"}},
				{Name: "c", Call: set(graph.Update{"extra": "c"})},
			}}).AddEdge("par", graph.End).SetEntry("par"))
		g := fanGraph(t, graph.FanOut{Subgraph: mid, Count: graph.Fixed(2), CollectField: "result", TargetField: "results",
			ExtraOutputs: map[string]string{"extras": "extra"}})
		res, l, err := invokeObserved(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := field(t, res.State, "results") + field(t, res.State, "extras"); got != `["s","s"]["c","c"]` {
			t.Errorf("results+extras = %s", got)
		}
		want := []string{
			"completed fan",
			"completed fan/par f=0", "completed fan/par f=1",
			"completed fan/par/c f=0,_ b=_,c", "completed fan/par/c f=1,_ b=_,c",
			"completed fan/par/x f=0,_ b=_,s", "completed fan/par/x f=1,_ b=_,s",
			"started fan",
			"started fan/par f=0", "started fan/par f=1",
			"started fan/par/c f=0,_ b=_,c", "started fan/par/c f=1,_ b=_,c",
			"started fan/par/x f=0,_ b=_,s", "started fan/par/x f=1,_ b=_,s",
		}
		if diff := cmp.Diff(want, sortedKeys(l)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		for _, e := range l.nodeEvents() {
			if e.NodeName == "par" && (e.ParallelBranchesConfig == nil || e.FanOutIndex == nil) {
				t.Errorf("%s: config %+v, fan %v", evKey(e), e.ParallelBranchesConfig, e.FanOutIndex)
			}
		}
	})
}

// TestCallableBranchHead: an inline callable branch runs for the graph's
// callable head before the next branch starts, unless it returns first.
// Under fail_fast, a callable that fails within its head keeps the later
// branches from starting, however long it takes; with a zero head the
// next branch starts at once; a callable that waits longer than its
// head lets the next start (no deadlock between branches that wait on
// each other).
func TestCallableBranchHead(t *testing.T) {
	for _, tc := range []struct {
		head        time.Duration
		nextStarted bool
	}{{time.Minute, false}, {0, true}} {
		var ran atomic.Bool
		nextRan := make(chan struct{})
		// bad fails once next has run, or after 100 ms (a slow or
		// descheduled start): within a long head, next never runs.
		slowFail := graph.Branch{Name: "bad", Call: func(context.Context, graph.State) (graph.Update, error) {
			select {
			case <-nextRan:
			case <-time.After(100 * time.Millisecond):
			}
			return nil, errUser
		}}
		next := graph.Branch{Name: "next", Call: func(context.Context, graph.State) (graph.Update, error) {
			ran.Store(true)
			close(nextRan)
			return nil, nil
		}}
		g := mustCompile(t, graph.NewBuilder(parParentSchema(t)).
			AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{slowFail, next}}).
			AddEdge("par", graph.End).SetEntry("par"), graph.WithCallableBranchHead(tc.head))
		if _, err := g.Invoke(t.Context(), nil); err == nil {
			t.Fatal("Invoke succeeded")
		}
		if ran.Load() != tc.nextStarted {
			t.Errorf("head %s: the next branch ran = %t, want %t", tc.head, ran.Load(), tc.nextStarted)
		}
	}
	// Two callables waiting on each other: the second starts once the
	// first's head elapses.
	ready := make(chan struct{})
	g := mustCompile(t, graph.NewBuilder(parParentSchema(t)).
		AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "waits", Call: func(ctx context.Context, _ graph.State) (graph.Update, error) {
				select {
				case <-ready:
					return graph.Update{"shared": "met"}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}},
			{Name: "frees", Call: func(context.Context, graph.State) (graph.Update, error) { close(ready); return nil, nil }},
		}}).AddEdge("par", graph.End).SetEntry("par"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := g.Invoke(ctx, nil); err != nil {
		t.Fatalf("branches waiting on each other: %v", err)
	}
}
