package server

import (
	"errors"
	"net/http"
	"testing"
)

func FuzzDecodeResponses(f *testing.F) {
	for _, seed := range []string{
		`{"model":"demo","input":"hi"}`,
		`{"model":"demo","input":"hi","instructions":"be brief","store":false,"stream":true,"metadata":{"session_id":"s-1","k":"v"}}`,
		`{"input":[{"role":"developer","content":"d"},{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"r"},{"role":"user","content":[{"type":"input_text","text":"t"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]}]}`,
		`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"file:///etc/passwd"}]}]}`,
		`{"input":[{"type":"mcp_call","id":"mcp_c2","name":"f","arguments":"{}","output":"o"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]},{"role":"user","content":"a"}]}`,
		`{"previous_response_id":"R1","input":[{"type":"mcp_approval_response","approval_request_id":"approval:c1","approve":true,"reason":"ok"}]}`,
		`{"previous_response_id":"R1","input":[{"type":"mcp_approval_response","approval_request_id":"approval:c1","approve":1}]}`,
		`{"input":[{"type":"function_call_output","call_id":"x","output":[{"type":"input_text","text":"r"}]},{"role":"user","content":"a"}]}`,
		`{"input":"a","tools":[{"type":"function"}]}`, `{"input":"a","text":{"format":{"type":"json_schema"}}}`,
		`{"input":[{"type":"item_reference","id":"x"}]}`, `{"input":7}`, `[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeResponses(body)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || (ae.Status != http.StatusBadRequest && ae.Status != http.StatusNotFound) || ae.Message == "" || ae.Code == "" {
				t.Fatalf("decodeResponses error %#v is not a 400 or 404 *Error", err)
			}
			return
		}
		if p.approval != nil {
			if p.approval.requestID == "" || len(p.history) > 0 {
				t.Fatalf("approval plan %+v", p)
			}
			return
		}
		checkDecodedTurn(t, p.history, p.turn, p.sessionID)
		if p.previousID != "" && !validID(p.previousID) {
			t.Fatalf("invalid previous_response_id %q accepted", p.previousID)
		}
	})
}
