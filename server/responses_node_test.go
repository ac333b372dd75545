package server_test

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/npmtest"
)

// responsesNodeScript drives the Responses API with the openai npm
// client: create, retrieve, a continuation, the responses.stream helper
// (which checks the events' order and assembles the final response) and
// an approval. It prints one JSON line per case.
const responsesNodeScript = `
import OpenAI from "openai";
const out = (o) => console.log(JSON.stringify(o));
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });

const r = await client.responses.create({ model: "demo", input: "where is order 4?" });
out({ case: "create", id: r.id, text: r.output_text, types: r.output.map((i) => i.type), status: r.status });

const g = await client.responses.retrieve(r.id);
out({ case: "retrieve", id: g.id, text: g.output_text });

const n = await client.responses.create({ model: "demo", previous_response_id: r.id, input: [{ role: "user", content: "thanks" }] });
out({ case: "continue", text: n.output_text, previous: n.previous_response_id });

const stream = client.responses.stream({ model: "demo", input: "where is order 6?" });
let deltas = "";
const types = [];
stream.on("response.output_text.delta", (e) => { deltas += e.delta; });
for await (const e of stream) types.push(e.type);
const f = await stream.finalResponse();
out({ case: "stream", deltas, text: f.output_text, status: f.status, first: types[0], last: types[types.length - 1] });

const s = await client.responses.create({ model: "demo", input: "refund order 2" });
const ar = s.output.find((i) => i.type === "mcp_approval_request");
const d = await client.responses.create({ model: "demo", previous_response_id: s.id,
  input: [{ type: "mcp_approval_response", approval_request_id: ar.id, approve: false, reason: "not today" }] });
out({ case: "approval", tool: ar.name, text: d.output_text, types: d.output.map((i) => i.type) });

try {
  await client.responses.retrieve("NOSUCHRESPONSE");
  out({ case: "missing", status: 200 });
} catch (e) {
  out({ case: "missing", status: e.status, name: e.constructor.name });
}
`

// TestResponsesNodeClient: the official openai npm package, under Node,
// creates, retrieves, continues and streams responses, and answers an
// approval request, as against OpenAI.
func TestResponsesNodeClient(t *testing.T) {
	dir := npmtest.Install(t, "openai", openaiNodeVersion)
	ts := newOpenAIServer(t)
	got := runNode(t, dir, "responses.mjs", responsesNodeScript, "BASE_URL="+ts.URL+"/v1", "API_KEY="+oaiToken)
	str := func(c map[string]any, k string) string { s, _ := c[k].(string); return s }
	if c := got["create"]; str(c, "text") != "Here is what I found: order 4: shipped, arriving Thursday" || str(c, "status") != "completed" {
		t.Errorf("create: %v", c)
	}
	if c := got["retrieve"]; str(c, "id") != str(got["create"], "id") || str(c, "text") != str(got["create"], "text") {
		t.Errorf("retrieve: %v", c)
	}
	if c := got["continue"]; !strings.HasPrefix(str(c, "text"), `You said: "thanks".`) || str(c, "previous") != str(got["create"], "id") {
		t.Errorf("continue: %v", c)
	}
	if c := got["stream"]; str(c, "deltas") == "" || str(c, "deltas") != str(c, "text") || str(c, "status") != "completed" ||
		str(c, "first") != "response.created" || str(c, "last") != "response.completed" {
		t.Errorf("stream: %v", c)
	}
	if c := got["approval"]; str(c, "tool") != "issue_refund" || !strings.Contains(str(c, "text"), "not today") {
		t.Errorf("approval: %v", c)
	}
	if c := got["missing"]; c["status"] != float64(404) || str(c, "name") != "NotFoundError" {
		t.Errorf("missing: %v", c)
	}
}
