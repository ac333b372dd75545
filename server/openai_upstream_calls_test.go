package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// TestModelCallWithoutIDIsUpstreamFault: a model whose answer calls a
// tool without an id (or without a name) is the upstream's fault: the
// OpenAI endpoints answer 502 provider_invalid_response, as the ADK-Go
// and Eino adapters do for the same upstream answer
// (adapter.CheckToolCalls), not 400 provider_invalid_request, which
// would blame the client's request for the model's answer.
func TestModelCallWithoutIDIsUpstreamFault(t *testing.T) {
	for _, tc := range []struct {
		name string
		call llm.ToolCall
	}{
		{"no id", llm.ToolCall{Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}},
		{"no name", llm.ToolCall{ID: "call_1", Arguments: json.RawMessage(`{}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := agent.New(agent.Config{Provider: llmtest.New(llmtest.CallTools(tc.call), llmtest.Reply("done")), Tools: demo.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			ts := newOpenAIServerWith(t, a)
			var e apiError
			resp := call(t, ts, http.MethodPost, "/v1/chat/completions", userBody("demo", "where is order 7?"), nil, &e)
			if resp.StatusCode != http.StatusBadGateway || e.Error.Code != "provider_invalid_response" {
				t.Errorf("got %d %+v; want 502 provider_invalid_response (the model's answer is at fault, not the request)", resp.StatusCode, e.Error)
			}
		})
	}
}

// unknownToolAgent calls a tool nobody declared, then answers "done".
func unknownToolAgent(t *testing.T) *agent.Agent {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: llmtest.New(
		llmtest.CallTools(llm.ToolCall{ID: "call_1", Name: "nope_tool", Arguments: json.RawMessage(`{}`)}),
		llmtest.Reply("done")), Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestResponsesStreamUnknownTool: a streamed response whose agent called
// an undeclared tool streams the failed call as an mcp_call item and the
// answer once, at the output indexes of response.completed. The native
// agent reports such a call failed without reporting it running first;
// the stream opens the call's item for it, so the answer is not streamed
// a second time at another index.
func TestResponsesStreamUnknownTool(t *testing.T) {
	ts := newOpenAIServerWith(t, unknownToolAgent(t))
	evs := readRespSSE(t, postStream(t, ts, `{"model": "demo", "stream": true, "input": "hi"}`))
	var deltas strings.Builder
	streamed := map[int]string{} // output_index -> item type, from output_item.added
	var final []any
	for _, e := range evs {
		switch e.name {
		case "response.output_text.delta":
			deltas.WriteString(e.data["delta"].(string))
		case "response.output_item.added":
			streamed[int(e.data["output_index"].(float64))] = e.data["item"].(map[string]any)["type"].(string)
		case "response.completed":
			final, _ = e.data["response"].(map[string]any)["output"].([]any)
		}
	}
	if deltas.String() != "done" {
		t.Errorf("streamed text %q, want %q once", deltas.String(), "done")
	}
	if len(streamed) != len(final) {
		t.Errorf("stream added %d items %v; response.completed has %d", len(streamed), streamed, len(final))
	}
	for i, it := range final {
		if typ := it.(map[string]any)["type"]; streamed[i] != typ {
			t.Errorf("output %d: streamed as %q, completed as %q", i, streamed[i], typ)
		}
	}
}

// TestGetFailedMCPCall: GET /v1/responses/{id} answers the response the
// POST answered: a tool call that failed is an mcp_call of status failed
// with its error there (from the run's recorded tool result), never
// completed with the error text as its output.
func TestGetFailedMCPCall(t *testing.T) {
	ts := newOpenAIServerWith(t, unknownToolAgent(t))
	r, resp, e := respond(t, ts, `{"model": "demo", "input": "hi"}`, nil)
	if resp.StatusCode != http.StatusOK || len(r.Output) == 0 || r.Output[0].Type != "mcp_call" {
		t.Fatalf("%d %+v %+v", resp.StatusCode, r, e)
	}
	if r.Output[0].Status != "failed" || r.Output[0].Error == nil {
		t.Fatalf("POST: mcp_call %+v, want failed", r.Output[0])
	}
	var g responseObj
	if resp := call(t, ts, http.MethodGet, "/v1/responses/"+r.ID, "", nil, &g); resp.StatusCode != http.StatusOK || len(g.Output) == 0 {
		t.Fatalf("GET %d %+v", resp.StatusCode, g)
	}
	if it := g.Output[0]; it.Status != "failed" || it.Error == nil || it.Output != nil {
		t.Errorf("GET: mcp_call status %q error %v output %v; POST answered failed with an error", it.Status, it.Error, it.Output)
	}
}
