package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/server"
)

// A request that forbids, requires, names or bounds tool calls
// (tool_choice other than "auto", the deprecated function_call, the
// Responses API's max_tool_calls, parallel_tool_calls false: the
// agent's model may call several tools at once, and before it was
// silently ignored) is refused, 400 unsupported_parameter
// naming the field, as response_format is: the agent's tools run
// server-side and the agent decides when to call them, so such a
// request would otherwise have the calls it forbade run (and the
// response echo tool_choice "auto"). "auto" and null leave the choice
// to the agent, as an absent field does.
func TestToolChoiceOtherThanAutoIsRefused(t *testing.T) {
	ts := newDemoServer(t)
	const (
		chatPath = "/v1/chat/completions"
		respPath = "/v1/responses"
	)
	chatBody := func(extra string) string {
		return `{"model":"demo",` + extra + `"messages":[{"role":"user","content":"where is order 7?"}]}`
	}
	respBody := func(extra string) string { return `{"model":"demo",` + extra + `"input":"where is order 7?"}` }
	for _, tc := range []struct {
		name, path, body string
		param            string // "" when the request is served
	}{
		{"chat none", chatPath, chatBody(`"tool_choice":"none",`), "tool_choice"},
		{"chat required", chatPath, chatBody(`"tool_choice":"required",`), "tool_choice"},
		{"chat named", chatPath, chatBody(`"tool_choice":{"type":"function","function":{"name":"lookup_order"}},`), "tool_choice"},
		{"chat function_call none", chatPath, chatBody(`"function_call":"none",`), "function_call"},
		{"chat auto", chatPath, chatBody(`"tool_choice":"auto",`), ""},
		{"chat null", chatPath, chatBody(`"tool_choice":null,`), ""},
		{"responses none", respPath, respBody(`"tool_choice":"none",`), "tool_choice"},
		{"responses required", respPath, respBody(`"tool_choice":"required",`), "tool_choice"},
		{"responses named", respPath, respBody(`"tool_choice":{"type":"function","name":"lookup_order"},`), "tool_choice"},
		{"responses max_tool_calls 0", respPath, respBody(`"max_tool_calls":0,`), "max_tool_calls"},
		{"responses max_tool_calls 5", respPath, respBody(`"max_tool_calls":5,`), "max_tool_calls"},
		{"responses auto", respPath, respBody(`"tool_choice":"auto","max_tool_calls":null,`), ""},
		{"chat parallel_tool_calls false", chatPath, chatBody(`"parallel_tool_calls":false,`), "parallel_tool_calls"},
		{"chat parallel_tool_calls not a bool", chatPath, chatBody(`"parallel_tool_calls":"no",`), "parallel_tool_calls"},
		{"chat parallel_tool_calls true", chatPath, chatBody(`"parallel_tool_calls":true,`), ""},
		{"chat parallel_tool_calls null", chatPath, chatBody(`"parallel_tool_calls":null,`), ""},
		{"responses parallel_tool_calls false", respPath, respBody(`"parallel_tool_calls":false,`), "parallel_tool_calls"},
		{"responses parallel_tool_calls true", respPath, respBody(`"parallel_tool_calls":true,`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Error *struct {
					Type  string  `json:"type"`
					Code  string  `json:"code"`
					Param *string `json:"param"`
				} `json:"error"`
				ToolChoice any `json:"tool_choice"`
				X          struct {
					ToolCalls []struct{ Name string } `json:"tool_calls"`
				} `json:"x_armature"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if tc.param == "" {
				if resp.StatusCode != http.StatusOK || len(out.X.ToolCalls) == 0 {
					t.Fatalf("%d, %d tool calls, want 200 with the agent's call: %.300s", resp.StatusCode, len(out.X.ToolCalls), b)
				}
				if tc.path == respPath && out.ToolChoice != "auto" {
					t.Fatalf("tool_choice echoed %v", out.ToolChoice)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || out.Error == nil || out.Error.Type != "invalid_request_error" ||
				out.Error.Code != server.CodeUnsupportedParameter || out.Error.Param == nil || *out.Error.Param != tc.param {
				t.Fatalf("%d %s, want 400 unsupported_parameter naming %s", resp.StatusCode, b, tc.param)
			}
		})
	}
}
