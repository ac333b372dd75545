package graph_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// elemAppend appends each update value as one element: it shows exactly
// which values a field receives, in which order, whatever their shape.
var elemAppend = graph.CustomReducer("elem_append", func(prior, u any) (any, error) {
	p, _ := prior.([]any)
	return append(p[:len(p):len(p)], u), nil
}, false)

// fanParentSchema: items list<int> (last_write_wins), k int, tag string,
// results / errors list (append), extras list (elemAppend), count int.
func fanParentSchema(t testing.TB) *graph.Schema {
	return mustSchema(t,
		graph.NewDynamicField("items", graph.ListOf(graph.TypeInt)),
		graph.NewDynamicField("k", graph.TypeInt),
		graph.NewDynamicField("tag", graph.TypeString),
		graph.NewDynamicField("results", graph.ListOf(nil), graph.WithReducer(graph.Append)),
		graph.NewDynamicField("extras", graph.ListOf(nil), graph.WithReducer(elemAppend)),
		graph.NewDynamicField("errors", graph.ListOf(nil), graph.WithReducer(graph.Append)),
		graph.NewDynamicField("count", graph.TypeInt),
	)
}

// fanLeafSchema: item int, tag string (default "dflt"), result any, extra any.
func fanLeafSchema(t testing.TB) *graph.Schema {
	return mustSchema(t,
		graph.NewDynamicField("item", graph.TypeInt),
		graph.NewDynamicField("tag", graph.TypeString, graph.Default("dflt")),
		graph.NewDynamicField("result", graph.TypeAny),
		graph.NewDynamicField("extra", graph.TypeAny),
	)
}

// fanLeaf compiles a one-node ("w") subgraph over fanLeafSchema.
func fanLeaf(t testing.TB, fn graph.NodeFunc) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(fanLeafSchema(t)).AddNode("w", fn).AddEdge("w", graph.End).SetEntry("w"))
}

// times10 sets result = item*10 and extra = "e<item>".
func times10(_ context.Context, s graph.State) (graph.Update, error) {
	i, _ := s.Get("item")
	return graph.Update{"result": i.(int) * 10, "extra": fmt.Sprintf("e%d", i)}, nil
}

// fanGraph compiles fan (the fan-out node) → End over fanParentSchema.
func fanGraph(t testing.TB, cfg graph.FanOut) *graph.Graph {
	return mustCompile(t, graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", cfg).AddEdge("fan", graph.End).SetEntry("fan"))
}

// itemsFan is the items-mode configuration over leaf.
func itemsFan(leaf *graph.Graph) graph.FanOut {
	return graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "item", CollectField: "result", TargetField: "results"}
}

func field(t *testing.T, s graph.State, name string) string {
	t.Helper()
	v, ok := s.Get(name)
	if !ok {
		t.Fatalf("field %q not declared", name)
	}
	return jsonOf(t, v)
}

// fanOutFailure returns the error of a fail_fast fan-out whose only
// instance's node fails with cause: two carriers over cause.
func fanOutFailure(t *testing.T, cause error) error {
	t.Helper()
	g := fanGraph(t, graph.FanOut{Subgraph: fanLeaf(t, func(context.Context, graph.State) (graph.Update, error) { return nil, cause }),
		Count: graph.Fixed(1), CollectField: "result", TargetField: "results"})
	_, err := g.Invoke(t.Context(), nil)
	if err == nil {
		t.Fatal("fan-out succeeded")
	}
	return err
}

func TestFanOutModes(t *testing.T) {
	leafTag := func(_ context.Context, s graph.State) (graph.Update, error) {
		i, _ := s.Get("item")
		tag, _ := s.Get("tag")
		return graph.Update{"result": fmt.Sprintf("%s%d", tag, i)}, nil
	}
	tests := []struct {
		name    string
		cfg     func(leaf *graph.Graph) graph.FanOut
		leaf    graph.NodeFunc
		input   graph.Update
		results string
		count   string
	}{
		{
			name: "items mode",
			cfg: func(leaf *graph.Graph) graph.FanOut {
				c := itemsFan(leaf)
				c.CountField = "count"
				return c
			},
			leaf: times10, input: graph.Update{"items": []any{1, 2, 3}},
			results: `[10,20,30]`, count: `3`,
		},
		{
			name: "items mode with inputs",
			cfg: func(leaf *graph.Graph) graph.FanOut {
				c := itemsFan(leaf)
				c.Inputs = map[string]string{"tag": "tag"}
				return c
			},
			leaf: leafTag, input: graph.Update{"items": []any{1, 2}, "tag": "t"},
			results: `["t1","t2"]`, count: `0`,
		},
		{
			name: "unprojected subgraph fields start from their defaults",
			cfg:  itemsFan,
			leaf: leafTag, input: graph.Update{"items": []any{4}, "tag": "ignored"},
			results: `["dflt4"]`, count: `0`,
		},
		{
			name: "count mode, fixed",
			cfg: func(leaf *graph.Graph) graph.FanOut {
				return graph.FanOut{Subgraph: leaf, Count: graph.Fixed(3), CollectField: "result", TargetField: "results",
					Inputs: map[string]string{"tag": "tag"}, CountField: "count"}
			},
			leaf: leafTag, input: graph.Update{"tag": "c"},
			results: `["c0","c0","c0"]`, count: `3`,
		},
		{
			name: "count mode, read from the state",
			cfg: func(leaf *graph.Graph) graph.FanOut {
				return graph.FanOut{Subgraph: leaf, CollectField: "result", TargetField: "results", CountField: "count",
					Count: func(s graph.State) (int, error) {
						k, _ := s.Get("k")
						return k.(int) + 1, nil
					}}
			},
			leaf: leafTag, input: graph.Update{"k": 1},
			results: `["dflt0","dflt0"]`, count: `2`,
		},
		{
			name: "appends to the target's prior value",
			cfg:  itemsFan,
			leaf: times10, input: graph.Update{"items": []any{1}, "results": []any{"prior"}},
			results: `["prior",10]`, count: `0`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := fanGraph(t, tt.cfg(fanLeaf(t, tt.leaf)))
			res, err := g.Invoke(t.Context(), tt.input)
			if err != nil {
				t.Fatal(err)
			}
			if got := field(t, res.State, "results"); got != tt.results {
				t.Errorf("results = %s, want %s", got, tt.results)
			}
			if got := field(t, res.State, "count"); got != tt.count {
				t.Errorf("count = %s, want %s", got, tt.count)
			}
		})
	}
}

