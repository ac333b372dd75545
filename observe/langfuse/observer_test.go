package langfuse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// seqIDs is a deterministic id generator.
type seqIDs struct {
	mu sync.Mutex
	n  int
}

func (s *seqIDs) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("id-%04d", s.n)
}

type harness struct {
	srv    *langfusetest.Server
	client *langfuse.Client
	obs    *langfuse.Observer
}

func newHarness(t *testing.T, cfg langfuse.Config) *harness {
	t.Helper()
	srv := langfusetest.NewServer()
	t.Cleanup(srv.Close)
	client, err := langfuse.NewClient(srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Shutdown(context.Background()) })
	ids := &seqIDs{}
	cfg.Exporter = client
	cfg.NewID = ids.next
	cfg.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	obs, err := langfuse.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{srv: srv, client: client, obs: obs}
}

func (h *harness) attach(t *testing.T, g *graph.Graph) {
	t.Helper()
	if _, err := g.AddObserver(h.obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
}

// traces drains g, flushes the client and returns what the server rebuilt.
func (h *harness) traces(t *testing.T, g *graph.Graph) []*langfusetest.Trace {
	t.Helper()
	ctx := context.Background()
	if _, err := g.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.obs.OpenObservations(); n != 0 {
		t.Fatalf("%d observations left open", n)
	}
	if err := h.obs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if p := h.srv.Problems(); len(p) > 0 {
		t.Fatalf("ingestion API problems: %v", p)
	}
	return h.srv.Traces()
}

var x = graph.NewField[int]("x")

func set(v int) graph.NodeFunc {
	return func(context.Context, graph.State) (graph.Update, error) { return x.Set(v), nil }
}

func linear(t *testing.T) *graph.Graph {
	t.Helper()
	sub, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("inner", set(5)).AddEdge("inner", graph.End).SetEntry("inner").Compile(graph.WithName("inner_graph"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", set(1)).
		AddSubgraph("sub", sub).
		AddNode("b", set(2)).
		AddEdge("a", "sub").AddEdge("sub", "b").AddEdge("b", graph.End).
		SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func names(os []*langfusetest.Observation) string {
	var out []string
	for _, o := range os {
		s := o.Type + ":" + o.Name()
		if len(o.Children) > 0 {
			s += "(" + names(o.Children) + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestTraceTree(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	g := linear(t)
	h.attach(t, g)
	res, err := g.Invoke(context.Background(), nil, graph.WithCorrelationID("corr-1"),
		graph.WithMetadata(map[string]any{"userId": "u-1", "tenantId": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	trs := h.traces(t, g)
	if len(trs) != 1 {
		t.Fatalf("got %d traces", len(trs))
	}
	tr := trs[0]
	if want := strings.ReplaceAll(res.InvocationID, "-", ""); tr.ID != want {
		t.Errorf("trace id %s, want %s", tr.ID, want)
	}
	if got := names(tr.Observations); got != "span:a span:sub(span:inner) span:b" {
		t.Errorf("tree %s", got)
	}
	if tr.Fields["name"] != "a" || tr.Fields["userId"] != "u-1" {
		t.Errorf("trace fields %v", tr.Fields)
	}
	md := tr.Metadata()
	for k, v := range map[string]any{"correlation_id": "corr-1", "entry_node": "a", "tenantId": "acme", "userId": "u-1",
		"implementation_name": "armature-go"} {
		if md[k] != v {
			t.Errorf("trace metadata %s = %v, want %v", k, md[k], v)
		}
	}
	out, _ := tr.Fields["output"].(map[string]any)
	if out["final_node"] != "b" || out["status"] != "completed" {
		t.Errorf("trace output %v", tr.Fields["output"])
	}
	sub := tr.Observations[1]
	if m := sub.Metadata(); m["subgraph_name"] != "inner_graph" || m["step"] != int64(1) || m["tenantId"] != "acme" {
		t.Errorf("subgraph metadata %v", m)
	}
	if sub.Fields["level"] != "DEFAULT" || sub.Fields["endTime"] == nil {
		t.Errorf("subgraph fields %v", sub.Fields)
	}
}

func TestNodeFailure(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return nil, errors.New("boom") }).
		AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	_, _ = g.Invoke(context.Background(), nil)
	tr := h.traces(t, g)[0]
	a := tr.Observations[0]
	if a.Fields["level"] != "ERROR" || a.Fields["statusMessage"] != "node_exception" {
		t.Errorf("failed node %v", a.Fields)
	}
	if out, _ := tr.Fields["output"].(map[string]any); out["status"] != "failed" || out["final_node"] != "a" {
		t.Errorf("trace output %v", tr.Fields["output"])
	}
}

func fanOutGraph(t *testing.T) *graph.Graph {
	t.Helper()
	leafSchema := graph.MustSchema(graph.NewDynamicField("item", graph.TypeInt), graph.NewDynamicField("result", graph.TypeAny))
	leaf, err := graph.NewBuilder(leafSchema).
		AddNode("work", func(_ context.Context, s graph.State) (graph.Update, error) {
			i, _ := s.Get("item")
			return graph.Update{"result": i.(int) * 2}, nil
		}).AddEdge("work", graph.End).SetEntry("work").Compile(graph.WithName("leaf"))
	if err != nil {
		t.Fatal(err)
	}
	parent := graph.MustSchema(graph.NewDynamicField("items", graph.ListOf(graph.TypeInt)),
		graph.NewDynamicField("results", graph.ListOf(nil), graph.WithReducer(graph.Append)))
	g, err := graph.NewBuilder(parent).
		AddFanOut("fan", graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "item", CollectField: "result",
			TargetField: "results", Concurrency: graph.Fixed(2)}).
		AddEdge("fan", graph.End).SetEntry("fan").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestFanOutInstances(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	g := fanOutGraph(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), graph.Update{"items": []any{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	tr := h.traces(t, g)[0]
	if got := names(tr.Observations); got != "span:fan(span:fan(span:work) span:fan(span:work) span:fan(span:work))" {
		t.Fatalf("tree %s", got)
	}
	fan := tr.Observations[0]
	if m := fan.Metadata(); m["fan_out_item_count"] != int64(3) || m["fan_out_concurrency"] != int64(2) || m["fan_out_error_policy"] != "fail_fast" {
		t.Errorf("fan-out metadata %v", m)
	}
	seen := map[any]bool{}
	for _, inst := range fan.Children {
		m := inst.Metadata()
		if m["fan_out_parent_node_name"] != "fan" || m["subgraph_name"] != "leaf" {
			t.Errorf("instance metadata %v", m)
		}
		seen[m["fan_out_index"]] = true
		if w := inst.Children[0].Metadata(); w["fan_out_index"] != m["fan_out_index"] {
			t.Errorf("inner node index %v under instance %v", w["fan_out_index"], m["fan_out_index"])
		}
	}
	if len(seen) != 3 {
		t.Errorf("instance indices %v", seen)
	}
}

func TestDetachedFanOut(t *testing.T) {
	h := newHarness(t, langfuse.Config{DetachedFanOuts: []string{"fan"}})
	g := fanOutGraph(t)
	h.attach(t, g)
	res, err := g.Invoke(context.Background(), graph.Update{"items": []any{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	trs := h.traces(t, g)
	if len(trs) != 3 {
		t.Fatalf("%d traces, want the parent and one per instance", len(trs))
	}
	fan := trs[0].Observations[0]
	ids, _ := fan.Metadata()["detached_child_trace_ids"].([]any)
	if len(ids) != 2 || fan.Metadata()["detached"] != true || len(fan.Children) != 0 {
		t.Fatalf("dispatch %v with children %s", fan.Metadata(), names(fan.Children))
	}
	for i, tr := range trs[1:] {
		if ids[i] != tr.ID {
			t.Errorf("detached_child_trace_ids[%d] = %v, trace %s", i, ids[i], tr.ID)
		}
		if tr.Metadata()["detached_from_invocation_id"] != res.InvocationID || tr.Metadata()["correlation_id"] != trs[0].Metadata()["correlation_id"] {
			t.Errorf("detached trace metadata %v", tr.Metadata())
		}
		if got := names(tr.Observations); got != "span:fan(span:work)" {
			t.Errorf("detached trace tree %s", got)
		}
	}
}

func TestTraceIOHooksAndStatePayload(t *testing.T) {
	summary := func(graph.State) any { return map[string]any{"summary": "s"} }
	none := func(graph.State) any { return nil }
	for _, tc := range []struct {
		name          string
		cfg           langfuse.Config
		wantIn, wantO string
	}{
		{"stub", langfuse.Config{}, `{"correlation_id":"c","entry_node":"a"}`, `{"final_node":"b","status":"completed"}`},
		{"raw state", langfuse.Config{CaptureStatePayload: true}, `{"x":7}`, `{"x":2}`},
		{"hooks", langfuse.Config{TraceInputFromState: summary, TraceOutputFromState: summary}, `{"summary":"s"}`, `{"summary":"s"}`},
		{"null hooks", langfuse.Config{TraceInputFromState: none, TraceOutputFromState: none}, `{"correlation_id":"c","entry_node":"a"}`, `{"final_node":"b","status":"completed"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			g, err := graph.NewBuilder(graph.MustSchema(x)).AddNode("a", set(1)).AddNode("b", set(2)).
				AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
			if err != nil {
				t.Fatal(err)
			}
			h.attach(t, g)
			if _, err := g.Invoke(context.Background(), graph.Update{"x": 7}, graph.WithCorrelationID("c")); err != nil {
				t.Fatal(err)
			}
			tr := h.traces(t, g)[0]
			in, _ := json.Marshal(tr.Fields["input"])
			out, _ := json.Marshal(tr.Fields["output"])
			if string(in) != tc.wantIn || string(out) != tc.wantO {
				t.Errorf("input %s output %s, want %s %s", in, out, tc.wantIn, tc.wantO)
			}
		})
	}
}

func TestTraceNames(t *testing.T) {
	h := newHarness(t, langfuse.Config{TraceName: func(e *graph.InvocationEvent) string { return "resolved-" + e.EntryNode }})
	g := linear(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if tr := h.traces(t, g)[0]; tr.Fields["name"] != "resolved-a" {
		t.Errorf("name %v", tr.Fields["name"])
	}

	h2 := newHarness(t, langfuse.Config{})
	g2 := linear(t)
	if _, err := g2.Invoke(context.Background(), nil, graph.WithObserver(h2.obs.Labeled("nightly"), graph.InvocationEvents())); err != nil {
		t.Fatal(err)
	}
	if tr := h2.traces(t, g2)[0]; tr.Fields["name"] != "nightly" || len(tr.Observations) != 3 {
		t.Errorf("labeled trace %v %s", tr.Fields["name"], names(tr.Observations))
	}
}

func TestTraceIDDerivation(t *testing.T) {
	for in, want := range map[string]string{
		"550e8400-e29b-41d4-a716-446655440000": "550e8400e29b41d4a716446655440000",
		"550E8400E29B41D4A716446655440000":     "550e8400e29b41d4a716446655440000",
		"run_abc123":                           "29b50a6c08dabfeaeb1696301f4fabe1",
	} {
		if got := langfuse.TraceID(in); got != want {
			t.Errorf("TraceID(%q) = %s, want %s", in, got, want)
		}
	}
	h := newHarness(t, langfuse.Config{})
	g := linear(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil, graph.WithInvocationID("run_abc123")); err != nil {
		t.Fatal(err)
	}
	tr := h.traces(t, g)[0]
	if tr.ID != "29b50a6c08dabfeaeb1696301f4fabe1" || tr.Metadata()["invocation_id"] != "run_abc123" {
		t.Errorf("trace %s metadata %v", tr.ID, tr.Metadata())
	}
}

// TestDeterministic: with injected ids and clock, and the graph's clock,
// two runs with the same invocation and correlation ids send the same
// events.
func TestDeterministic(t *testing.T) {
	run := func() string {
		rec := &langfusetest.Recorder{}
		ids := &seqIDs{}
		obs, err := langfuse.New(langfuse.Config{Exporter: rec, NewID: ids.next,
			Now: func() time.Time { return time.Unix(0, 0) }})
		if err != nil {
			t.Fatal(err)
		}
		tick := time.Unix(100, 0)
		g, err := graph.NewBuilder(graph.MustSchema(x)).AddNode("a", set(1)).AddNode("b", set(2)).
			AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").
			Compile(graph.WithClock(func() time.Time { tick = tick.Add(time.Millisecond); return tick }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Invoke(context.Background(), nil, graph.WithInvocationID("inv-1"), graph.WithCorrelationID("c-1")); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rec.Events())
		return string(b)
	}
	if a, b := run(), run(); a != b {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}

func TestOwnedClient(t *testing.T) {
	if _, err := langfuse.New(langfuse.Config{}); !errors.Is(err, langfuse.ErrNoExporter) {
		t.Errorf("New without a client = %v", err)
	}
	if _, err := langfuse.New(langfuse.Config{Exporter: &langfusetest.Recorder{}, PayloadMaxBytes: 10}); !errors.Is(err, langfuse.ErrInvalidConfig) {
		t.Errorf("New with a tiny cap = %v", err)
	}
	srv := langfusetest.NewServer()
	defer srv.Close()
	obs, err := langfuse.New(langfuse.Config{Client: srv.ClientConfig()})
	if err != nil {
		t.Fatal(err)
	}
	client, ok := obs.Exporter().(*langfuse.Client)
	if !ok {
		t.Fatalf("exporter %T", obs.Exporter())
	}
	g := linear(t)
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := obs.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(srv.Traces()) != 1 || client.Stats().Sent == 0 {
		t.Errorf("traces %d stats %+v", len(srv.Traces()), client.Stats())
	}
	// The owned client is shut down: later exports are dropped.
	client.Export(events(1))
	if client.Stats().Dropped != 1 {
		t.Errorf("stats %+v", client.Stats())
	}
}

// TestSuppliedClientNotShutDown: a caller-supplied client is flushed,
// never shut down, by the observer (§8.9 mode a).
func TestSuppliedClientNotShutDown(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	client, err := langfuse.NewClient(srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Shutdown(context.Background()) }()
	obs, err := langfuse.New(langfuse.Config{Exporter: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	client.Export(events(1))
	if err := client.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := client.Stats(); s.Sent != 1 || s.Dropped != 0 {
		t.Errorf("the supplied client was shut down: %+v", s)
	}
}
