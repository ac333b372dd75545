package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/internal/spectest"
)

const testKey = "sk-ant-secret-test-key-123"

const okBody = `{"type":"message","id":"msg_1","model":"claude-test","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`

func newProvider(t testing.TB, url string, mod func(*anthropic.Config)) *anthropic.Provider {
	t.Helper()
	cfg := anthropic.Config{BaseURL: url, APIKey: testKey, Model: "claude-test"}
	if mod != nil {
		mod(&cfg)
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func simpleRequest() *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Config: llm.Config{MaxTokens: new(64)}}
}

func TestErrorPrefixes(t *testing.T) {
	if !strings.HasPrefix(anthropic.ErrInvalidConfig.Error(), "anthropic: ") {
		t.Errorf("ErrInvalidConfig = %q", anthropic.ErrInvalidConfig)
	}
	if s := (&anthropic.APIError{StatusCode: 500, Type: "api_error"}).Error(); !strings.HasPrefix(s, "anthropic: ") {
		t.Errorf("APIError = %q", s)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  anthropic.Config
		ok   bool
	}{
		{"minimal", anthropic.Config{Model: "m"}, true},
		{"no model", anthropic.Config{}, false},
		{"bad url", anthropic.Config{Model: "m", BaseURL: "ftp://x"}, false},
		{"relative url", anthropic.Config{Model: "m", BaseURL: "/v1"}, false},
		{"bad mode", anthropic.Config{Model: "m", StructuredOutput: "json"}, false},
		{"tool mode", anthropic.Config{Model: "m", StructuredOutput: anthropic.StructuredTool}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v", err)
			}
			if err != nil && !errors.Is(err, anthropic.ErrInvalidConfig) {
				t.Fatalf("error %v does not match ErrInvalidConfig", err)
			}
			if _, err := anthropic.New(tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("New() = %v", err)
			}
		})
	}
}