func TestFanOutFanInOrder(t *testing.T) {
	// Later instances finish first; the fan-in is still in index order.
	leaf := fanLeaf(t, func(ctx context.Context, s graph.State) (graph.Update, error) {
		i, _ := s.Get("item")
		time.Sleep(time.Duration(6-i.(int)) * 3 * time.Millisecond)
		return times10(ctx, s)
	})
	for _, tt := range []struct {
		name string
		cfg  func(c *graph.FanOut)
	}{
		{"unbounded", func(c *graph.FanOut) { c.Unbounded = true }},
		{"bounded", func(c *graph.FanOut) { c.Concurrency = graph.Fixed(3) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := itemsFan(leaf)
			cfg.ExtraOutputs = map[string]string{"extras": "extra"}
			tt.cfg(&cfg)
			g := fanGraph(t, cfg)
			res, err := g.Invoke(t.Context(), graph.Update{"items": []any{0, 1, 2, 3, 4, 5}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := field(t, res.State, "results"), `[0,10,20,30,40,50]`; got != want {
				t.Errorf("results = %s, want %s", got, want)
			}
			if got, want := field(t, res.State, "extras"), `["e0","e1","e2","e3","e4","e5"]`; got != want {
				t.Errorf("extras = %s, want %s", got, want)
			}
		})
	}
}

func TestFanOutConcurrencyLimit(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		cfg   func(c *graph.FanOut)
		input graph.Update
		want  int
	}{
		{"fixed 2", 6, func(c *graph.FanOut) { c.Concurrency = graph.Fixed(2) }, nil, 2},
		{"from the state", 6, func(c *graph.FanOut) {
			c.Concurrency = func(s graph.State) (int, error) { k, _ := s.Get("k"); return k.(int), nil }
		}, graph.Update{"k": 3}, 3},
		{"default is 10", 12, func(*graph.FanOut) {}, nil, 10},
		{"unbounded", 14, func(c *graph.FanOut) { c.Unbounded = true }, nil, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cur, peak atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			leaf := fanLeaf(t, func(ctx context.Context, s graph.State) (graph.Update, error) {
				n := cur.Add(1)
				defer cur.Add(-1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if int(n) >= tt.want {
					once.Do(func() { close(release) })
				}
				select {
				case <-release:
				case <-time.After(5 * time.Second):
					t.Errorf("instance waited 5s for %d concurrent instances", tt.want)
				}
				return times10(ctx, s)
			})
			cfg := graph.FanOut{Subgraph: leaf, Count: graph.Fixed(tt.n), CollectField: "result", TargetField: "results"}
			tt.cfg(&cfg)
			res, err := fanGraph(t, cfg).Invoke(t.Context(), tt.input)
			if err != nil {
				t.Fatal(err)
			}
			if got := int(peak.Load()); got != tt.want {
				t.Errorf("peak concurrency = %d, want %d", got, tt.want)
			}
			if v, _ := res.State.Get("results"); len(v.([]any)) != tt.n {
				t.Errorf("results = %v", v)
			}
		})
	}
}

func TestFanOutStartOrder(t *testing.T) {
	// §9.2: instances start in index order. The engine's start signal
	// (frame.started.signal in emitNode) fires before the started event is
	// queued, so the dispatcher may hand out instance i+1 and have its
	// started event queued ahead of instance i's. Flaky with -cpu >= 2.
	leaf := fanLeaf(t, func(ctx context.Context, s graph.State) (graph.Update, error) {
		i, _ := s.Get("item")
		time.Sleep(time.Duration(8-i.(int)) * time.Millisecond)
		return times10(ctx, s)
	})
	for _, tt := range []struct {
		name string
		cfg  func(c *graph.FanOut)
	}{
		{"unbounded", func(c *graph.FanOut) { c.Unbounded = true }},
		{"fixed 3", func(c *graph.FanOut) { c.Concurrency = graph.Fixed(3) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := itemsFan(leaf)
			tt.cfg(&cfg)
			for run := 0; run < 5; run++ {
				_, l, err := invokeObserved(t, fanGraph(t, cfg), graph.Update{"items": []any{0, 1, 2, 3, 4, 5, 6, 7}})
				if err != nil {
					t.Fatal(err)
				}
				var starts []int
				for _, e := range l.nodeEvents() {
					if e.Phase == graph.PhaseStarted && e.NodeName == "w" {
						starts = append(starts, *e.FanOutIndex)
					}
				}
				if diff := cmp.Diff([]int{0, 1, 2, 3, 4, 5, 6, 7}, starts); diff != "" {
					t.Fatalf("run %d: instance start order (-want +got):\n%s", run, diff)
				}
			}
		})
	}
}

func TestFanOutFailFast(t *testing.T) {
	var sawCancel atomic.Bool
	leaf := fanLeaf(t, func(ctx context.Context, s graph.State) (graph.Update, error) {
		i, _ := s.Get("item")
		switch i.(int) {
		case 0: // blocks until the failure of instance 1 cancels it
			select {
			case <-ctx.Done():
				sawCancel.Store(true)
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				return nil, errors.New("sibling was never cancelled")
			}
		case 1:
			return nil, errUser
		}
		return times10(ctx, s)
	})
	cfg := itemsFan(leaf)
	cfg.Unbounded = true
	cfg.CountField = "count"
	g := fanGraph(t, cfg)
	start := time.Now()
	in := graph.Update{"items": []any{0, 1, 2}, "results": []any{"prior"}, "count": 9}
	res, l, err := invokeObserved(t, g, in)
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
	if ne.Category() != errcat.NodeException || ne.Node != "fan" || ne.FanOutIndex == nil || *ne.FanOutIndex != 1 {
		t.Errorf("err = %v (node %q, index %v), want node_exception from fan at instance 1", err, ne.Node, ne.FanOutIndex)
	}
	if !errors.Is(err, errUser) {
		t.Errorf("errors.Is(err, errUser) = false")
	}
	if cat, _ := errcat.Derived(err); cat != "" {
		t.Errorf("derived category = %q, want none (a bare user error)", cat)
	}
	// Recoverable state: the parent state at fan-out entry.
	if got, want := stateJSON(t, res.State), `{"items":[0,1,2],"k":0,"tag":"","results":["prior"],"extras":[],"errors":[],"count":9}`; got != want {
		t.Errorf("recoverable state = %s, want %s", got, want)
	}
	// The fan-out node's completed event carries the error and its config.
	var fanCompleted *graph.NodeEvent
	for _, e := range l.nodeEvents() {
		if e.NodeName == "fan" && e.Phase == graph.PhaseCompleted {
			fanCompleted = e
		}
	}
	if fanCompleted == nil || fanCompleted.Err == nil || fanCompleted.FanOutConfig == nil {
		t.Errorf("fan completed event = %+v", fanCompleted)
	}
}

func TestFanOutCollect(t *testing.T) {
	leaf := fanLeaf(t, func(ctx context.Context, s graph.State) (graph.Update, error) {
		i, _ := s.Get("item")
		switch i.(int) {
		case 1:
			return nil, errUser
		case 3:
			return nil, errcat.New(errcat.ProviderRateLimit, "slow down")
		}
		return times10(ctx, s)
	})
	rec := func(i int, msg string) map[string]any {
		return map[string]any{"fan_out_index": i, "category": "node_exception", "message": msg}
	}
	tests := []struct {
		name    string
		items   []any
		errsFld string
		results string
		errors  []any
	}{
		{"failures omitted and recorded", []any{0, 1, 2, 3}, "errors", `[0,20]`, []any{
			rec(1, `graph: node "fan/w": node_exception: user failure`),
			rec(3, `graph: node "fan/w": node_exception: provider_rate_limit: slow down`),
		}},
		{"without an errors field failures are dropped", []any{0, 1, 2, 3}, "", `[0,20]`, []any{}},
		{"all failing never fails the node", []any{1, 3}, "errors", `[]`, []any{
			rec(0, `graph: node "fan/w": node_exception: user failure`),
			rec(1, `graph: node "fan/w": node_exception: provider_rate_limit: slow down`),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := itemsFan(leaf)
			cfg.ErrorPolicy, cfg.ErrorsField, cfg.CountField = graph.Collect, tt.errsFld, "count"
			g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", cfg).
				AddNode("after", set(graph.Update{"tag": "after ran"})).
				AddEdge("fan", "after").AddEdge("after", graph.End).SetEntry("fan"))
			res, err := g.Invoke(t.Context(), graph.Update{"items": tt.items})
			if err != nil {
				t.Fatalf("Invoke: %v (collect never fails the node)", err)
			}
			if got := field(t, res.State, "results"); got != tt.results {
				t.Errorf("results = %s, want %s", got, tt.results)
			}
			got, _ := res.State.Get("errors")
			if diff := cmp.Diff(tt.errors, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if tag, _ := res.State.Get("tag"); tag != "after ran" {
				t.Errorf("downstream node did not run")
			}
			if c, _ := res.State.Get("count"); c != len(tt.items) {
				t.Errorf("count = %v, want %d", c, len(tt.items))
			}
		})
	}
}

func TestFanOutEmpty(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(c *graph.FanOut)
		items   []any
		wantErr bool
		events  []string
		final   string
	}{
		{"items, raise by default", func(*graph.FanOut) {}, []any{}, true,
			[]string{"started fan", "completed fan !node_exception"}, ""},
		{"count 0, raise", func(c *graph.FanOut) { c.ItemsField, c.ItemField, c.Count = "", "", graph.Fixed(0) }, nil, true,
			[]string{"started fan", "completed fan !node_exception"}, ""},
		{"items, noop", func(c *graph.FanOut) { c.OnEmpty = graph.OnEmptyNoop }, []any{}, false,
			[]string{"started fan", "completed fan"},
			`{"items":[],"k":0,"tag":"","results":["prior"],"extras":[],"errors":[],"count":0}`},
		{"count 0, noop", func(c *graph.FanOut) {
			c.ItemsField, c.ItemField, c.Count, c.OnEmpty = "", "", graph.Fixed(0), graph.OnEmptyNoop
		}, nil, false,
			[]string{"started fan", "completed fan"},
			`{"items":[],"k":0,"tag":"","results":["prior"],"extras":[],"errors":[],"count":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Bool
			cfg := itemsFan(fanLeaf(t, func(context.Context, graph.State) (graph.Update, error) { ran.Store(true); return nil, nil }))
			cfg.CountField, cfg.ErrorsField, cfg.ErrorPolicy = "count", "errors", graph.Collect
			tt.cfg(&cfg)
			res, l, err := invokeObserved(t, fanGraph(t, cfg), graph.Update{"items": tt.items, "results": []any{"prior"}, "count": 7})
			if ran.Load() {
				t.Error("an instance ran")
			}
			if diff := cmp.Diff(tt.events, l.keys()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, e := range l.nodeEvents() {
				if e.FanOutConfig == nil || e.FanOutConfig.ItemCount != 0 {
					t.Errorf("%s: FanOutConfig = %+v", evKey(e), e.FanOutConfig)
				}
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if got := stateJSON(t, res.State); got != tt.final {
					t.Errorf("final = %s, want %s", got, tt.final)
				}
				return
			}
			if !errors.Is(err, errcat.FanOutEmpty) || errcat.Of(err) != errcat.NodeException {
				t.Fatalf("err = %v, want node_exception with cause fan_out_empty", err)
			}
			if cat, _ := errcat.Derived(err); cat != errcat.FanOutEmpty {
				t.Errorf("derived = %q", cat)
			}
			if graph.DefaultRetryable(err, res.State) {
				t.Error("fan_out_empty classified transient")
			}
			// The raise comes before count_field is written: the prior value stays.
			if c, _ := res.State.Get("count"); c != 7 {
				t.Errorf("recoverable count = %v, want the prior 7", c)
			}
		})
	}
}

func TestFanOutInvalidConfigAtRunTime(t *testing.T) {
	errCount := errors.New("cannot count")
	tests := []struct {
		name string
		cfg  func(c *graph.FanOut)
		want error
	}{
		{"negative count", func(c *graph.FanOut) { c.Count = graph.Fixed(-1) }, errcat.FanOutInvalidCount},
		{"count source fails", func(c *graph.FanOut) {
			c.Count = func(graph.State) (int, error) { return 0, errCount }
		}, errCount},
		{"zero concurrency", func(c *graph.FanOut) { c.Concurrency = graph.Fixed(0) }, errcat.FanOutInvalidConcurrency},
		{"negative concurrency from the state", func(c *graph.FanOut) {
			c.Concurrency = func(s graph.State) (int, error) { k, _ := s.Get("k"); return k.(int), nil }
		}, errcat.FanOutInvalidConcurrency},
		// A count no process could allocate the states of: refused, not
		// a makeslice panic or the process out of memory.
		{"count over the bound", func(c *graph.FanOut) { c.Count = graph.Fixed(graph.MaxFanOutCount + 1) }, errcat.FanOutInvalidCount},
		{"count of MaxInt", func(c *graph.FanOut) { c.Count = graph.Fixed(math.MaxInt) }, errcat.FanOutInvalidCount},
		// A panicking source fails the fan-out as a panicking node does.
		{"count source panics", func(c *graph.FanOut) {
			c.Count = func(graph.State) (int, error) { panic("boom") }
		}, errcat.NodeException},
		{"concurrency source panics", func(c *graph.FanOut) {
			c.Concurrency = func(graph.State) (int, error) { panic("boom") }
		}, errcat.NodeException},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := graph.FanOut{Subgraph: fanLeaf(t, times10), Count: graph.Fixed(2), CollectField: "result", TargetField: "results"}
			tt.cfg(&cfg)
			res, l, err := invokeObserved(t, fanGraph(t, cfg), graph.Update{"k": -3})
			if !errors.Is(err, tt.want) || errcat.Of(err) != errcat.NodeException {
				t.Fatalf("err = %v, want node_exception caused by %v", err, tt.want)
			}
			if got := field(t, res.State, "k"); got != "-3" {
				t.Errorf("recoverable state k = %s", got)
			}
			if diff := cmp.Diff([]string{"started fan", "completed fan !node_exception"}, l.keys()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFanOutInstanceRetry(t *testing.T) {
	var mu sync.Mutex
	preRuns := map[int]int{}
	wRuns := map[int]int{}
	sub := mustCompile(t, graph.NewBuilder(fanLeafSchema(t)).
		AddNode("pre", func(_ context.Context, s graph.State) (graph.Update, error) {
			i, _ := s.Get("item")
			mu.Lock()
			preRuns[i.(int)]++
			mu.Unlock()
			return graph.Update{"tag": "pre"}, nil
		}).
		AddNode("w", func(ctx context.Context, s graph.State) (graph.Update, error) {
			i, _ := s.Get("item")
			tag, _ := s.Get("tag")
			mu.Lock()
			wRuns[i.(int)]++
			n := wRuns[i.(int)]
			mu.Unlock()
			if tag != "pre" {
				return nil, fmt.Errorf("instance state not fresh: tag %v", tag)
			}
			if i == 1 && n == 1 {
				return nil, errTransient
			}
			return times10(ctx, s)
		}).
		AddEdge("pre", "w").AddEdge("w", graph.End).SetEntry("pre"))
	cfg := itemsFan(sub)
	cfg.InstanceMiddleware = []graph.Middleware{mustRetry(t, graph.RetryConfig{MaxAttempts: 3})}
	res, l, err := invokeObserved(t, fanGraph(t, cfg), graph.Update{"items": []any{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := field(t, res.State, "results"), `[0,10,20]`; got != want {
		t.Errorf("results = %s, want %s", got, want)
	}
	if diff := cmp.Diff(map[int]int{0: 1, 1: 2, 2: 1}, preRuns); diff != "" {
		t.Errorf("pre runs per item (-want +got):\n%s (the whole instance re-runs)", diff)
	}
	var inst1 []string
	for _, e := range l.nodeEvents() {
		if e.FanOutIndex != nil && *e.FanOutIndex == 1 {
			inst1 = append(inst1, evKey(e))
		}
	}
	want := []string{
		"started fan/pre f=1", "completed fan/pre f=1", "started fan/w f=1", "completed fan/w f=1 !node_exception",
		"started fan/pre a1 f=1", "completed fan/pre a1 f=1", "started fan/w a1 f=1", "completed fan/w a1 f=1",
	}
	if diff := cmp.Diff(want, inst1); diff != "" {
		t.Errorf("instance 1 events (-want +got):\n%s", diff)
	}
}

func TestFanOutDegradedInstance(t *testing.T) {
	leaf := fanLeaf(t, func(ctx context.Context, s graph.State) (graph.Update, error) {
		if i, _ := s.Get("item"); i == 1 {
			return nil, errcat.New(errcat.ProviderUnavailable, "down")
		}
		return times10(ctx, s)
	})
	tests := []struct {
		name    string
		cfg     graph.FailureIsolationConfig
		results string
		extras  string
	}{
		{"static degraded update is the contribution",
			graph.FailureIsolationConfig{Degraded: graph.Update{"result": "deg", "extra": "x"}},
			`[0,"deg",20]`, `["e0","x","e2"]`},
		{"static update missing an extra output gives a nil slot",
			graph.FailureIsolationConfig{Degraded: graph.Update{"result": "deg"}},
			`[0,"deg",20]`, `["e0",null,"e2"]`},
		{"callable missing the collect field gives a nil slot",
			graph.FailureIsolationConfig{DegradedFunc: func(_ context.Context, s graph.State) (graph.Update, error) {
				i, _ := s.Get("item")
				return graph.Update{"extra": fmt.Sprintf("d%d", i)}, nil
			}},
			`[0,null,20]`, `["e0","d1","e2"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			c.EventName = "instance_degraded"
			c.Catch = []errcat.Category{errcat.ProviderUnavailable}
			cfg := itemsFan(leaf)
			cfg.ExtraOutputs = map[string]string{"extras": "extra"}
			cfg.InstanceMiddleware = []graph.Middleware{mustIsolation(t, c)}
			res, l, err := invokeObserved(t, fanGraph(t, cfg), graph.Update{"items": []any{0, 1, 2}})
			if err != nil {
				t.Fatal(err)
			}
			if got := field(t, res.State, "results"); got != tt.results {
				t.Errorf("results = %s, want %s", got, tt.results)
			}
			if got := field(t, res.State, "extras"); got != tt.extras {
				t.Errorf("extras = %s, want %s", got, tt.extras)
			}
			evs := l.isolationEvents()
			if len(evs) != 1 {
				t.Fatalf("isolation events = %d", len(evs))
			}
			e := evs[0]
			if e.FanOutIndex == nil || *e.FanOutIndex != 1 || e.BranchName != nil {
				t.Errorf("event lineage fan_out_index = %v, branch %v", e.FanOutIndex, e.BranchName)
			}
			if diff := cmp.Diff([]string{"fan"}, e.Namespace); diff != "" {
				t.Errorf("Namespace (-want +got):\n%s", diff)
			}
			if got := stateJSON(t, e.PreState); got != `{"item":1,"tag":"dflt","result":null,"extra":null}` {
				t.Errorf("PreState = %s (want the instance's initial state)", got)
			}
			wantChain := []errcat.Link{
				{Category: errcat.NodeException, Message: `node "fan/w": node_exception`, Carrier: true},
				{Category: errcat.ProviderUnavailable, Message: "down"},
			}
			if diff := cmp.Diff(wantChain, e.CaughtException.Chain); diff != "" {
				t.Errorf("Chain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFanOutNestedLineage(t *testing.T) {
	midSchema := mustSchema(t,
		graph.NewDynamicField("vals", graph.ListOf(nil), graph.WithReducer(graph.Append)),
	)
	leaf := fanLeaf(t, set(graph.Update{"result": 1}))
	mid := mustCompile(t, graph.NewBuilder(midSchema).
		AddFanOut("inner", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(2), CollectField: "result", TargetField: "vals", Unbounded: true}).
		AddEdge("inner", graph.End).SetEntry("inner"))
	g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).
		AddFanOut("outer", graph.FanOut{Subgraph: mid, Count: graph.Fixed(2), CollectField: "vals", TargetField: "results", Unbounded: true}).
		AddEdge("outer", graph.End).SetEntry("outer"))
	res, l, err := invokeObserved(t, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := field(t, res.State, "results"), `[[1,1],[1,1]]`; got != want {
		t.Errorf("results = %s, want %s", got, want)
	}
	keys := l.keys()
	sort.Strings(keys)
	want := []string{
		"completed outer",
		"completed outer/inner f=0", "completed outer/inner f=1",
		"completed outer/inner/w f=0,0", "completed outer/inner/w f=0,1", "completed outer/inner/w f=1,0", "completed outer/inner/w f=1,1",
		"started outer",
		"started outer/inner f=0", "started outer/inner f=1",
		"started outer/inner/w f=0,0", "started outer/inner/w f=0,1", "started outer/inner/w f=1,0", "started outer/inner/w f=1,1",
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, e := range l.nodeEvents() {
		if len(e.FanOutIndexChain) != len(e.Namespace)-1 || len(e.BranchNameChain) != len(e.FanOutIndexChain) || len(e.ParentStates) != len(e.Namespace)-1 {
			t.Errorf("%s: chain lengths fan=%d branch=%d parents=%d for namespace %v",
				evKey(e), len(e.FanOutIndexChain), len(e.BranchNameChain), len(e.ParentStates), e.Namespace)
		}
		if n := len(e.FanOutIndexChain); n > 0 && (e.FanOutIndex == nil || *e.FanOutIndex != *e.FanOutIndexChain[n-1]) {
			t.Errorf("%s: scalar fan_out_index %v is not the innermost chain entry", evKey(e), e.FanOutIndex)
		}
		if e.BranchName != nil {
			t.Errorf("%s: branch_name set", evKey(e))
		}
		switch e.NodeName {
		case "inner":
			if e.FanOutConfig == nil || e.FanOutConfig.ParentNodeName != "inner" || e.FanOutConfig.ItemCount != 2 {
				t.Errorf("%s: FanOutConfig = %+v", evKey(e), e.FanOutConfig)
			}
		case "w":
			if e.FanOutConfig != nil {
				t.Errorf("%s: leaf carries a FanOutConfig", evKey(e))
			}
		}
	}
}

func TestFanOutConfigOnEvents(t *testing.T) {
	ten, two := 10, 2
	tests := []struct {
		name string
		cfg  func(c *graph.FanOut)
		want graph.FanOutConfig
	}{
		{"defaults", func(*graph.FanOut) {}, graph.FanOutConfig{ItemCount: 3, Concurrency: &ten, ErrorPolicy: "fail_fast", ParentNodeName: "fan"}},
		{"fixed concurrency", func(c *graph.FanOut) { c.Concurrency = graph.Fixed(2) },
			graph.FanOutConfig{ItemCount: 3, Concurrency: &two, ErrorPolicy: "fail_fast", ParentNodeName: "fan"}},
		{"unbounded collect", func(c *graph.FanOut) { c.Unbounded, c.ErrorPolicy = true, graph.Collect },
			graph.FanOutConfig{ItemCount: 3, ErrorPolicy: "collect", ParentNodeName: "fan"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := itemsFan(fanLeaf(t, times10))
			tt.cfg(&cfg)
			g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", cfg).AddNode("after", noop).
				AddEdge("fan", "after").AddEdge("after", graph.End).SetEntry("fan"))
			_, l, err := invokeObserved(t, g, graph.Update{"items": []any{1, 2, 3}})
			if err != nil {
				t.Fatal(err)
			}
			fanEvents := 0
			for _, e := range l.nodeEvents() {
				if e.ParallelBranchesConfig != nil {
					t.Errorf("%s: ParallelBranchesConfig set", evKey(e))
				}
				if e.NodeName != "fan" {
					if e.FanOutConfig != nil {
						t.Errorf("%s: FanOutConfig set on a non-fan-out event", evKey(e))
					}
					continue
				}
				fanEvents++
				if e.FanOutConfig == nil {
					t.Errorf("%s: FanOutConfig missing", evKey(e))
					continue
				}
				if diff := cmp.Diff(tt.want, *e.FanOutConfig); diff != "" {
					t.Errorf("%s: FanOutConfig (-want +got):\n%s", evKey(e), diff)
				}
				// The wire form always presents all four keys.
				js := jsonOf(t, e.FanOutConfig)
				for _, k := range []string{`"item_count":`, `"concurrency":`, `"error_policy":`, `"parent_node_name":`} {
					if !strings.Contains(js, k) {
						t.Errorf("FanOutConfig JSON %s lacks %s", js, k)
					}
				}
				if e.FanOutIndex != nil {
					t.Errorf("%s: the fan-out node's own event carries fan_out_index", evKey(e))
				}
			}
			if fanEvents != 2 {
				t.Errorf("fan-out node events = %d, want 2", fanEvents)
			}
		})
	}
}

func TestFanOutTypedFields(t *testing.T) {
	t.Run("typed list target via append", func(t *testing.T) {
		item, result := graph.NewField[int]("item"), graph.NewField[int]("result")
		leaf := mustCompile(t, graph.NewBuilder(graph.MustSchema(item, result)).
			AddNode("w", func(_ context.Context, s graph.State) (graph.Update, error) { return result.Set(item.Get(s) * 10), nil }).
			AddEdge("w", graph.End).SetEntry("w"))
		items, results := graph.NewListField[int]("items", graph.LastWriteWins), graph.NewListField[int]("results", graph.Append)
		n := graph.NewField[int]("n")
		g := mustCompile(t, graph.NewBuilder(graph.MustSchema(items, results, n)).
			AddFanOut("fan", graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "item", CollectField: "result",
				TargetField: "results", CountField: "n"}).
			AddEdge("fan", graph.End).SetEntry("fan"))
		res, err := g.Invoke(t.Context(), graph.Update{"items": []int{1, 2, 3}, "results": []int{7}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{7, 10, 20, 30}, results.Get(res.State)); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if n.Get(res.State) != 3 {
			t.Errorf("count = %d", n.Get(res.State))
		}
	})
	t.Run("concat_flatten target", func(t *testing.T) {
		item, result := graph.NewField[int]("item"), graph.NewField[[]int]("result")
		leaf := mustCompile(t, graph.NewBuilder(graph.MustSchema(item, result)).
			AddNode("w", func(_ context.Context, s graph.State) (graph.Update, error) {
				return result.Set([]int{item.Get(s), item.Get(s)}), nil
			}).
			AddEdge("w", graph.End).SetEntry("w"))
		items, flat := graph.NewListField[int]("items", graph.LastWriteWins), graph.NewListField[int]("flat", graph.ConcatFlatten)
		g := mustCompile(t, graph.NewBuilder(graph.MustSchema(items, flat)).
			AddFanOut("fan", graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "item", CollectField: "result", TargetField: "flat"}).
			AddEdge("fan", graph.End).SetEntry("fan"))
		res, err := g.Invoke(t.Context(), graph.Update{"items": []int{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{1, 1, 2, 2, 3, 3}, flat.Get(res.State)); diff != "" {
			t.Errorf("flat (-want +got):\n%s", diff)
		}
	})
}

func TestFanOutCompileErrors(t *testing.T) {
	leaf := fanLeaf(t, times10)
	deg := func(u graph.Update) []graph.Middleware {
		return []graph.Middleware{mustIsolation(t, graph.FailureIsolationConfig{EventName: "d", Degraded: u})}
	}
	tests := []struct {
		name  string
		cfg   func(c *graph.FanOut)
		want  errcat.Category
		field string
	}{
		{"both items and count", func(c *graph.FanOut) { c.Count = graph.Fixed(1) }, errcat.FanOutCountModeAmbiguous, ""},
		{"neither items nor count", func(c *graph.FanOut) { c.ItemsField, c.ItemField = "", "" }, errcat.FanOutCountModeAmbiguous, ""},
		{"count with an item field", func(c *graph.FanOut) { c.ItemsField, c.Count = "", graph.Fixed(1) }, errcat.FanOutCountModeAmbiguous, "item"},
		{"items field not a list", func(c *graph.FanOut) { c.ItemsField = "k" }, errcat.FanOutFieldNotList, "k"},
		{"items mode without an item field", func(c *graph.FanOut) { c.ItemField = "" }, errcat.MappingReferencesUndeclaredField, ""},
		{"no collect field", func(c *graph.FanOut) { c.CollectField = "" }, errcat.MappingReferencesUndeclaredField, ""},
		{"no target field", func(c *graph.FanOut) { c.TargetField = "" }, errcat.MappingReferencesUndeclaredField, ""},
		{"undeclared items field", func(c *graph.FanOut) { c.ItemsField = "nope" }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"undeclared item field", func(c *graph.FanOut) { c.ItemField = "nope" }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"undeclared collect field", func(c *graph.FanOut) { c.CollectField = "nope" }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"undeclared target field", func(c *graph.FanOut) { c.TargetField = "nope" }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"undeclared errors field", func(c *graph.FanOut) { c.ErrorsField = "nope" }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"undeclared count field", func(c *graph.FanOut) { c.CountField = "nope" }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"inputs: undeclared subgraph field", func(c *graph.FanOut) { c.Inputs = map[string]string{"nope": "tag"} }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"inputs: undeclared parent field", func(c *graph.FanOut) { c.Inputs = map[string]string{"tag": "nope"} }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"extra outputs: undeclared parent field", func(c *graph.FanOut) { c.ExtraOutputs = map[string]string{"nope": "extra"} }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"extra outputs: undeclared subgraph field", func(c *graph.FanOut) { c.ExtraOutputs = map[string]string{"extras": "nope"} }, errcat.MappingReferencesUndeclaredField, "nope"},
		{"errors field not a list", func(c *graph.FanOut) { c.ErrorsField = "k" }, errcat.MappingReferencesUndeclaredField, "k"},
		{"count field not an int", func(c *graph.FanOut) { c.CountField = "tag" }, errcat.MappingReferencesUndeclaredField, "tag"},
		{"unknown error policy", func(c *graph.FanOut) { c.ErrorPolicy = "retry" }, errcat.InvalidGraph, ""},
		{"unknown on_empty", func(c *graph.FanOut) { c.OnEmpty = "skip" }, errcat.InvalidGraph, ""},
		{"nil subgraph", func(c *graph.FanOut) { c.Subgraph = nil }, errcat.InvalidGraph, ""},
		{"static degraded update without the collect field", func(c *graph.FanOut) {
			c.InstanceMiddleware = deg(graph.Update{"extra": 1})
		}, errcat.FanOutDegradedUpdateMissingCollectField, "result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := itemsFan(leaf)
			tt.cfg(&cfg)
			g, err := graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", cfg).AddEdge("fan", graph.End).SetEntry("fan").Compile()
			checkCompileErr(t, g, err, tt.want, "fan", tt.field)
		})
	}
	t.Run("degraded forms that compile", func(t *testing.T) {
		for _, mw := range [][]graph.Middleware{
			deg(graph.Update{"result": nil}),
			{mustIsolation(t, graph.FailureIsolationConfig{EventName: "d",
				DegradedFunc: func(context.Context, graph.State) (graph.Update, error) { return nil, nil }})},
		} {
			cfg := itemsFan(leaf)
			cfg.InstanceMiddleware = mw
			if _, err := graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", cfg).AddEdge("fan", graph.End).SetEntry("fan").Compile(); err != nil {
				t.Errorf("Compile: %v", err)
			}
		}
	})
}

func TestFanOutRoundTripWarnings(t *testing.T) {
	leaf := fanLeaf(t, times10)
	tests := []struct {
		name string
		cfg  func(c *graph.FanOut)
		want []string // warned parent fields
	}{
		{"no projection round trip", func(*graph.FanOut) {}, nil},
		{"inputs and extra outputs through one subgraph field, non-idempotent reducer", func(c *graph.FanOut) {
			c.Inputs = map[string]string{"extra": "extras"}
			c.ExtraOutputs = map[string]string{"extras": "extra"}
		}, []string{"extras"}},
		{"inputs and extra outputs, last_write_wins is idempotent", func(c *graph.FanOut) {
			c.Inputs = map[string]string{"tag": "tag"}
			c.ExtraOutputs = map[string]string{"tag": "tag"}
		}, nil},
		{"inputs and extra outputs through different subgraph fields", func(c *graph.FanOut) {
			c.Inputs = map[string]string{"tag": "extras"}
			c.ExtraOutputs = map[string]string{"extras": "extra"}
		}, nil},
		{"collect channel seeded through inputs", func(c *graph.FanOut) {
			c.Inputs = map[string]string{"result": "results"}
		}, []string{"results"}},
		{"collect channel seeded through the item field", func(c *graph.FanOut) {
			c.ItemsField, c.ItemField = "results", "result"
		}, []string{"results"}},
		{"collect field seeded from another parent field", func(c *graph.FanOut) {
			c.Inputs = map[string]string{"result": "extras"}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := itemsFan(leaf)
			tt.cfg(&cfg)
			g := fanGraph(t, cfg)
			var got []string
			for _, w := range g.Warnings() {
				if w.Category != errcat.ProjectionReducerRoundTrip || w.Node != "fan" || w.Message == "" {
					t.Errorf("warning = %+v", w)
				}
				got = append(got, w.Field)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warned fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFanOutExtraOutputsIntoAppend(t *testing.T) {
	// Conformance fixture 069 (§9.3): a scalar extra_outputs source merged
	// into an append list field lands as one element per instance, and a
	// degrade that omits it contributes null at the instance's slot.
	leaf := fanLeaf(t, func(context.Context, graph.State) (graph.Update, error) {
		return nil, errcat.New(errcat.ProviderUnavailable, "down")
	})
	for _, tt := range []struct {
		name  string
		cfg   graph.FailureIsolationConfig
		notes string
	}{
		{"omitted source is a null slot", graph.FailureIsolationConfig{Degraded: graph.Update{"result": "(degraded)"}}, `[null]`},
		{"scalar source is one element", graph.FailureIsolationConfig{DegradedFunc: func(_ context.Context, s graph.State) (graph.Update, error) {
			i, _ := s.Get("item")
			return graph.Update{"extra": fmt.Sprintf("fellback for %d", i)}, nil
		}}, `["fellback for 1"]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			c.EventName = "unit_isolated"
			g := mustCompile(t, graph.NewBuilder(mustSchema(t,
				graph.NewDynamicField("items", graph.ListOf(graph.TypeInt)),
				graph.NewDynamicField("results", graph.ListOf(nil), graph.WithReducer(graph.Append)),
				graph.NewDynamicField("notes", graph.ListOf(nil), graph.WithReducer(graph.Append)),
			)).AddFanOut("process", graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "item", CollectField: "result",
				TargetField: "results", ExtraOutputs: map[string]string{"notes": "extra"},
				InstanceMiddleware: []graph.Middleware{mustIsolation(t, c)}}).
				AddEdge("process", graph.End).SetEntry("process"))
			res, err := g.Invoke(t.Context(), graph.Update{"items": []any{1}})
			if err != nil {
				t.Fatal(err)
			}
			if got := field(t, res.State, "notes"); got != tt.notes {
				t.Errorf("notes = %s, want %s", got, tt.notes)
			}
		})
	}
}
