package otelobserver_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// A node span starts lazily: as its node ends when nothing needed it
// while the node ran, with the spans of the node's calls (here a tool's)
// started and ended under it then; else when something did (here a log
// record, which names the span). Either way the spans export the same:
// the node span under the invocation span, the tool span under the node
// span, within it, the metadata added while the node ran, and the
// outcome, each attribute once. The invocation span, which starts with
// the outcome completed, ends with its own.
func TestNodeSpanStartedLazilyExportsTheSame(t *testing.T) {
	for _, outcome := range []string{"completed", "errored", "suspended"} {
		t.Run(outcome, func(t *testing.T) {
			type rendering struct {
				Node, Tool     map[string]attribute.Value
				NodeStatus     codes.Code
				NodeEvents     int
				ToolUnderNode  bool
				NodeUnderInv   bool
				ToolWithinNode bool
			}
			var got [2]rendering
			for i, early := range []bool{false, true} {
				ss := runWorkNode(t, outcome, early)
				inv := byName(t, ss, otelobserver.InvocationSpanName)
				node, tool := byName(t, ss, "work"), byName(t, ss, otelobserver.ToolSpanName)
				for _, s := range []tracetest.SpanStub{inv, node, tool} {
					unique(t, s)
				}
				if o := attrs(inv)[otelobserver.AttrOutcome].AsString(); o != outcome {
					t.Errorf("early=%v: invocation outcome %q, want %q", early, o, outcome)
				}
				got[i] = rendering{
					Node: idless(attrs(node)), Tool: idless(attrs(tool)),
					NodeStatus: node.Status.Code, NodeEvents: len(node.Events),
					ToolUnderNode:  tool.Parent.SpanID() == node.SpanContext.SpanID(),
					NodeUnderInv:   node.Parent.SpanID() == inv.SpanContext.SpanID(),
					ToolWithinNode: !tool.StartTime.Before(node.StartTime) && !tool.EndTime.After(node.EndTime),
				}
			}
			if diff := cmp.Diff(got[1], got[0], cmp.AllowUnexported(attribute.Value{})); diff != "" {
				t.Errorf("spans of a lazily started node span (-early +lazy):\n%s", diff)
			}
			lazy := got[0]
			if !lazy.ToolUnderNode || !lazy.NodeUnderInv || !lazy.ToolWithinNode {
				t.Errorf("parentage or timing: %+v", lazy)
			}
			if o := lazy.Node[otelobserver.AttrOutcome].AsString(); o != outcome {
				t.Errorf("node outcome %q, want %q", o, outcome)
			}
			if v := lazy.Node[otelobserver.AttrUserPrefix+"added"].AsString(); v != "mid-run" {
				t.Errorf("metadata added while the node ran: %q", v)
			}
			if want := map[bool]codes.Code{true: codes.Error, false: codes.Ok}[outcome == "errored"]; lazy.NodeStatus != want {
				t.Errorf("node status %v, want %v", lazy.NodeStatus, want)
			}
		})
	}
}

// runWorkNode invokes a one-node graph whose node "work" adds metadata,
// calls a tool and ends with outcome; when early it first logs through
// the observer's LogHandler. It returns the spans exported.
func runWorkNode(t *testing.T, outcome string, early bool) tracetest.SpanStubs {
	t.Helper()
	h := newHarness(t)
	logger := slog.New(h.obs.LogHandler(slog.DiscardHandler))
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("work", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			if early {
				logger.InfoContext(ctx, "names the node's span")
			}
			if err := graph.SetInvocationMetadata(ctx, map[string]any{"added": "mid-run"}); err != nil {
				return nil, err
			}
			if _, err := graph.CallTool(ctx, graph.ToolCall{Name: "lookup", ID: "call-1"}, func(context.Context) (string, error) { return "ok", nil }); err != nil {
				return nil, err
			}
			switch outcome {
			case "errored":
				return nil, errors.New("boom")
			case "suspended":
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig", Metadata: map[string]any{"k": "v"}})
			}
			return nil, nil
		}).
		AddEdge("work", graph.End).SetEntry("work").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	_, _ = g.Invoke(context.Background(), nil)
	return h.spans(t, g)
}

// idless returns m without the ids that differ between invocations.
func idless(m map[string]attribute.Value) map[string]attribute.Value {
	delete(m, otelobserver.AttrInvocationID)
	delete(m, otelobserver.AttrCorrelationID)
	return m
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
