package otelobserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
	"github.com/armature-go/armature/session"
)

type harness struct {
	exp *tracetest.InMemoryExporter
	tp  *sdktrace.TracerProvider
	obs *otelobserver.Observer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{exp: exp, tp: tp, obs: obs}
}

func (h *harness) attach(t *testing.T, g *graph.Graph) {
	t.Helper()
	if _, err := g.AddObserver(h.obs.Observe, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) spans(t *testing.T, g *graph.Graph) tracetest.SpanStubs {
	t.Helper()
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.obs.OpenSpans(); n != 0 {
		t.Fatalf("%d spans left open", n)
	}
	return h.exp.GetSpans()
}

func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func byName(t *testing.T, ss tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q in %d spans", name, len(ss))
	return tracetest.SpanStub{}
}

var x = graph.NewField[int]("x")

func set(v int) graph.NodeFunc {
	return func(context.Context, graph.State) (graph.Update, error) { return x.Set(v), nil }
}

func linear(t *testing.T, opts ...graph.CompileOption) *graph.Graph {
	t.Helper()
	sub, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("inner", set(5)).AddEdge("inner", graph.End).SetEntry("inner").Compile()
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", set(1)).
		AddSubgraph("sub", sub).
		AddNode("b", set(2)).
		AddEdge("a", "sub").AddEdge("sub", "b").AddEdge("b", graph.End).
		SetEntry("a").Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSpanTree(t *testing.T) {
	h := newHarness(t)
	g := linear(t)
	h.attach(t, g)
	res, err := g.Invoke(context.Background(), nil, graph.WithCorrelationID("corr-1"))
	if err != nil {
		t.Fatal(err)
	}
	ss := h.spans(t, g)
	// The invocation; a, sub and b under it; inner under sub (§4.3).
	if len(ss) != 5 {
		t.Fatalf("got %d spans, want 5", len(ss))
	}
	inv := byName(t, ss, otelobserver.InvocationSpanName)
	if inv.Parent.IsValid() {
		t.Error("invocation span has a parent")
	}
	if inv.Status.Code != codes.Ok {
		t.Errorf("invocation status %v", inv.Status)
	}
	ia := attrs(inv)
	if ia[otelobserver.AttrInvocationID].AsString() != res.InvocationID ||
		ia[otelobserver.AttrCorrelationID].AsString() != "corr-1" ||
		ia[otelobserver.AttrEntryNode].AsString() != "a" ||
		ia[otelobserver.AttrOutcome].AsString() != "completed" {
		t.Errorf("invocation attributes %v", ia)
	}
	sub := byName(t, ss, "sub")
	for _, n := range []string{"a", "sub", "inner", "b"} {
		s := byName(t, ss, n)
		want := inv
		if n == "inner" {
			want = sub
		}
		if s.Parent.SpanID() != want.SpanContext.SpanID() {
			t.Errorf("%s: parent is not the %s span", n, want.Name)
		}
		if s.Status.Code != codes.Ok {
			t.Errorf("%s: status %v", n, s.Status)
		}
		a := attrs(s)
		if a[otelobserver.AttrNodeName].AsString() != n || a[otelobserver.AttrCorrelationID].AsString() != "corr-1" {
			t.Errorf("%s: attributes %v", n, a)
		}
		if s.StartTime.Before(inv.StartTime) || s.EndTime.After(inv.EndTime) {
			t.Errorf("%s: span outside the invocation window", n)
		}
	}
	inner := byName(t, ss, "inner")
	if inner.StartTime.Before(sub.StartTime) || inner.EndTime.After(sub.EndTime) {
		t.Error("inner: span outside the subgraph span's window")
	}
	if _, ok := attrs(sub)[otelobserver.AttrSubgraphName]; !ok {
		t.Errorf("sub: no %s", otelobserver.AttrSubgraphName)
	}
	if got := attrs(inner)[otelobserver.AttrNodeNamespace].AsStringSlice(); strings.Join(got, "/") != "sub/inner" {
		t.Errorf("inner namespace %v", got)
	}
	if _, ok := attrs(inv)[otelobserver.AttrSessionID]; ok {
		t.Error("session_id on a non-session invocation")
	}
}

func TestErrorStatus(t *testing.T) {
	h := newHarness(t)
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("boom", func(context.Context, graph.State) (graph.Update, error) { return nil, errors.New("kaput") }).
		AddEdge("boom", graph.End).SetEntry("boom").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err == nil {
		t.Fatal("want an error")
	}
	ss := h.spans(t, g)
	node := byName(t, ss, "boom")
	if node.Status.Code != codes.Error || node.Status.Description != "node_exception" {
		t.Errorf("node status %v", node.Status)
	}
	if attrs(node)[otelobserver.AttrErrorCategory].AsString() != "node_exception" {
		t.Errorf("node attributes %v", attrs(node))
	}
	if len(node.Events) == 0 || node.Events[0].Name != "exception" {
		t.Errorf("no exception event: %v", node.Events)
	}
	inv := byName(t, ss, otelobserver.InvocationSpanName)
	if inv.Status.Code != codes.Error || attrs(inv)[otelobserver.AttrOutcome].AsString() != "errored" {
		t.Errorf("invocation %v %v", inv.Status, attrs(inv))
	}
}

func TestSuspendedOutcome(t *testing.T) {
	h := newHarness(t)
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("gate", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig-1", Metadata: map[string]any{
				"kind": "approval", "level": 2, "tags": []any{"a", "b"}, "nested": map[string]any{"k": true},
			}})
		}).
		AddEdge("gate", graph.End).SetEntry("gate").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	res, err := g.Invoke(context.Background(), nil)
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("got %v, %v", res, err)
	}
	ss := h.spans(t, g)
	inv := byName(t, ss, otelobserver.InvocationSpanName)
	if inv.Status.Code != codes.Ok || attrs(inv)[otelobserver.AttrOutcome].AsString() != "suspended" {
		t.Errorf("invocation %v %v", inv.Status, attrs(inv))
	}
	if _, ok := attrs(inv)[otelobserver.AttrSuspensionSignalID]; ok {
		t.Error("suspension attributes on the invocation span")
	}
	node := attrs(byName(t, ss, "gate"))
	want := map[string]any{
		otelobserver.AttrOutcome:                               "suspended",
		otelobserver.AttrSuspensionSignalID:                    "sig-1",
		otelobserver.AttrSuspensionMetadataPrefix + "kind":     "approval",
		otelobserver.AttrSuspensionMetadataPrefix + "level":    int64(2),
		otelobserver.AttrSuspensionMetadataPrefix + "tags":     []string{"a", "b"},
		otelobserver.AttrSuspensionMetadataPrefix + "nested.k": true,
	}
	for k, v := range want {
		got, ok := node[k]
		if !ok {
			t.Errorf("missing %s", k)
			continue
		}
		if g := got.AsInterface(); !equal(g, v) {
			t.Errorf("%s = %#v, want %#v", k, g, v)
		}
	}
}

