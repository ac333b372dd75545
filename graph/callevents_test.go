package graph_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// callKinds records the typed call events an observer receives, as
// "<type>:<detail>" strings in delivery order.
type callKinds struct {
	mu  sync.Mutex
	got []graph.Event
}

func (c *callKinds) observe(_ context.Context, ev graph.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ev)
	return nil
}

func (c *callKinds) events() []graph.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]graph.Event(nil), c.got...)
}

func kindOf(ev graph.Event) string {
	switch e := ev.(type) {
	case *graph.NodeEvent:
		return "node:" + string(e.Phase)
	case *graph.LLMCompletionEvent:
		return "llm_completion"
	case *graph.LLMFailedEvent:
		return "llm_failed:" + string(e.ErrorCategory)
	case *graph.LLMTokenEvent:
		return "token:" + e.Delta
	case *graph.ToolCallEvent:
		return "tool"
	case *graph.ToolCallFailedEvent:
		return "tool_failed:" + e.ErrorType
	case *graph.InvocationEvent:
		return "invocation:" + string(e.Phase)
	}
	return "other"
}

type timeoutErr struct{}

func (timeoutErr) Error() string     { return "tool timed out" }
func (timeoutErr) ErrorType() string { return "TimeoutError" }

func TestCallEvents(t *testing.T) {
	soeResp := &llm.Response{Message: llm.AssistantText(`{"a":`), FinishReason: llm.FinishLength, Raw: []byte(`{"id":"r1","model":"m-2"}`)}
	tests := []struct {
		name string
		body func(ctx context.Context) error
		want []string
	}{
		{"completion", func(ctx context.Context) error {
			_, err := llm.Complete(ctx, llmtest.New(llmtest.Reply("hi")), &llm.Request{Messages: []llm.Message{llm.UserText("q")}})
			return err
		}, []string{"node:started", "llm_completion", "node:completed"}},
		{"provider failure", func(ctx context.Context) error {
			p := llmtest.New(llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable, Message: "down"}))
			_, err := llm.Complete(ctx, p, &llm.Request{Messages: []llm.Message{llm.UserText("q")}})
			return err
		}, []string{"node:started", "llm_failed:provider_unavailable", "node:completed"}},
		{"structured output failure", func(ctx context.Context) error {
			p := llmtest.New(llmtest.Step{Err: &llm.StructuredOutputError{OutputContent: `{"a":`, Response: soeResp, ErrorMessage: "truncated"}})
			_, err := llm.Complete(ctx, p, &llm.Request{Messages: []llm.Message{llm.UserText("q")}})
			return err
		}, []string{"node:started", "llm_failed:structured_output_invalid", "node:completed"}},
		{"stream", func(ctx context.Context) error {
			_, err := llm.Complete(ctx, llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{{Content: "a"}, {Content: "b", FinishReason: llm.FinishStop}}}),
				&llm.Request{Messages: []llm.Message{llm.UserText("q")}, Stream: true})
			return err
		}, []string{"node:started", "token:a", "token:b", "llm_completion", "node:completed"}},
		{"tool", func(ctx context.Context) error {
			_, err := graph.CallTool(ctx, graph.ToolCall{Name: "t", ID: "c1"}, func(context.Context) (int, error) { return 1, nil })
			return err
		}, []string{"node:started", "tool", "node:completed"}},
		{"tool failure", func(ctx context.Context) error {
			_, err := graph.CallTool(ctx, graph.ToolCall{Name: "t"}, func(context.Context) (int, error) { return 0, timeoutErr{} })
			return err
		}, []string{"node:started", "tool_failed:TimeoutError", "node:completed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var bodyErr error
			g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
				bodyErr = tc.body(ctx)
				return nil, bodyErr
			}).AddEdge("n", graph.End).SetEntry("n"))
			var c callKinds
			defer mustObserve(t, g, c.observe)()
			res, _ := g.Invoke(t.Context(), nil)
			drain(t, g)
			var got []string
			ids := map[string]bool{}
			for _, ev := range c.events() {
				got = append(got, kindOf(ev))
				if s, ok := graph.CallSourceOf(ev); ok {
					if s.NodeName != "n" || s.InvocationID != res.InvocationID || s.CallID == "" || s.Wrapper {
						t.Errorf("%s: source %+v", kindOf(ev), s)
					}
					ids[s.CallID] = true
				}
				if f, ok := ev.(*graph.LLMFailedEvent); ok {
					if (f.ErrorCategory == errcat.StructuredOutputInvalid) != (f.Response != nil) {
						t.Errorf("failure %s: response side %+v", f.ErrorCategory, f.Response)
					}
					if f.Response != nil && (f.Response.ResponseID != "r1" || f.Response.ResponseModel != "m-2" || *f.Response.OutputContent != `{"a":`) {
						t.Errorf("structured failure response side %+v", f.Response)
					}
				}
			}
			if len(ids) > 1 {
				t.Errorf("one call has %d call ids", len(ids))
			}
			if !equalStrings(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
			if bodyErr != nil && !errors.Is(res.Err, bodyErr) {
				t.Errorf("the call's error does not reach the caller: %v", res.Err)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCallEventsWithoutObservers: without observers a node's context
// carries no call observer, and the calls run untracked.
func TestCallEventsWithoutObservers(t *testing.T) {
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		if ctx.Value(llm.CallObserverKey{}) != nil {
			t.Error("a call observer without observers")
		}
		_, err := graph.CallTool(ctx, graph.ToolCall{Name: "t"}, func(context.Context) (int, error) { return 1, nil })
		return nil, err
	}).AddEdge("n", graph.End).SetEntry("n"))
	if _, err := g.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestRequestParams(t *testing.T) {
	got := graph.RequestParams(llm.Config{Temperature: new(0.5), Seed: new(int64(3)), StopSequences: []string{"x"}})
	if len(got) != 3 || got["temperature"] != 0.5 || got["seed"] != int64(3) {
		t.Errorf("RequestParams = %v", got)
	}
	if len(graph.RequestParams(llm.Config{})) != 0 {
		t.Error("unset parameters are reported")
	}
}

