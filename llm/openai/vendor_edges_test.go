package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

func sseOf(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String() + "data: [DONE]\n\n"
}

// TestToolCallDeltasWithoutIndexNumbering: index-less deltas without an
// id continue the last call, a repeated id continues its call, and a new
// id opens a call.
func TestToolCallDeltasWithoutIndexNumbering(t *testing.T) {
	sse := sseOf(
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":":1"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"arguments":"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	p := vendorServer(t, 200, nil, "text/event-stream", sse)
	resp, err := llm.Complete(context.Background(), p, vendorReq(true))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "a" || string(calls[0].Arguments) != `{"x":1}` || calls[1].ID != "b" || calls[1].Name != "g" {
		t.Errorf("calls = %+v", calls)
	}
}

// TestStreamedThoughtSignature: a streamed tool call's
// extra_content.google.thought_signature is its Signature, and the
// assembled Raw keeps it.
func TestStreamedThoughtSignature(t *testing.T) {
	sse := sseOf(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"SIG"}},"function":{"arguments":"{}","name":"f"},"id":"c1","type":"function"}]},"finish_reason":"tool_calls"}]}`)
	p := vendorServer(t, 200, nil, "text/event-stream", sse)
	resp, err := llm.Complete(context.Background(), p, vendorReq(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Signature != "SIG" || !strings.Contains(string(resp.Raw), "SIG") {
		t.Errorf("calls = %+v raw %s", resp.Message.ToolCalls, resp.Raw)
	}
}

// TestThoughtSignatureStrippedForOtherServers: a ToolCall.Signature is
// not sent to a server that is not Gemini's (§3.1.7).
func TestThoughtSignatureStrippedForOtherServers(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []llm.Message{llm.UserText("Hi"),
		llm.AssistantToolCalls(llm.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{}`), Signature: "SIG"}),
		llm.ToolResult("c1", "done")}
	tools := []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	if _, err := p.Complete(context.Background(), &llm.Request{Messages: msgs, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(body, "SIG") || strings.Contains(body, "extra_content") {
		t.Errorf("signature sent to a non-Gemini server: %s", body)
	}
}

// TestInBandErrorCategories: in-band error objects map by what they say.
func TestInBandErrorCategories(t *testing.T) {
	for _, tc := range []struct {
		event string
		want  errcat.Category
	}{
		{`{"error":{"message":"boom"}}`, errcat.ProviderUnavailable},
		{`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, errcat.ProviderAuthentication},
		{`{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`, errcat.ProviderRateLimit},
		{`{"error":{"message":"x","status":"INVALID_ARGUMENT"}}`, errcat.ProviderInvalidRequest},
		{`{"error":{"code":503,"message":"overloaded"}}`, errcat.ProviderUnavailable},
	} {
		_, err := openai.ParseChunk([]byte(tc.event))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %s", tc.event, err, tc.want)
		}
	}
}

// TestContentBlockRejectionSignals: a 400 naming image content in its
// code, param or unquoted message is provider_unsupported_content_block.
func TestContentBlockRejectionSignals(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"You uploaded an unsupported image.","type":"invalid_request_error","param":null,"code":"invalid_image_format"}}`,
		`{"error":{"message":"Invalid content type. image_url is only supported by certain models.","type":"invalid_request_error","param":"messages.[0].content.[1].type","code":null}}`,
		`{"error":{"message":"At most 0 image(s) may be provided in one request.","type":"BadRequestError","code":400}}`,
		`[{"error":{"code":400,"message":"This model's maximum is 0 images per request","status":"INVALID_ARGUMENT"}}]`,
	} {
		p := vendorServer(t, 400, nil, "application/json", body)
		_, err := p.Complete(context.Background(), vendorReq(false))
		if !errors.Is(err, errcat.ProviderUnsupportedContentBlock) {
			t.Errorf("%s: err = %v", body, err)
		}
	}
}

// TestRetryAfterHTTPDate: a Retry-After HTTP date on a 503 gives the wait.
func TestRetryAfterHTTPDate(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	p := vendorServer(t, 503, map[string]string{"Retry-After": date}, "application/json", `{"error":{"message":"overloaded"}}`)
	_, err := p.Complete(context.Background(), vendorReq(false))
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.RetryAfter < 20*time.Second || pe.RetryAfter > 31*time.Second {
		t.Errorf("err = %v (%+v)", err, pe)
	}
}

// TestHTMLErrorPageWithoutTitle: an HTML page without a title gives the
// status text.
func TestHTMLErrorPageWithoutTitle(t *testing.T) {
	p := vendorServer(t, 502, nil, "text/html", "<html><body><h1>oops</h1></body></html>")
	_, err := p.Complete(context.Background(), vendorReq(false))
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Message != "Bad Gateway" {
		t.Errorf("err = %v", err)
	}
}

// TestStreamedBadArgumentsNameTheProvider: a streamed tool call whose
// assembled arguments are not a JSON object fails as the mapping's
// provider_invalid_response, naming the provider and the operation, and
// the atomic answer names the call.
func TestStreamedBadArgumentsNameTheProvider(t *testing.T) {
	sse := sseOf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"[1,2]"}}]},"finish_reason":"tool_calls"}]}`)
	_, err := llm.Complete(context.Background(), vendorServer(t, 200, nil, "text/event-stream", sse), vendorReq(true))
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Provider != "openai" || pe.Op != "stream" || !errors.Is(err, errcat.ProviderInvalidResponse) {
		t.Fatalf("streamed: %#v", err)
	}
	if !strings.HasPrefix(err.Error(), "llm: openai stream: provider_invalid_response") {
		t.Errorf("streamed: %v", err)
	}
	body := `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1,2]"}}]},"finish_reason":"tool_calls"}]}`
	_, err = llm.Complete(context.Background(), vendorServer(t, 200, nil, "application/json", body), vendorReq(false))
	if !errors.As(err, &pe) || pe.Provider != "openai" || pe.Op != "complete" || !strings.Contains(err.Error(), "tool_calls[0]: tool call arguments are not a JSON object") {
		t.Errorf("atomic: %v", err)
	}
}
