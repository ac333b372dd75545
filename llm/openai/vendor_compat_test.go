package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

func vendorServer(t *testing.T, status int, header map[string]string, ctype, body string) *openai.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "sk-test", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func vendorReq(stream bool) *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Stream: stream}
}

// TestRefusalIsTheReply: an OpenAI refusal (message.refusal, or
// delta.refusal streamed, content null) becomes the assistant message's
// text, under the finish reason the server gave (§8.1.2 maps
// finish_reason as sent). Before, users saw an empty reply finishing
// "stop".
//
// Original report: OpenAI answers a refused request (with
// structured outputs, and on gpt-4o generally) with content null and
// message.refusal set, or in a stream with delta.refusal. A user sees an
// empty assistant reply finishing "stop": the refusal text is lost. They
// should see the refusal's text (or at least a content_filter finish),
// never a silent empty answer.
func TestRefusalIsTheReply(t *testing.T) {
	const refusal = "I'm sorry, I can't assist with that request."
	t.Run("complete", func(t *testing.T) {
		p := vendorServer(t, 200, nil, "application/json",
			`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"`+refusal+`"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`)
		resp, err := llm.Complete(context.Background(), p, vendorReq(false))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Message.Text(), "sorry") && resp.FinishReason != llm.FinishContentFilter {
			t.Errorf("refusal lost: text %q, finish %q", resp.Message.Text(), resp.FinishReason)
		}
	})
	t.Run("stream", func(t *testing.T) {
		sse := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"refusal":"I can't assist with that request."},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: [DONE]

`
		p := vendorServer(t, 200, nil, "text/event-stream", sse)
		resp, err := llm.Complete(context.Background(), p, vendorReq(true))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Message.Text(), "sorry") && resp.FinishReason != llm.FinishContentFilter {
			t.Errorf("refusal lost: text %q, finish %q", resp.Message.Text(), resp.FinishReason)
		}
	})
}

// TestInsufficientQuotaIsNotRetried: a 429 whose code or type is
// insufficient_quota maps to provider_authentication (as §8.2.3 maps
// Anthropic's billing_error), not retried. Before, users saw
// provider_rate_limit and retries hammering the API.
//
// Original report: OpenAI answers an account out
// of credit with HTTP 429 {"error":{"type":"insufficient_quota"}}; its
// docs say not to retry it. A user sees provider_rate_limit, a transient
// failure, so llm.Complete's retry loop (and graph retries) hammer the
// API and the user waits for nothing. They should see a non-transient
// category (Anthropic's billing_error maps to provider_authentication).
func TestInsufficientQuotaIsNotRetried(t *testing.T) {
	p := vendorServer(t, 429, nil, "application/json",
		`{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	_, err := p.Complete(context.Background(), vendorReq(false))
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	if pe.Retryable() {
		t.Errorf("insufficient_quota is %s (transient): retried in vain", pe.Cat)
	}
}

// TestRetryAfterOnAnyStatus: retry-after-ms, then Retry-After (seconds
// or HTTP date), gives ProviderError.RetryAfter on any error status.
// Before, users saw RetryAfter 0 except on a 429's Retry-After.
//
// Original report: a 503 (server overloaded) with
// Retry-After: 20, or Azure OpenAI's retry-after-ms, asks the client to
// wait. A user sees ProviderError.RetryAfter == 0 (only a 429's header is
// read; retry-after-ms never), so the retry loop comes back at once on
// its own backoff. They should see RetryAfter = 20s (RFC 9110 §10.2.3:
// Retry-After is a 503's header first of all).
func TestRetryAfterOnAnyStatus(t *testing.T) {
	t.Run("503 Retry-After", func(t *testing.T) {
		p := vendorServer(t, 503, map[string]string{"Retry-After": "20"}, "application/json",
			`{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`)
		_, err := p.Complete(context.Background(), vendorReq(false))
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || !errors.Is(err, errcat.ProviderUnavailable) {
			t.Fatalf("err = %v", err)
		}
		if pe.RetryAfter == 0 {
			t.Errorf("503 Retry-After: 20 gave RetryAfter 0")
		}
	})
	t.Run("429 retry-after-ms", func(t *testing.T) {
		p := vendorServer(t, 429, map[string]string{"retry-after-ms": "1500"}, "application/json",
			`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier."}}`)
		_, err := p.Complete(context.Background(), vendorReq(false))
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || !errors.Is(err, errcat.ProviderRateLimit) {
			t.Fatalf("err = %v", err)
		}
		if pe.RetryAfter == 0 {
			t.Errorf("retry-after-ms: 1500 gave RetryAfter 0")
		}
	})
}

// TestToolCallDeltasWithoutIndexAreSeparateCalls: streamed tool-call
// deltas without index are numbered across events (a new id opens a
// call, no id continues the last). Before, users saw two calls merged
// into one with concatenated arguments and provider_invalid_response.
//
// Original report: several OpenAI-compatible
// servers (Gemini's OpenAI endpoint among them) stream each tool call
// whole in its own chunk and leave out tool_calls[].index. A user asking
// for two parallel calls sees the call fail with
// provider_invalid_response (both land on index 0: the second's id and
// name overwrite the first's and the arguments concatenate into
// `{"city":"Paris"}{"city":"Rome"}`). They should get two tool calls.
func TestToolCallDeltasWithoutIndexAreSeparateCalls(t *testing.T) {
	sse := `data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"index":0}],"created":1,"id":"x","model":"gemini-2.0-flash","object":"chat.completion.chunk"}

data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},"finish_reason":"tool_calls","index":0}],"created":1,"id":"x","model":"gemini-2.0-flash","object":"chat.completion.chunk"}

data: [DONE]

`
	p := vendorServer(t, 200, nil, "text/event-stream", sse)
	resp, err := llm.Complete(context.Background(), p, vendorReq(true))
	if err != nil {
		t.Fatalf("two index-less tool calls failed the call: %v", err)
	}
	if len(resp.Message.ToolCalls) != 2 {
		t.Errorf("tool calls = %+v, want 2", resp.Message.ToolCalls)
	}
}

// TestStreamedObjectArguments: streamed function.arguments given as a
// JSON object are taken as the atomic path takes them. Before, users saw
// provider_invalid_response ("tool call arguments are missing").
//
// Original report: a server that sends
// function.arguments as the JSON object itself (which the atomic path
// accepts: "some servers send the object itself") does so in its stream
// too. A user sees the streamed call fail with provider_invalid_response
// ("tool call arguments are missing": ParseChunk drops a non-string
// arguments delta) while the same server's non-streamed answer works.
// They should get the arguments, as in the atomic case.
func TestStreamedObjectArguments(t *testing.T) {
	sse := `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"SF"}}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	p := vendorServer(t, 200, nil, "text/event-stream", sse)
	resp, err := llm.Complete(context.Background(), p, vendorReq(true))
	if err != nil {
		t.Fatalf("streamed object arguments: %v", err)
	}
	if len(resp.Message.ToolCalls) != 1 || string(resp.Message.ToolCalls[0].Arguments) != `{"city":"SF"}` {
		t.Errorf("tool calls = %+v", resp.Message.ToolCalls)
	}
}

// TestMidStreamErrorCategory: an error event inside a 200 stream maps by
// its code/type/status as the same HTTP error would. Before, users saw
// provider_unavailable for every in-stream error.
//
// Original report: OpenAI (and vLLM, LiteLLM)
// report a failure after the 200 as a data line {"error":{...}}. A user
// sees provider_unavailable for every such error, so a rate limit is not
// provider_rate_limit and a context-length error (vLLM's
// BadRequestError, code 400) is retried as transient in vain. They
// should see the category the same error maps to as an HTTP answer.
func TestMidStreamErrorCategory(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		want        errcat.Category
	}{
		{"rate limit", `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, errcat.ProviderRateLimit},
		{"vllm 400", `{"error":{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}}`, errcat.ProviderInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sse := `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: ` + tc.event + `

data: [DONE]

`
			p := vendorServer(t, 200, nil, "text/event-stream", sse)
			var got error
			for _, e := range p.Stream(context.Background(), vendorReq(true)) {
				if e != nil {
					got = e
				}
			}
			if !errors.Is(got, tc.want) {
				t.Errorf("err = %v, want %s", got, tc.want)
			}
		})
	}
}