// TestCallEventsShareHistory: the LLM call event reports the request's
// messages without copying them, so a call on a long history costs an
// observed turn no more than one on a short history (it used to copy the
// whole list for every call), and an observer appending to what it got
// cannot write into the caller's list.
func TestCallEventsShareHistory(t *testing.T) {
	var got callKinds
	history := make([]llm.Message, 20000, 20001)
	for i := range history {
		history[i] = llm.UserText("m")
	}
	var n int
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		_, err := llm.Complete(ctx, hiModel{}, &llm.Request{Messages: history[:n]})
		return nil, err
	}).AddEdge("n", graph.End).SetEntry("n"))
	if _, err := g.AddObserver(got.observe); err != nil {
		t.Fatal(err)
	}
	allocated := func(h int) uint64 {
		n = h
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, err := g.Invoke(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = g.Drain(t.Context())
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 10
	}
	short, long := allocated(10), allocated(20000)
	// A copy of 20 000 messages is megabytes; allow noise of 256 KiB.
	if long > short+256<<10 {
		t.Errorf("an observed call allocates %d bytes on a 20 000-message history, %d on 10", long, short)
	}
	for _, ev := range got.events() {
		if c, ok := ev.(*graph.LLMCompletionEvent); ok {
			if len(c.InputMessages) == 20000 {
				_ = append(c.InputMessages, llm.AssistantText("observer"))
				if history[:20001][20000].Role != "" {
					t.Fatal("an observer's append wrote into the caller's history")
				}
				return
			}
		}
	}
	t.Fatal("no completion event for the long history")
}

// hiModel answers "hi", keeping nothing of the request.
type hiModel struct{}

func (hiModel) Ready(context.Context) error { return nil }

func (hiModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: llm.AssistantText("hi"), FinishReason: llm.FinishStop}, nil
}

// TestWithoutTokenEvents: an observer registered WithoutTokenEvents gets
// a streamed call's completion but none of its token events, on the
// graph and per invocation, whether or not another observer takes them.
func TestWithoutTokenEvents(t *testing.T) {
	stream := func(ctx context.Context, _ graph.State) (graph.Update, error) {
		_, err := llm.Complete(ctx, llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{{Content: "a"}, {Content: "b", FinishReason: llm.FinishStop}}}),
			&llm.Request{Messages: []llm.Message{llm.UserText("q")}, Stream: true})
		return nil, err
	}
	kinds := func(c *callKinds) (out []string) {
		for _, ev := range c.events() {
			out = append(out, kindOf(ev))
		}
		return out
	}
	want := []string{"node:started", "llm_completion", "node:completed"}
	withTokens := []string{"node:started", "token:a", "token:b", "llm_completion", "node:completed"}
	for _, alsoTokens := range []bool{false, true} {
		g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", stream).AddEdge("n", graph.End).SetEntry("n"))
		var onGraph, onInvoke, all callKinds
		if _, err := g.AddObserver(onGraph.observe, graph.WithoutTokenEvents()); err != nil {
			t.Fatal(err)
		}
		if alsoTokens {
			if _, err := g.AddObserver(all.observe); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(onInvoke.observe, graph.WithoutTokenEvents())); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]*callKinds{"graph observer": &onGraph, "invocation observer": &onInvoke} {
			if got := kinds(c); !slices.Equal(got, want) {
				t.Errorf("alsoTokens=%t: %s got %v, want %v", alsoTokens, name, got, want)
			}
		}
		if got := kinds(&all); alsoTokens && !slices.Equal(got, withTokens) {
			t.Errorf("the observer taking tokens got %v, want %v", got, withTokens)
		}
	}
}

