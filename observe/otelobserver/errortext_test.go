package otelobserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/observe/otelobserver"
)

// leakMarker is in the failed calls' payloads and error texts only.
const leakMarker = "ARGLEAK-4111"

// spanTexts is everything of s an exporter sends besides its ids: name,
// attributes, status and its events' names and attributes.
func spanTexts(s tracetest.SpanStub) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%v|%s|%s", s.Name, s.Attributes, s.Status.Code, s.Status.Description)
	for _, e := range s.Events {
		fmt.Fprintf(&b, "|%s %v", e.Name, e.Attributes)
	}
	for _, l := range s.Links {
		fmt.Fprintf(&b, "|link %v", l.Attributes)
	}
	return b.String()
}

// exception returns the attributes of s's exception event.
func exception(t *testing.T, s tracetest.SpanStub) map[string]string {
	t.Helper()
	for _, e := range s.Events {
		if e.Name == "exception" {
			m := map[string]string{}
			for _, kv := range e.Attributes {
				m[string(kv.Key)] = kv.Value.AsString()
			}
			return m
		}
	}
	t.Fatalf("span %s has no exception event: %v", s.Name, s.Events)
	return nil
}

// TestFailedSpansWithholdErrorText: without CaptureProviderPayload a
// failed tool call (an agent tool's ArgumentsError, quoting the
// arguments), a failed LLM call (a provider error quoting the request)
// and the node and invocation their errors fail leave no trace of the
// errors' text in any span (attributes, status, events): each failed
// span is ERROR with its category or type and an exception event of the
// error's type and a fixed message. With capture on, the exception
// events carry the text.
func TestFailedSpansWithholdErrorText(t *testing.T) {
	refund := agent.MustTool("refund", "refund", func(context.Context, struct {
		Card string `json:"card"`
	}) (string, error) {
		return "done", nil
	})
	provErr := &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: "openai", Op: "complete", StatusCode: 400,
		Message: "invalid value for messages[0].content: 'card " + leakMarker + "'"}
	g, err := graph.NewBuilder(graph.MustSchema(x)).AddNode("ask", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		args := map[string]any{"card": map[string]any{"card": leakMarker}}
		raw, _ := json.Marshal(args)
		_, toolErr := graph.CallTool(ctx, graph.ToolCall{Name: "refund", ID: "c1", Arguments: args},
			func(ctx context.Context) (string, error) { return refund.Call(ctx, raw) })
		if !strings.Contains(fmt.Sprint(toolErr), leakMarker) {
			t.Errorf("the tool error does not quote the arguments: %v", toolErr)
		}
		_, llmErr := llm.Complete(ctx, llmtest.New(llmtest.Step{Err: provErr}), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
		return nil, errors.Join(toolErr, llmErr)
	}).AddEdge("ask", graph.End).SetEntry("ask").Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%t", capture), func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp, CaptureProviderPayload: capture})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(obs.Observe, graph.InvocationEvents())); !strings.Contains(fmt.Sprint(err), leakMarker) {
				t.Fatalf("the invocation's error does not carry the marker: %v", err)
			}
			if _, err := g.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			wants := []struct{ span, typ, msg string }{
				{otelobserver.ToolSpanName, "*agent.ArgumentsError", "the tool call failed"},
				{otelobserver.LLMSpanName, "*llm.ProviderError", "the provider call failed"},
				{"ask", "*graph.NodeError", "the node failed"},
				{otelobserver.InvocationSpanName, "", "the invocation failed"},
			}
			for _, w := range wants {
				s := byName(t, spans, w.span)
				if s.Status.Code.String() != "Error" || s.Status.Description == "" || strings.Contains(s.Status.Description, leakMarker) {
					t.Errorf("%s: status %v", w.span, s.Status)
				}
				ex := exception(t, s)
				if w.typ != "" && ex["exception.type"] != w.typ {
					t.Errorf("%s: exception.type %q, want %q", w.span, ex["exception.type"], w.typ)
				}
				switch msg := ex["exception.message"]; {
				case capture && !strings.Contains(msg, leakMarker):
					t.Errorf("%s with capture: exception.message %q lacks the error's text", w.span, msg)
				case !capture && msg != w.msg:
					t.Errorf("%s: exception.message %q, want %q", w.span, msg, w.msg)
				}
			}
			if capture {
				return
			}
			for _, s := range spans {
				if txt := spanTexts(s); strings.Contains(txt, leakMarker) {
					t.Errorf("span %s carries the marker: %s", s.Name, txt)
				}
			}
		})
	}
}
