package server_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/npmtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// finalNodeScript sends, with the openai npm client and its default
// retries, an approval whose resumed turn fails after the approved call
// ran, and a request with tool_choice "none". It prints one JSON line
// per case.
const finalNodeScript = `
import OpenAI from "openai";
const out = (o) => console.log(JSON.stringify(o));
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 2 });

const s = await client.responses.create({ model: "demo", input: "refund order 7" });
const ar = s.output.find((i) => i.type === "mcp_approval_request");
try {
  await client.responses.create({ model: "demo", previous_response_id: s.id,
    input: [{ type: "mcp_approval_response", approval_request_id: ar.id, approve: true }] });
  out({ case: "approval", status: 200 });
} catch (e) {
  out({ case: "approval", status: e.status, name: e.constructor.name, code: e.code, message: e.message });
}

try {
  await client.responses.create({ model: "demo", input: "where is order 7?", tool_choice: "none" });
  out({ case: "tool_choice", status: 200 });
} catch (e) {
  out({ case: "tool_choice", status: e.status, name: e.constructor.name, code: e.code, param: e.param });
}
`

// TestNodeClientDoesNotResendAnApprovalThatTookEffect: the official
// openai npm package, which retries a 5xx twice by default, raises the
// 503 of an approval whose turn failed after the approved refund ran,
// without sending the approval again (a retry would be answered 409);
// and raises a tool_choice it cannot have as a 400 naming the field.
func TestNodeClientDoesNotResendAnApprovalThatTookEffect(t *testing.T) {
	dir := npmtest.Install(t, "openai", openaiNodeVersion)
	p := llmtest.New(
		llmtest.CallTools(llm.ToolCall{ID: "r1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":30}`)}),
		llmtest.Fail(errcat.Wrap(errcat.ProviderUnavailable, "upstream", errors.New("503 from the model"))),
	)
	a, err := agent.New(agent.Config{Provider: p, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	got := runNode(t, dir, "final.mjs", finalNodeScript, "BASE_URL="+ts.URL+"/v1", "API_KEY="+oaiToken)
	str := func(c map[string]any, k string) string { s, _ := c[k].(string); return s }
	if c := got["approval"]; c["status"] != float64(503) || str(c, "name") != "InternalServerError" ||
		str(c, "code") != string(errcat.ProviderUnavailable) || !strings.Contains(str(c, "message"), "cannot be given again") {
		t.Errorf("approval: %v, want the 503 raised once, not a 409 for a resent approval", c)
	}
	if n := len(p.Requests()); n != 2 {
		t.Errorf("the model was called %d times, want 2 (the refund's call, the failed answer)", n)
	}
	if c := got["tool_choice"]; c["status"] != float64(400) || str(c, "name") != "BadRequestError" || str(c, "param") != "tool_choice" {
		t.Errorf("tool_choice: %v", c)
	}
}