// An observer registered WithoutCallEvents sees the node events and none
// of the call events (model, tool) that another observer of the same
// invocation sees; when it is the invocation's only observer, the calls
// are not instrumented at all (no llm.CallObserver in the node's context,
// no tool scope).
func TestWithoutCallEvents(t *testing.T) {
	var instrumented []bool
	body := func(ctx context.Context, _ graph.State) (graph.Update, error) {
		instrumented = append(instrumented, ctx.Value(llm.CallObserverKey{}) != nil)
		if _, err := llm.Complete(ctx, llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{{Content: "a"}, {Content: "b", FinishReason: llm.FinishStop}}}),
			&llm.Request{Messages: []llm.Message{llm.UserText("q")}, Stream: true}); err != nil {
			return nil, err
		}
		_, err := graph.CallTool(ctx, graph.ToolCall{Name: "t", ID: "c1"}, func(context.Context) (string, error) { return "ok", nil })
		return nil, err
	}
	kinds := func(c *callKinds) (out []string) {
		for _, ev := range c.events() {
			out = append(out, kindOf(ev))
		}
		return out
	}
	nodes := []string{"node:started", "node:completed"}
	calls := []string{"node:started", "token:a", "token:b", "llm_completion", "tool", "node:completed"}
	for _, tc := range []struct {
		name        string
		also, async bool // another observer, taking every event; the opted-out one asynchronous
	}{
		{"alone, synchronous", false, false},
		{"alone, asynchronous", false, true},
		{"beside another", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			instrumented = nil
			g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", body).AddEdge("n", graph.End).SetEntry("n"))
			var nodesOnly, all callKinds
			opts := []graph.ObserverOption{graph.WithoutCallEvents()}
			if !tc.async {
				opts = append(opts, graph.Synchronous())
			}
			if tc.also {
				if _, err := g.AddObserver(all.observe); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(nodesOnly.observe, opts...)); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := kinds(&nodesOnly); !slices.Equal(got, nodes) {
				t.Errorf("the observer without call events got %v, want %v", got, nodes)
			}
			if got := kinds(&all); tc.also && !slices.Equal(got, calls) {
				t.Errorf("the other observer got %v, want %v", got, calls)
			}
			if want := []bool{tc.also}; !slices.Equal(instrumented, want) {
				t.Errorf("calls instrumented: %v, want %v", instrumented, want)
			}
		})
	}
}