// TestCrossProviderSignatureStrip is fixture 053's rule for this mapping
// (§3.1.7): reasoning signatures another provider issued (Gemini's on a
// text block and a tool call, a thinking block without a signature) are
// stripped; an Anthropic-signed thinking block and redacted thinking pass.
func TestCrossProviderSignatureStrip(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1", nil)
	req := &llm.Request{
		Messages: []llm.Message{
			llm.UserText("Weather in SF?"),
			{Role: llm.RoleAssistant,
				Content: llm.Blocks(
					llm.ThinkingBlock("Reasoning carried over from Gemini.", ""),
					llm.Block{Type: llm.BlockText, Text: "Checking.", Signature: "sig-g-text"},
				),
				ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"SF"}`), Signature: "sig-g-call"}},
			},
			llm.ToolResult("call_1", "72F sunny"),
			{Role: llm.RoleAssistant, Content: llm.Blocks(
				llm.ThinkingBlock("mine", "sig-anthropic"),
				llm.RedactedThinkingBlock("opaque"),
				llm.TextBlock("It is 72F."),
			)},
			llm.UserText("Thanks"),
		},
		Tools:  []llm.Tool{{Name: "get_weather", Description: "Weather.", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)}},
		Config: llm.Config{MaxTokens: new(64)},
	}
	body, err := p.RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_tokens":64,"messages":[` +
		`{"content":"Weather in SF?","role":"user"},` +
		`{"content":[{"text":"Checking.","type":"text"},{"id":"call_1","input":{"location":"SF"},"name":"get_weather","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":"72F sunny","tool_use_id":"call_1","type":"tool_result"}],"role":"user"},` +
		`{"content":[{"signature":"sig-anthropic","thinking":"mine","type":"thinking"},{"data":"opaque","type":"redacted_thinking"},{"text":"It is 72F.","type":"text"}],"role":"assistant"},` +
		`{"content":"Thanks","role":"user"}],` +
		`"model":"claude-test","tools":[{"description":"Weather.","input_schema":{"properties":{"location":{"type":"string"}},"type":"object"},"name":"get_weather"}]}`
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if strings.Contains(string(body), "sig-g") || strings.Contains(string(body), "Gemini") {
		t.Errorf("foreign reasoning reached the wire: %s", body)
	}
}

func TestToolRunsCollapseAndDecodeBack(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1", nil)
	msgs := []llm.Message{
		llm.SystemText("Be terse."),
		llm.UserBlocks(llm.ImageInline(llm.MediaTypePNG, "aGVsbG8="), llm.ImageURL("https://example.com/x.png"), llm.TextBlock("Compare.")),
		llm.AssistantToolCalls(
			llm.ToolCall{ID: "a", Name: "f", Arguments: json.RawMessage(`{"x":1}`)},
			llm.ToolCall{ID: "b", Name: "f", Arguments: json.RawMessage(`{"x":2}`)},
		),
		llm.ToolResult("a", "one"),
		llm.ToolResult("b", "two"),
		{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ThinkingBlock("hmm", "sig"), llm.TextBlock("Done."))},
		llm.UserText("ok"),
	}
	tools := []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	body, err := p.RequestBody(&llm.Request{Messages: msgs, Tools: tools, Config: llm.Config{MaxTokens: new(10)}})
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		System   string `json:"system"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range wire.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]string{"user", "assistant", "user", "assistant", "user"}, roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	if wire.System != "Be terse." {
		t.Errorf("system = %q", wire.System)
	}
	got, err := anthropic.DecodeMessages(body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(msgs, got, spectest.RawJSON()); diff != "" {
		t.Errorf("DecodeMessages (-sent +decoded):\n%s", diff)
	}
}

func TestDecodeMessagesInterleaved(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r1"}]},{"type":"text","text":"b"}]}]}`
	got, err := anthropic.DecodeMessages([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Message{llm.UserBlocks(llm.TextBlock("a")), llm.ToolResult("t1", "r1"), llm.UserBlocks(llm.TextBlock("b"))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"messages":[{"role":"tool","content":"x"}]}`, `{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, `[`} {
		if _, err := anthropic.DecodeMessages([]byte(bad)); !errors.Is(err, errcat.ProviderInvalidRequest) {
			t.Errorf("DecodeMessages(%s) = %v, want provider_invalid_request", bad, err)
		}
	}
}

func TestPreSendRejections(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(okBody))
	}))
	defer srv.Close()
	p := newProvider(t, srv.URL, nil)
	for _, tc := range []struct {
		name   string
		mod    func(*llm.Request)
		target error
	}{
		{"extras model conflict", func(r *llm.Request) { r.Config.Extras = map[string]any{"model": "other"} }, llm.ErrManagedField},
		{"extras max_tokens conflict", func(r *llm.Request) { r.Config.Extras = map[string]any{"max_tokens": 65} }, llm.ErrManagedField},
		{"extras stream true", func(r *llm.Request) { r.Config.Extras = map[string]any{"stream": true} }, llm.ErrManagedField},
		{"extras temperature conflict", func(r *llm.Request) {
			r.Config.Temperature = new(0.5)
			r.Config.Extras = map[string]any{"temperature": 0.7}
		}, llm.ErrManagedField},
		{"system blocks", func(r *llm.Request) {
			r.Messages = []llm.Message{{Role: llm.RoleSystem, Content: llm.Blocks(llm.TextBlock("x"))}, llm.UserText("hi")}
		}, errcat.ProviderInvalidRequest},
		{"tool choice unknown tool", func(r *llm.Request) { r.ToolChoice = llm.ForceTool("nope") }, errcat.ProviderInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := simpleRequest()
			tc.mod(req)
			_, err := llm.Complete(context.Background(), p, req)
			if !errors.Is(err, tc.target) || !errors.Is(err, errcat.ProviderInvalidRequest) {
				t.Fatalf("err = %v, want %v in provider_invalid_request", err, tc.target)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d request(s) reached the server", n)
	}
}

func TestExtrasPassThroughSorted(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1", nil)
	req := simpleRequest()
	req.Config.Extras = map[string]any{"top_k": 5, "metadata": map[string]any{"user_id": "u", "a": 1}, "max_tokens": 64, "stream": false}
	body, err := p.RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"metadata":{"a":1,"user_id":"u"},"model":"claude-test","top_k":5}`
	if string(body) != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
}

func TestStructuredToolPathWithCallerToolsUsesPrompt(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1", func(c *anthropic.Config) { c.StructuredOutput = anthropic.StructuredTool })
	req := simpleRequest()
	req.Tools = []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	req.ResponseSchema = json.RawMessage(`{"type":"object","properties":{"v":{"type":"integer"}}}`)
	body, err := p.RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	s := string(body)
	if strings.Contains(s, anthropic.SyntheticToolName) || strings.Contains(s, "tool_choice") || strings.Contains(s, "output_config") {
		t.Errorf("caller tools overridden: %s", s)
	}
	if !strings.Contains(s, `"system":`) || !strings.Contains(s, `\"v\"`) {
		t.Errorf("no schema directive in the system field: %s", s)
	}
	if len(req.Messages) != 1 {
		t.Errorf("caller messages mutated: %v", req.Messages)
	}
}

