package otelobserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// A node span is started lazily: as it ends when nothing needed it while
// its node ran, else when something did (here a tool call's span). Either
// way it exports the same: the started event's time, the invocation span
// as parent, its start attributes, the metadata added while it ran, and
// its outcome, each once. The invocation span, started with the outcome
// completed, ends with its own.
func TestNodeSpanStartedLazilyExportsTheSame(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fail := errors.New("boom")
	for _, tc := range []struct {
		name string // also the invocation's outcome
		end  func(e *graph.NodeEvent)
	}{
		{"completed", func(*graph.NodeEvent) {}},
		{"errored", func(e *graph.NodeEvent) { e.Err, e.ErrorCategory = fail, "node_exception" }},
		{"suspended", func(e *graph.NodeEvent) {
			e.Phase = graph.PhaseSuspended
			e.Descriptor = &graph.SignalDescriptor{SignalID: "sig", Metadata: map[string]any{"k": "v"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes [2]tracetest.SpanStub
			for i, early := range []bool{false, true} {
				h := newHarness(t)
				ss := feedNode(t, h, t0, early, tc.end)
				if n := h.obs.OpenSpans(); n != 0 {
					t.Fatalf("%d spans left open", n)
				}
				var inv tracetest.SpanStub
				for _, s := range ss {
					switch s.Name {
					case otelobserver.InvocationSpanName:
						inv = s
					case "work":
						nodes[i] = s
					}
				}
				if got := attrs(inv)[otelobserver.AttrOutcome].AsString(); got != tc.name {
					t.Errorf("early=%v: invocation outcome %q, want %q", early, got, tc.name)
				}
				unique(t, inv)
				n := nodes[i]
				if n.Parent.SpanID() != inv.SpanContext.SpanID() || n.SpanContext.TraceID() != inv.SpanContext.TraceID() {
					t.Errorf("early=%v: node span not parented under the invocation span", early)
				}
				if !n.StartTime.Equal(t0.Add(time.Millisecond)) || !n.EndTime.Equal(t0.Add(3*time.Millisecond)) {
					t.Errorf("early=%v: node span %v..%v, want the events' times", early, n.StartTime, n.EndTime)
				}
				unique(t, n)
				if got := attrs(n)["openarmature.user.added"].AsString(); got != "mid-run" {
					t.Errorf("early=%v: metadata added while the node ran: %q", early, got)
				}
			}
			lazy, early := nodes[0], nodes[1]
			if diff := cmp.Diff(attrs(early), attrs(lazy), cmp.AllowUnexported(attribute.Value{})); diff != "" {
				t.Errorf("lazily started node span's attributes (-early +lazy):\n%s", diff)
			}
			if lazy.Status != early.Status || len(lazy.Events) != len(early.Events) {
				t.Errorf("status %v / %d events lazily, %v / %d early", lazy.Status, len(lazy.Events), early.Status, len(early.Events))
			}
			want := codes.Ok
			if tc.name == "errored" {
				want = codes.Error
			}
			if lazy.Status.Code != want {
				t.Errorf("status %v, want %v", lazy.Status.Code, want)
			}
		})
	}
}

// unique fails t if s has an attribute key twice.
func unique(t *testing.T, s tracetest.SpanStub) {
	t.Helper()
	seen := map[attribute.Key]bool{}
	for _, a := range s.Attributes {
		if seen[a.Key] {
			t.Errorf("span %s: attribute %s twice", s.Name, a.Key)
		}
		seen[a.Key] = true
	}
}

// feedNode renders one invocation of node "work" (started at t0+1ms,
// ended at t0+3ms by end's changes to a completed event), with metadata
// added while it runs and, when early, a tool call inside it, and returns
// the spans exported.
func feedNode(t *testing.T, h *harness, t0 time.Time, early bool, end func(*graph.NodeEvent)) tracetest.SpanStubs {
	t.Helper()
	const id = "inv-1"
	ns := []string{"work"}
	node := func(p graph.Phase, at time.Time) *graph.NodeEvent {
		return &graph.NodeEvent{Phase: p, NodeName: "work", Namespace: ns, Step: 0, ParentStates: []graph.State{}, InvocationID: id, CorrelationID: "corr", Time: at}
	}
	done := node(graph.PhaseCompleted, t0.Add(3*time.Millisecond))
	end(done)
	added, err := graph.Metadata{}.With(map[string]any{"added": "mid-run"})
	if err != nil {
		t.Fatal(err)
	}
	evs := []graph.Event{
		&graph.InvocationEvent{Phase: graph.PhaseStarted, EntryNode: "work", InvocationID: id, CorrelationID: "corr", SessionID: "s", Time: t0},
		node(graph.PhaseStarted, t0.Add(time.Millisecond)),
		&graph.MetadataEvent{EventSource: graph.EventSource{NodeName: "work", Namespace: ns, FanOutIndexChain: []*int{}, BranchNameChain: []*string{}}, InvocationID: id, Added: added},
	}
	if early {
		src := graph.CallSource{InvocationID: id, CorrelationID: "corr", NodeName: "work", Namespace: ns, CallID: "call-1"}
		evs = append(evs, &graph.ToolCallEvent{CallSource: src, ToolName: "t", Start: t0.Add(time.Millisecond), End: t0.Add(2 * time.Millisecond)})
	}
	status := graph.Completed
	switch {
	case done.Phase == graph.PhaseSuspended:
		status = graph.Suspended
	case done.Err != nil:
		status = graph.Errored
	}
	evs = append(evs, done, &graph.InvocationEvent{Phase: graph.PhaseCompleted, Status: status, Err: done.Err, ErrorCategory: done.ErrorCategory, EntryNode: "work", InvocationID: id, CorrelationID: "corr", SessionID: "s", Time: t0.Add(4 * time.Millisecond)})
	for _, ev := range evs {
		if err := h.obs.Observe(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	return h.exp.GetSpans()
}