// TestHTMLErrorPageMessage: a non-JSON (HTML) error body gives a short,
// valid-UTF-8 message (the page's <title>, or a bounded snippet cut on a
// character boundary). Before, users saw the page's first 512 bytes,
// possibly cut mid-character.
//
// Original report: a proxy in front of the API
// (Cloudflare, nginx, an ingress) answers 502 with an HTML page. A user
// sees the page's first 512 bytes as the error message (its Diagnostic,
// the text a chat user is shown), cut mid-character into invalid UTF-8
// when a non-ASCII character straddles byte 512. They should see a
// valid-UTF-8 message (Anthropic's mapping applies strings.ToValidUTF8;
// Gemini's uses the status text).
func TestHTMLErrorPageMessage(t *testing.T) {
	page := "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1><p>" +
		strings.Repeat("x", 417) + "L’origine n’a pas répondu — réessayez plus tard.</p></body></html>"
	p := vendorServer(t, 502, nil, "text/html; charset=UTF-8", page)
	_, err := p.Complete(context.Background(), vendorReq(false))
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || !errors.Is(err, errcat.ProviderUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if !utf8.ValidString(pe.Message) || !utf8.ValidString(pe.Diagnostic()) {
		t.Errorf("message is not valid UTF-8: %q", pe.Message[len(pe.Message)-8:])
	}
}

// TestErrorBodyWith200: a non-streamed 200 body holding {"error":...}
// maps as the same in-stream error does, keeping the provider's message.
// Before, users saw provider_invalid_response "the response has no
// choices".
//
// Original report: OpenRouter documents that an error
// raised once the model started is answered with HTTP 200 and the body
// {"error":{"code":502,"message":...}} (non-streamed; streamed it is a
// data event, which the stream path does read). A user sees
// provider_invalid_response "the response has no choices": the
// provider's message is lost and the failure, transient upstream, is
// not retried. They should see the error's message in a transient
// category (provider_unavailable for a 502 code), as the stream path
// maps the same object.
func TestErrorBodyWith200(t *testing.T) {
	p := vendorServer(t, 200, nil, "application/json",
		`{"error":{"code":502,"message":"Provider returned error","metadata":{"raw":"upstream connect error","provider_name":"DeepInfra"}},"user_id":"user_2x"}`)
	_, err := llm.Complete(context.Background(), p, vendorReq(false))
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	if !pe.Retryable() || !strings.Contains(pe.Message, "Provider returned error") {
		t.Errorf("200 error body: %s %q, want a transient category with the provider's message", pe.Cat, pe.Message)
	}
}

// TestToolSchemaErrorIsInvalidRequest: a tool-schema 400 naming a
// function such as 'describe_image' is provider_invalid_request; content
// words count only in the error's code/param or unquoted in its message.
// Before, users saw provider_unsupported_content_block.
//
// Original report: OpenAI rejects a strict
// tool schema with a 400 whose message names the function, as in
// "Invalid schema for function 'describe_image': ... 'additionalProperties'
// is required to be supplied and to be false." A user sees
// provider_unsupported_content_block ("the model rejected a content
// block"), because the 400 heuristic matches "image" anywhere in the
// text, a tool's name included; they should see provider_invalid_request
// (code invalid_function_parameters): their tool schema is at fault, and
// the request has no image at all.
func TestToolSchemaErrorIsInvalidRequest(t *testing.T) {
	p := vendorServer(t, 400, nil, "application/json",
		`{"error":{"message":"Invalid schema for function 'describe_image': In context=(), 'additionalProperties' is required to be supplied and to be false.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`)
	_, err := p.Complete(context.Background(), vendorReq(false))
	if !errors.Is(err, errcat.ProviderInvalidRequest) {
		t.Errorf("err = %v, want provider_invalid_request", err)
	}
}
