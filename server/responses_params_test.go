package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// An input the agent's model could not be given is refused 400 with
// param naming the input item and a field that item has, and a message
// in the Responses API's terms: a function_call_output's call_id (not
// the chat field tool_call_id), a function call's own item, and, for a
// rule about an item's place (a function_call that opens the input),
// the item itself (a function_call has no role).
func TestResponsesInputErrorsNameTheItemsFields(t *testing.T) {
	ts := newDemoServer(t)
	const user = `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, input, param, says string
	}{
		{"an output of no call", `[{"type":"function_call_output","call_id":"zz","output":"x"},` + user + `]`,
			"input[0].call_id", "no function_call item before it"},
		{"a call first", `[{"type":"function_call","call_id":"c1","name":"lookup_order","arguments":"{}"},` + user + `]`,
			"input[0]", "must begin with a user message"},
		{"an assistant message first", `[{"role":"assistant","content":"hello"},` + user + `]`,
			"input[0].role", "must begin with a user message"},
		{"a call without a name", `[` + user + `,{"type":"function_call","call_id":"c1","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"x"},` + user + `]`,
			"input[1].name", "function call needs a name"},
		{"a second call of the same id", `[` + user + `,{"type":"function_call","call_id":"c1","name":"lookup_order","arguments":"{}"},` +
			`{"type":"function_call","call_id":"c1","name":"lookup_order","arguments":"{}"},` + user + `]`,
			"input[2].call_id", "duplicate function call id"},
		{"arguments not an object", `[` + user + `,{"type":"function_call","call_id":"c1","name":"lookup_order","arguments":"[1]"},` +
			`{"type":"function_call_output","call_id":"c1","output":"x"},` + user + `]`,
			"input[1].arguments", "must be a JSON object"},
		{"a call of an assistant message without an id", `[` + user + `,{"role":"assistant","content":"looking"},` +
			`{"type":"function_call","call_id":"","name":"lookup_order","arguments":"{}"},` + user + `]`,
			"input[2].call_id", "function call needs an id"},
		{"an mcp_call without an id", `[` + user + `,{"type":"mcp_call","name":"lookup_order","arguments":"{}","output":"x"},` + user + `]`,
			"input[1].id", "function call needs an id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"demo","input":`+tc.input+`}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			e := out.Error
			if resp.StatusCode != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Param == nil || *e.Param != tc.param {
				t.Fatalf("%d %+v, want 400 naming %s", resp.StatusCode, e, tc.param)
			}
			if !strings.HasPrefix(e.Message, tc.param+": ") || !strings.Contains(e.Message, tc.says) {
				t.Fatalf("message %q, want %q and %q", e.Message, tc.param, tc.says)
			}
			for _, chatTerm := range []string{"tool_call_id", "tool call", "tool message", "message list"} {
				if strings.Contains(e.Message, chatTerm) {
					t.Fatalf("message %q speaks of a chat completions %s", e.Message, chatTerm)
				}
			}
		})
	}
}