func equal(a, b any) bool {
	as, ok1 := a.([]string)
	bs, ok2 := b.([]string)
	if ok1 && ok2 {
		return strings.Join(as, ",") == strings.Join(bs, ",")
	}
	return a == b
}

func TestSessionAttribute(t *testing.T) {
	store := session.NewMemoryStore(session.MemoryConfig{})
	for _, sid := range []string{"s12", ""} {
		t.Run("session="+sid, func(t *testing.T) {
			h := newHarness(t)
			g := linear(t, graph.WithSessions(graph.SessionConfig{Store: store}))
			h.attach(t, g)
			var opts []graph.InvokeOption
			if sid != "" {
				opts = append(opts, graph.WithSessionID(sid))
			}
			if _, err := g.Invoke(context.Background(), nil, opts...); err != nil {
				t.Fatal(err)
			}
			for _, s := range h.spans(t, g) {
				v, ok := attrs(s)[otelobserver.AttrSessionID]
				if sid == "" && ok {
					t.Errorf("%s: session_id present", s.Name)
				}
				if sid != "" && v.AsString() != sid {
					t.Errorf("%s: session_id %q", s.Name, v.AsString())
				}
			}
		})
	}
}

func TestNoGlobalProvider(t *testing.T) {
	if _, err := otelobserver.New(otelobserver.Config{}); !errors.Is(err, otelobserver.ErrNoTracerProvider) {
		t.Fatalf("nil provider: %v", err)
	}
	global := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(global) })
	before := otel.GetTracerProvider()
	h := newHarness(t)
	g := linear(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(h.spans(t, g)) != 5 {
		t.Error("spans did not reach the private provider")
	}
	if otel.GetTracerProvider() != before {
		t.Error("the global provider was replaced")
	}
}