func TestStructuredToolPathUnwrapsToolUse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"structured_output","input":{"v":"x"}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	defer srv.Close()
	p := newProvider(t, srv.URL, func(c *anthropic.Config) { c.StructuredOutput = anthropic.StructuredTool })
	req := simpleRequest()
	req.ResponseSchema = json.RawMessage(`{"type":"object","properties":{"v":{"type":"integer"}},"required":["v"]}`)
	_, err := llm.Complete(context.Background(), p, req)
	var soe *llm.StructuredOutputError
	if !errors.As(err, &soe) {
		t.Fatalf("err = %v, want *llm.StructuredOutputError", err)
	}
	if soe.OutputContent != `{"v":"x"}` || soe.FinishReason != llm.FinishStop {
		t.Errorf("output %q finish %q", soe.OutputContent, soe.FinishReason)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		cat        errcat.Category
		code       string
		retryAfter time.Duration
	}{
		{"auth with key echoed", 401, nil, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + testKey + `"},"request_id":"req_1"}`, errcat.ProviderAuthentication, "authentication_error", 0},
		{"rate limit retry-after", 429, map[string]string{"retry-after": "7"}, `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`, errcat.ProviderRateLimit, "rate_limit_error", 7 * time.Second},
		{"overloaded", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, errcat.ProviderUnavailable, "overloaded_error", 0},
		{"html gateway error", 502, nil, `<html>bad gateway</html>`, errcat.ProviderUnavailable, "", 0},
		{"unsupported media type", 400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg'"}}`, errcat.ProviderUnsupportedContentBlock, "invalid_request_error", 0},
		{"other 4xx", 422, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, errcat.ProviderInvalidRequest, "invalid_request_error", 0},
		{"error envelope on 200", 200, nil, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, errcat.ProviderUnavailable, "overloaded_error", 0},
		{"not a message", 200, nil, `{"type":"message","role":"assistant"}`, errcat.ProviderInvalidResponse, "", 0},
		{"not json", 200, nil, `{"type":`, errcat.ProviderInvalidResponse, "", 0},
		{"tool_use input not object", 200, nil, `{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}],"stop_reason":"tool_use"}`, errcat.ProviderInvalidResponse, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := newProvider(t, srv.URL, nil)
			_, err := p.Complete(context.Background(), simpleRequest())
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *llm.ProviderError", err)
			}
			if pe.Cat != tc.cat || pe.Code != tc.code || pe.RetryAfter != tc.retryAfter || pe.Provider != "anthropic" || pe.Op != "complete" {
				t.Errorf("got %+v", pe)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("key leaked: %v", err)
			}
			var ae *anthropic.APIError
			if errors.As(err, &ae) && strings.Contains(ae.Message+string(ae.Body), testKey) {
				t.Errorf("key leaked into APIError: %+v", ae)
			}
			if tc.name == "auth with key echoed" && (ae == nil || ae.RequestID != "req_1") {
				t.Errorf("APIError = %+v, want request_id req_1", ae)
			}
		})
	}
}

