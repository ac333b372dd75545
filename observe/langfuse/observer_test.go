package langfuse_test

import (
	"context"
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
