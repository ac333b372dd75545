package anthropic_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
)

// FuzzParseResponse checks that any body either maps to a response whose
// Raw is the body verbatim and whose content and tool calls are sound, or
// fails with a categorized error; it never panics.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		okBody,
		`{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"x"},{"type":"tool_use","id":"i","name":"n","input":{"a":[1,2.5e3]}}],"stop_reason":"tool_use","usage":{"input_tokens":"abc","output_tokens":7}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
		`{"type":"message","content":null}`,
		`[]`, `null`, `{"content":[{"type":"tool_use","input":"{"}],"stop_reason":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := anthropic.ParseResponse(body)
		if err != nil {
			if errcat.Of(err) == "" {
				t.Fatalf("uncategorized error %v", err)
			}
			return
		}
		if !bytes.Equal(resp.Raw, body) {
			t.Fatalf("Raw differs from the body")
		}
		if resp.Message.Role != llm.RoleAssistant {
			t.Fatalf("role %q", resp.Message.Role)
		}
		for _, tc := range resp.Message.ToolCalls {
			if tc.Arguments == nil {
				if resp.FinishReason != llm.FinishError {
					t.Fatalf("null arguments with finish %q", resp.FinishReason)
				}
				continue
			}
			if !json.Valid(tc.Arguments) || tc.Arguments[0] != '{' {
				t.Fatalf("arguments %q", tc.Arguments)
			}
		}
		u := resp.Usage
		if (u.TotalTokens != nil) != (u.PromptTokens != nil && u.CompletionTokens != nil) {
			t.Fatalf("derived total inconsistent: %+v", u)
		}
		if u.TotalTokens != nil && *u.TotalTokens != *u.PromptTokens+*u.CompletionTokens {
			t.Fatalf("total %d", *u.TotalTokens)
		}
	})
}

var validCategories = map[errcat.Category]bool{
	errcat.ProviderAuthentication: true, errcat.ProviderInvalidModel: true, errcat.ProviderInvalidRequest: true,
	errcat.ProviderRateLimit: true, errcat.ProviderUnavailable: true, errcat.ProviderUnsupportedContentBlock: true,
}

// FuzzParseError checks that any status and body map to a categorized
// *llm.ProviderError wrapping an *anthropic.APIError; it never panics.
func FuzzParseError(f *testing.F) {
	f.Add(401, "", []byte(`{"type":"error","error":{"type":"authentication_error","message":"bad"},"request_id":"r"}`))
	f.Add(429, "12", []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`))
	f.Add(400, "", []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"image too big"}}`))
	f.Add(529, "Wed, 21 Oct 2099 07:28:00 GMT", []byte(`<html>`))
	f.Add(418, "", []byte(`{"error":null}`))
	f.Fuzz(func(t *testing.T, status int, retry string, body []byte) {
		h := http.Header{}
		h.Set("retry-after", retry)
		pe := anthropic.ParseError(status, h, body)
		if pe == nil || !validCategories[pe.Cat] {
			t.Fatalf("ParseError = %+v", pe)
		}
		var ae *anthropic.APIError
		if !errors.As(pe, &ae) || ae.StatusCode != status {
			t.Fatalf("cause %+v", pe.Err)
		}
		if pe.RetryAfter < 0 || pe.RetryAfter > 24*time.Hour || (pe.RetryAfter > 0 && retry == "") {
			t.Fatalf("RetryAfter %v for %s", pe.RetryAfter, pe.Cat)
		}
		_ = pe.Error()
	})
}