func TestHeadersAndReady(t *testing.T) {
	var got http.Header
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, path = r.Header.Clone(), r.URL.Path
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"model: missing"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"type":"model","id":"claude-test"}`))
	}))
	defer srv.Close()
	p := newProvider(t, srv.URL+"/", func(c *anthropic.Config) {
		c.Version = "2099-01-01"
		c.ExtraHeaders = map[string]string{"anthropic-beta": "feature-x"}
	})
	if err := p.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if path != "/v1/models/claude-test" {
		t.Errorf("path = %q", path)
	}
	for k, v := range map[string]string{"X-Api-Key": testKey, "Anthropic-Version": "2099-01-01", "Anthropic-Beta": "feature-x"} {
		if got.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.Get(k), v)
		}
	}
	if got.Get("Authorization") != "" {
		t.Errorf("Authorization header sent")
	}
	missing := newProvider(t, srv.URL, func(c *anthropic.Config) { c.Model = "missing" })
	if err := missing.Ready(context.Background()); !errors.Is(err, errcat.ProviderInvalidModel) {
		t.Errorf("Ready(missing) = %v", err)
	}
	if p.Model() != "claude-test" {
		t.Errorf("Model() = %q", p.Model())
	}
}

func TestTransportFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProvider(t, "http://"+addr, nil)
	_, err = p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, errcat.ProviderUnavailable) {
		t.Errorf("connection refused: %v", err)
	}

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	slow := newProvider(t, srv.URL, func(c *anthropic.Config) { c.Timeout = 50 * time.Millisecond })
	_, err = slow.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, errcat.ProviderUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("provider timeout: %v, want provider_unavailable wrapping DeadlineExceeded", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	start := time.Now()
	_, err = newProvider(t, srv.URL, nil).Complete(ctx, simpleRequest())
	if !errors.Is(err, context.Canceled) || errcat.Of(err) != "" {
		t.Errorf("cancelled: %v (category %q), want context.Canceled uncategorized", err, errcat.Of(err))
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("cancellation took %v", time.Since(start))
	}
}

func TestConnectionReuseAndConcurrency(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(okBody))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	p := newProvider(t, srv.URL, nil)
	for range 5 {
		if _, err := p.Complete(context.Background(), simpleRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential calls, want 1", n)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := p.Complete(context.Background(), simpleRequest())
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestParseResponseMapping(t *testing.T) {
	for _, tc := range []struct {
		stop   string
		finish llm.FinishReason
	}{
		{`"end_turn"`, llm.FinishStop}, {`"stop_sequence"`, llm.FinishStop}, {`"pause_turn"`, llm.FinishStop},
		{`"max_tokens"`, llm.FinishLength}, {`"tool_use"`, llm.FinishToolCalls}, {`"refusal"`, llm.FinishContentFilter},
		{`"something_new"`, llm.FinishError}, {`null`, llm.FinishError},
	} {
		resp, err := anthropic.ParseResponse([]byte(`{"type":"message","role":"assistant","content":[],"stop_reason":` + tc.stop + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if resp.FinishReason != tc.finish {
			t.Errorf("stop_reason %s: finish %q, want %q", tc.stop, resp.FinishReason, tc.finish)
		}
		if resp.Usage.Reported() {
			t.Errorf("usage reported without a usage member: %+v", resp.Usage)
		}
	}
	resp, err := anthropic.ParseResponse([]byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"a"},{"type":"server_tool_use","id":"s"},{"type":"tool_use","id":"t","name":"f","input":"{bad"}],"stop_reason":"weird","usage":{"input_tokens":-1,"output_tokens":2,"cache_read_input_tokens":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != llm.FinishError || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Arguments != nil {
		t.Errorf("degraded response: %+v", resp)
	}
	if resp.Usage.PromptTokens != nil || *resp.Usage.CompletionTokens != 2 || resp.Usage.TotalTokens != nil || resp.Usage.CachedTokens != nil {
		t.Errorf("usage: %+v", resp.Usage)
	}
}
