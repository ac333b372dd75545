package server

import (
	"strings"
	"testing"
)

// TestNestedFieldNamesAreExactDecoded: on the OpenAI endpoints a key
// that names a field only up to case is an unknown field at every
// depth, as at the top: in a message's tool calls and their function,
// in stream_options and response_format, in a Responses function call,
// function call output (and its parts), approval response and
// text.format. Before, the decoder took it as the field: a later
// "Arguments" replaced a call's arguments, a "Type" made an item an
// approval response, a "Type" of response_format refused the request.
func TestNestedFieldNamesAreExactDecoded(t *testing.T) {
	completion := func(t *testing.T, body string) *completionPlan {
		t.Helper()
		p, err := decodeCompletion([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return p
	}
	t.Run("chat tool calls", func(t *testing.T) {
		p := completion(t, `{"messages":[
			{"role":"user","content":"order 7?"},
			{"role":"assistant","tool_calls":[{"id":"c1","ID":"x","type":"function","function":{"name":"f","Name":"g","arguments":"{}","Arguments":"{\"a\":1}"},"Function":{"name":"h"}}]},
			{"role":"tool","tool_call_id":"c1","Tool_Call_ID":"x","content":"ok","CONTENT":"X"},
			{"role":"user","Role":"assistant","content":"hi"}]}`)
		tc := p.history[1].ToolCalls[0]
		if tc.ID != "c1" || tc.Name != "f" || string(tc.Arguments) != "{}" || p.history[2].ToolCallID != "c1" || p.history[2].Text() != "ok" {
			t.Fatalf("history %+v", p.history)
		}
	})
	t.Run("chat options", func(t *testing.T) {
		p := completion(t, `{"stream":true,"stream_options":{"Include_Usage":true},"response_format":{"Type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`)
		if p.includeUsage {
			t.Fatal("Include_Usage was taken as include_usage")
		}
	})
	responses := func(t *testing.T, body string) *responsePlan {
		t.Helper()
		p, err := decodeResponses([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return p
	}
	t.Run("responses function call items", func(t *testing.T) {
		p := responses(t, `{"text":{"format":{"Type":"json_schema"}},"input":[
			{"role":"user","content":"order 7?"},
			{"type":"function_call","call_id":"c1","Call_ID":"x","name":"f","NAME":"g","arguments":"{}","Arguments":"{\"a\":1}"},
			{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"ok","Text":"X","TYPE":"refusal"}],"Output":"Y"},
			{"TYPE":"function_call","role":"user","content":"hi"}]}`)
		tc := p.history[1].ToolCalls[0]
		if tc.ID != "c1" || tc.Name != "f" || string(tc.Arguments) != "{}" || p.history[2].Text() != "ok" || p.turn.Text() != "hi" {
			t.Fatalf("history %+v, turn %+v", p.history, p.turn)
		}
	})
	t.Run("responses approval", func(t *testing.T) {
		p := responses(t, `{"input":[{"type":"mcp_approval_response","approval_request_id":"a","Approval_Request_ID":"b","approve":true,"Approve":false}]}`)
		if p.approval == nil || p.approval.requestID != "a" || !p.approval.approve {
			t.Fatalf("approval %+v", p.approval)
		}
		_, err := decodeResponses([]byte(`{"input":[{"Type":"mcp_approval_response","approval_request_id":"a","approve":true}]}`))
		if err == nil || !strings.Contains(err.Error(), "needs a type or a role") {
			t.Fatalf("an item typed by \"Type\" only: %v", err)
		}
	})
}