// A Synchronous observer has seen each event when the code that emitted
// it goes on (a node sees its own started event observed), sees every
// event of the invocation before Invoke returns (no Drain), one call at
// a time across parallel branches (its unlocked slice would race), in
// the order an asynchronous observer sees them when the run is
// sequential; as an invocation's observer or a graph's.
func TestSynchronousObserver(t *testing.T) {
	var syncGot []graph.Event // no lock: the engine serializes the calls
	syncObs := func(_ context.Context, ev graph.Event) error { syncGot = append(syncGot, ev); return nil }
	seen := func(name string) graph.NodeFunc {
		return func(ctx context.Context, _ graph.State) (graph.Update, error) {
			n := len(syncGot)
			if n == 0 {
				t.Errorf("node %s runs before its started event was observed", name)
			} else if e, ok := syncGot[n-1].(*graph.NodeEvent); !ok || e.NodeName != name || e.Phase != graph.PhaseStarted {
				t.Errorf("node %s runs with %s last observed", name, kindOf(syncGot[n-1]))
			}
			return nil, nil
		}
	}
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", seen("a")).AddNode("b", seen("b")).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"))
	var async callKinds
	if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(syncObs, graph.Synchronous(), graph.InvocationEvents()),
		graph.WithObserver(async.observe, graph.InvocationEvents())); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(syncGot))
	for i, ev := range syncGot {
		got[i] = kindOf(ev)
	}
	want := []string{"invocation:started", "node:started", "node:completed", "node:started", "node:completed", "invocation:completed"}
	if !slices.Equal(got, want) {
		t.Errorf("synchronous observer got %v before Invoke returned, want %v", got, want)
	}
	if _, err := g.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	var asyncKinds []string
	for _, ev := range async.events() {
		asyncKinds = append(asyncKinds, kindOf(ev))
	}
	if !slices.Equal(asyncKinds, want) {
		t.Errorf("asynchronous observer beside it got %v, want %v", asyncKinds, want)
	}

	// Parallel branches: calls never overlap (the race detector checks
	// the unlocked append), and each branch's events come in its order.
	syncGot = nil
	branch := func(name string) graph.Branch {
		return graph.Branch{Name: name, Call: func(ctx context.Context, _ graph.State) (graph.Update, error) {
			for range 10 {
				if _, err := llm.Complete(ctx, llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{{Content: name, FinishReason: llm.FinishStop}}}),
					&llm.Request{Messages: []llm.Message{llm.UserText("q")}, Stream: true}); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}}
	}
	pg, err := graph.NewBuilder(parParentSchema(t)).
		AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{branch("x"), branch("y"), branch("z")}}).
		AddEdge("par", graph.End).SetEntry("par").Compile(graph.WithCallableBranchHead(0)) // the branches overlap
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		syncGot = nil
		if _, err := pg.Invoke(t.Context(), graph.Update{"q": "hi"}, graph.WithObserver(syncObs, graph.Synchronous())); err != nil {
			t.Fatal(err)
		}
		completions := 0
		for _, ev := range syncGot {
			if _, ok := ev.(*graph.LLMCompletionEvent); ok {
				completions++
			}
		}
		if completions != 30 {
			t.Fatalf("%d model completions observed before Invoke returned, want 30", completions)
		}
	}

	// A graph's own observer can be synchronous too.
	syncGot = nil
	if _, err := g.AddObserver(syncObs, graph.Synchronous(), graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if len(syncGot) != len(want) {
		t.Errorf("graph's synchronous observer got %d events before Invoke returned, want %d", len(syncGot), len(want))
	}
}

// TestSynchronousOnlyObservers checks an invocation whose observers are
// all synchronous: no delivery goroutine is started for it, a drain has
// nothing to wait for, and an event a goroutine left behind by a node
// emits after Invoke returned reaches no observer.
func TestSynchronousOnlyObservers(t *testing.T) {
	var (
		mu      sync.Mutex
		got     int
		late    = make(chan struct{})
		drained graph.DrainSummary
	)
	obs := func(context.Context, graph.Event) error {
		mu.Lock()
		got++
		mu.Unlock()
		return nil
	}
	var g *graph.Graph
	node := func(ctx context.Context, _ graph.State) (graph.Update, error) {
		s, err := g.DrainEventsFor(ctx, graph.InvocationID(ctx))
		if err != nil {
			return nil, err
		}
		drained = s
		go func() { // left behind: emits after Invoke returned
			defer close(late)
			time.Sleep(10 * time.Millisecond)
			_, _ = llm.Complete(ctx, llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{{Content: "x", FinishReason: llm.FinishStop}}}),
				&llm.Request{Messages: []llm.Message{llm.UserText("q")}})
		}()
		return nil, nil
	}
	g = mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("a", node).AddEdge("a", graph.End).SetEntry("a"))
	if _, err := g.AddObserver(obs, graph.Synchronous(), graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(obs, graph.Synchronous())); err != nil {
		t.Fatal(err)
	}
	// The node's goroutine may still run; a delivery goroutine would be
	// one more.
	if n := runtime.NumGoroutine(); n > before+1 {
		t.Errorf("%d goroutines after a synchronously observed invocation, want at most %d (no delivery goroutine)", n, before+1)
	}
	if drained != (graph.DrainSummary{}) {
		t.Errorf("DrainEventsFor in the node = %+v, want a zero summary", drained)
	}
	mu.Lock()
	want := got
	mu.Unlock()
	if want != 2*2+2 { // two node events to each observer, two invocation events to the graph's
		t.Errorf("observers got %d events, want 6", want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if s, err := g.Drain(ctx); err != nil || s != (graph.DrainSummary{}) {
		t.Errorf("Drain = %+v, %v; want a zero summary at once", s, err)
	}
	<-late
	mu.Lock()
	defer mu.Unlock()
	if got != want {
		t.Errorf("observers got %d events after Invoke returned", got-want)
	}
}