func TestIgnoresOtherEventsAndClosesOpenSpans(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	type other struct{ graph.Event }
	if err := h.obs.Observe(ctx, other{}); err != nil {
		t.Fatal(err)
	}
	_ = h.obs.Observe(ctx, &graph.InvocationEvent{Phase: graph.PhaseStarted, InvocationID: "i"})
	_ = h.obs.Observe(ctx, &graph.NodeEvent{Phase: graph.PhaseStarted, InvocationID: "i", NodeName: "n", Namespace: []string{"n"}})
	_ = h.obs.Observe(ctx, &graph.InvocationEvent{Phase: graph.PhaseCompleted, InvocationID: "i", Status: graph.Completed})
	if n := h.obs.OpenSpans(); n != 0 {
		t.Fatalf("%d spans open", n)
	}
	if got := len(h.exp.GetSpans()); got != 2 {
		t.Fatalf("%d spans exported, want 2", got)
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(otelobserver.LogHandler(slog.NewTextHandler(&buf, nil)))
	store := session.NewMemoryStore(session.MemoryConfig{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, "hello")
			return nil, nil
		}).
		AddEdge("a", graph.End).SetEntry("a").Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Invoke(context.Background(), nil, graph.WithSessionID("s1"), graph.WithCorrelationID("c1"))
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"msg=hello", "openarmature.invocation_id=" + res.InvocationID,
		"openarmature.correlation_id=c1", "openarmature.session_id=s1"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	buf.Reset()
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "session_id") || !strings.Contains(buf.String(), "openarmature.correlation_id=") {
		t.Errorf("unbound log %q", buf.String())
	}
	buf.Reset()
	logger.InfoContext(context.Background(), "outside")
	if strings.Contains(buf.String(), "openarmature.") {
		t.Errorf("outside an invocation: %q", buf.String())
	}
}

// Each fan-out instance is a span named after the fan-out node under the
// fan-out node's span, carrying openarmature.node.fan_out_index and the
// parent node name; the instance's nodes nest under it (§4.3, §5.4).
func TestFanOutParenting(t *testing.T) {
	h := newHarness(t)
	result := graph.NewField[int]("result")
	results := graph.NewListField[int]("results", graph.Append)
	leaf, err := graph.NewBuilder(graph.MustSchema(result)).
		AddNode("leaf", func(context.Context, graph.State) (graph.Update, error) { return result.Set(1), nil }).
		AddEdge("leaf", graph.End).SetEntry("leaf").Compile()
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(graph.MustSchema(results)).
		AddFanOut("fan", graph.FanOut{Subgraph: leaf, Count: graph.Fixed(3), CollectField: "result", TargetField: "results", Unbounded: true}).
		AddEdge("fan", graph.End).SetEntry("fan").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ss := h.spans(t, g)
	var fan tracetest.SpanStub
	instances := map[[8]byte]int64{}
	for _, s := range ss {
		if s.Name == "fan" && !s.Parent.IsValid() {
			t.Fatal("fan span without a parent")
		}
		if s.Name == "fan" {
			if _, ok := attrs(s)[otelobserver.AttrFanOutItemCount]; ok {
				fan = s
			}
		}
	}
	fa := attrs(fan)
	if fa[otelobserver.AttrFanOutItemCount].AsInt64() != 3 || fa[otelobserver.AttrFanOutConcurrency].AsInt64() != 0 ||
		fa[otelobserver.AttrFanOutErrorPolicy].AsString() != "fail_fast" {
		t.Errorf("fan-out node attributes %v", fa)
	}
	for _, s := range ss {
		if s.Name == "fan" && s.Parent.SpanID() == fan.SpanContext.SpanID() {
			a := attrs(s)
			if a[otelobserver.AttrFanOutParentNodeName].AsString() != "fan" {
				t.Errorf("instance attributes %v", a)
			}
			instances[s.SpanContext.SpanID()] = a[otelobserver.AttrNodeFanOutIndex].AsInt64()
		}
	}
	if len(instances) != 3 {
		t.Fatalf("%d instance spans, want 3", len(instances))
	}
	seen := map[int64]bool{}
	for _, s := range ss {
		if s.Name != "leaf" {
			continue
		}
		idx, ok := instances[s.Parent.SpanID()]
		if !ok {
			t.Fatal("leaf: parent is not an instance span")
		}
		if got := attrs(s)[otelobserver.AttrNodeFanOutIndex].AsInt64(); got != idx {
			t.Errorf("leaf of instance %d has fan_out_index %d", idx, got)
		}
		seen[idx] = true
	}
	if len(seen) != 3 {
		t.Errorf("fan_out_index values %v, want 0..2", seen)
	}
}
