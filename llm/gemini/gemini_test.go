package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/internal/spectest"
)

const testKey = "AIza-secret-key-123"

func readTestdata(t testing.TB, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newProvider(t testing.TB, url string, mod ...func(*gemini.Config)) *gemini.Provider {
	t.Helper()
	cfg := gemini.Config{BaseURL: url, APIKey: testKey, Model: "gemini-test"}
	for _, f := range mod {
		f(&cfg)
	}
	p, err := gemini.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var weatherTool = llm.Tool{Name: "get_weather", Description: "Weather.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string"}},"required":["location"]}`)}

var timeTool = llm.Tool{Name: "get_time", Description: "Time.", Parameters: json.RawMessage(`{"type":"object"}`)}

func TestParseResponseRecorded(t *testing.T) {
	tests := []struct {
		file string
		want llm.Response
	}{
		{"resp_signed_text.json", llm.Response{
			Message: llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(
				llm.ThinkingBlock("Thinking about units.", ""),
				llm.Block{Type: llm.BlockText, Text: "It is 22C.", Signature: "c2lnLXRleHQ="},
			)},
			FinishReason: llm.FinishStop,
			Usage:        llm.Usage{PromptTokens: new(11), CompletionTokens: new(5), TotalTokens: new(30), CachedTokens: new(0)},
		}},
		{"resp_call_without_id.json", llm.Response{
			Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: gemini.ClientCallIDPrefix + "0", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris","unit":"c"}`), Signature: "c2lnLWNhbGw="},
				{ID: gemini.ClientCallIDPrefix + "1", Name: "get_time", Arguments: json.RawMessage(`{}`)},
			}},
			FinishReason: llm.FinishToolCalls,
			// "12" is a malformed counter: not reported, the others stand.
			Usage: llm.Usage{PromptTokens: new(40), TotalTokens: new(52)},
		}},
		{"resp_blocked_prompt.json", llm.Response{
			Message:      llm.Message{Role: llm.RoleAssistant, Content: llm.Text("")},
			FinishReason: llm.FinishContentFilter,
			Usage:        llm.Usage{PromptTokens: new(9), TotalTokens: new(9)},
		}},
		{"resp_malformed_call.json", llm.Response{
			Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: gemini.ClientCallIDPrefix + "0", Name: "get_weather"},
			}},
			FinishReason: llm.FinishToolCalls,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := readTestdata(t, tt.file)
			got, err := gemini.ParseResponse(body)
			if tt.file == "resp_malformed_call.json" {
				// The functionCall part makes the finish tool_calls, which is
				// not an error finish: non-object args are malformed.
				if !errors.Is(err, errcat.ProviderInvalidResponse) {
					t.Fatalf("ParseResponse: %v, want provider_invalid_response", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != string(body) {
				t.Error("Raw is not the body verbatim")
			}
			got.Raw = nil
			if diff := cmp.Diff(&tt.want, got, spectest.RawJSON()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseResponseInvalid(t *testing.T) {
	for _, body := range []string{``, `null`, `[]`, `{}`, `{"candidates":[]}`, `{"candidates":"x"}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]},"finishReason":"STOP"}]}`} {
		if _, err := gemini.ParseResponse([]byte(body)); !errors.Is(err, errcat.ProviderInvalidResponse) {
			t.Errorf("ParseResponse(%q) = %v, want provider_invalid_response", body, err)
		}
	}
}

func TestFinishReasons(t *testing.T) {
	for raw, want := range map[string]llm.FinishReason{
		"STOP": llm.FinishStop, "MAX_TOKENS": llm.FinishLength, "SAFETY": llm.FinishContentFilter,
		"RECITATION": llm.FinishContentFilter, "BLOCKLIST": llm.FinishContentFilter,
		"PROHIBITED_CONTENT": llm.FinishContentFilter, "SPII": llm.FinishContentFilter,
		"MALFORMED_FUNCTION_CALL": llm.FinishError, "UNEXPECTED_TOOL_CALL": llm.FinishError,
		"LANGUAGE": llm.FinishError, "OTHER": llm.FinishError, "IMAGE_SAFETY": llm.FinishError, "": llm.FinishError,
	} {
		body := `{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"finishReason":"` + raw + `"}]}`
		resp, err := gemini.ParseResponse([]byte(body))
		if err != nil || resp.FinishReason != want {
			t.Errorf("finishReason %q: got %v %v, want %s", raw, resp, err, want)
		}
	}
}

func TestParseError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		cat    errcat.Category
		code   string
		retry  time.Duration
	}{
		{"api key invalid", 400, nil, string(readTestdata(t, "err_api_key_invalid.json")), errcat.ProviderAuthentication, "INVALID_ARGUMENT", 0},
		{"rate limited retry info", 429, nil, string(readTestdata(t, "err_rate_limited.json")), errcat.ProviderRateLimit, "RESOURCE_EXHAUSTED", 37 * time.Second},
		{"rate limited header wins", 429, http.Header{"Retry-After": {"5"}}, string(readTestdata(t, "err_rate_limited.json")), errcat.ProviderRateLimit, "RESOURCE_EXHAUSTED", 5 * time.Second},
		{"unsupported mime in a list envelope", 400, nil, string(readTestdata(t, "err_unsupported_mime.json")), errcat.ProviderUnsupportedContentBlock, "INVALID_ARGUMENT", 0},
		{"file uri refused 403", 403, nil, `{"error":{"code":403,"message":"You do not have permission to access the File abc or it may not exist; invalid file uri","status":"PERMISSION_DENIED"}}`, errcat.ProviderUnsupportedContentBlock, "PERMISSION_DENIED", 0},
		{"unauthenticated 401", 401, nil, `{"error":{"code":401,"message":"no","status":"UNAUTHENTICATED"}}`, errcat.ProviderAuthentication, "UNAUTHENTICATED", 0},
		{"deadline 504", 504, nil, `{"error":{"code":504,"message":"slow","status":"DEADLINE_EXCEEDED"}}`, errcat.ProviderUnavailable, "DEADLINE_EXCEEDED", 0},
		{"bad gateway without body", 502, nil, `<html>bad gateway</html>`, errcat.ProviderUnavailable, "", 0},
		{"failed precondition", 400, nil, `{"error":{"code":400,"message":"User location is not supported","status":"FAILED_PRECONDITION"}}`, errcat.ProviderInvalidRequest, "FAILED_PRECONDITION", 0},
		{"payload too large", 413, nil, ``, errcat.ProviderInvalidRequest, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := gemini.ParseError(tt.status, tt.header, []byte(tt.body))
			if pe.Cat != tt.cat || pe.Code != tt.code || pe.RetryAfter != tt.retry || pe.StatusCode != tt.status || pe.Message == "" {
				t.Errorf("got cat=%s code=%q retry=%v status=%d msg=%q", pe.Cat, pe.Code, pe.RetryAfter, pe.StatusCode, pe.Message)
			}
		})
	}
}

// TestKeyNeverLeaks checks the API key travels only in its header, and
// that an error message echoing it is redacted.
func TestKeyNeverLeaks(t *testing.T) {
	var gotHeader, gotURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader, gotURL = r.Header.Get(gemini.APIKeyHeader), r.URL.String()
		w.WriteHeader(400)
		_, _ = w.Write(readTestdata(t, "err_api_key_invalid.json"))
	}))
	defer srv.Close()
	p := newProvider(t, srv.URL)
	_, err := p.Complete(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
	if gotHeader != testKey {
		t.Errorf("%s header %q, want the key", gemini.APIKeyHeader, gotHeader)
	}
	if strings.Contains(gotURL, testKey) || strings.Contains(gotURL, "key=") {
		t.Errorf("the key is in the URL %q", gotURL)
	}
	if !errors.Is(err, errcat.ProviderAuthentication) {
		t.Fatalf("err %v, want provider_authentication", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error leaks the key: %v", err)
	}
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Provider != gemini.ProviderName || pe.Op != "complete" || pe.StatusCode != 400 {
		t.Errorf("ProviderError %+v", pe)
	}
}

func TestReady(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		cat    errcat.Category
	}{
		{"listed", 200, `{"name":"models/gemini-test","supportedGenerationMethods":["generateContent","countTokens"]}`, ""},
		{"no generateContent", 200, `{"name":"models/gemini-test","supportedGenerationMethods":["embedContent"]}`, errcat.ProviderInvalidModel},
		{"not found", 404, `{"error":{"code":404,"message":"models/gemini-test is not found","status":"NOT_FOUND"}}`, errcat.ProviderInvalidModel},
		{"bad key", 400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}`, errcat.ProviderAuthentication},
		{"down", 503, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, errcat.ProviderUnavailable},
		{"garbage", 200, `not json`, errcat.ProviderInvalidResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var path, method string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path, method = r.URL.Path, r.Method
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			err := newProvider(t, srv.URL).Ready(context.Background())
			if method != http.MethodGet || path != "/v1beta/models/gemini-test" {
				t.Errorf("probe %s %s", method, path)
			}
			if errcat.Of(err) != tt.cat {
				t.Errorf("Ready = %v, want category %q", err, tt.cat)
			}
		})
	}
	if err := newProvider(t, "http://127.0.0.1:1").Ready(context.Background()); !errors.Is(err, errcat.ProviderUnavailable) {
		t.Errorf("unreachable: %v, want provider_unavailable", err)
	}
}

// TestRequestMapping covers wire details the fixtures do not: several
// system messages, consecutive tool results, minted IDs not sent back,
// signed text, foreign reasoning stripped, images, extras placement and
// canonical key order.
func TestRequestMapping(t *testing.T) {
	m := newMock(t, scripted{Body: json.RawMessage(okBody)})
	p := newProvider(t, m.URL)
	req := &llm.Request{
		Messages: []llm.Message{
			llm.SystemText("Be brief."),
			llm.UserBlocks(llm.TextBlock("Look:"), llm.ImageURL("https://example.com/a.webp?x=1"), llm.ImageURL("gs://bucket/scan")),
			{Role: llm.RoleAssistant, Content: llm.Blocks(
				llm.ThinkingBlock("foreign", "anthropic-sig"),
				llm.RedactedThinkingBlock("opaque"),
				llm.ThinkingBlock("mine", ""),
				llm.Block{Type: llm.BlockText, Text: "Checking.", Signature: "sig-t"},
			), ToolCalls: []llm.ToolCall{
				{ID: gemini.ClientCallIDPrefix + "0", Name: "get_weather", Arguments: json.RawMessage(`{"unit":"c","location":"Paris"}`), Signature: "sig-c"},
				{ID: "call_b", Name: "get_time"},
			}},
			llm.ToolResult(gemini.ClientCallIDPrefix+"0", "18C"),
			llm.ToolResult("call_b", "noon"),
		},
		Tools: []llm.Tool{weatherTool, timeTool},
		Config: llm.Config{Temperature: new(0.5), Extras: map[string]any{
			"topK": 40, "thinkingConfig": map[string]any{"thinkingBudget": 0, "includeThoughts": true}, "temperature": 0.5,
		}},
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := string(m.requests()[0].Body)
	want := `{"contents":[` +
		`{"role":"user","parts":[{"text":"Look:"},{"fileData":{"mimeType":"image/webp","fileUri":"https://example.com/a.webp?x=1"}},{"fileData":{"fileUri":"gs://bucket/scan"}}]},` +
		`{"role":"model","parts":[{"text":"mine","thought":true},{"text":"Checking.","thoughtSignature":"sig-t"},` +
		`{"functionCall":{"name":"get_weather","args":{"location":"Paris","unit":"c"}},"thoughtSignature":"sig-c"},` +
		`{"functionCall":{"name":"get_time","id":"call_b","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"result":"18C"}}},` +
		`{"functionResponse":{"name":"get_time","id":"call_b","response":{"result":"noon"}}}]}],` +
		`"systemInstruction":{"parts":[{"text":"Be brief."}]},` +
		`"tools":[{"functionDeclarations":[{"name":"get_weather","description":"Weather.","parameters":{"properties":{"location":{"type":"string"},"unit":{"type":"string"}},"required":["location"],"type":"object"}},` +
		`{"name":"get_time","description":"Time.","parameters":{"type":"object"}}]}],` +
		`"generationConfig":{"temperature":0.5,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":0},"topK":40}}`
	if got != want {
		t.Errorf("wire body\n got: %s\nwant: %s", got, want)
	}
	if ct := m.requests()[0].Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestPreSendRejections(t *testing.T) {
	tests := []struct {
		name string
		req  llm.Request
		cat  errcat.Category
		is   error
	}{
		{"gif inline", llm.Request{Messages: []llm.Message{llm.UserBlocks(llm.ImageInline(llm.MediaTypeGIF, "R0lG"))}}, errcat.ProviderUnsupportedContentBlock, nil},
		{"conflicting scalar extra", llm.Request{Messages: []llm.Message{llm.UserText("hi")},
			Config: llm.Config{MaxTokens: new(64), Extras: map[string]any{"maxOutputTokens": 128}}}, errcat.ProviderInvalidRequest, llm.ErrManagedField},
		{"conflicting mime on the native path", llm.Request{Messages: []llm.Message{llm.UserText("hi")}, ResponseSchema: json.RawMessage(`{"type":"object"}`),
			Config: llm.Config{Extras: map[string]any{"responseMimeType": "text/plain"}}}, errcat.ProviderInvalidRequest, llm.ErrManagedField},
		{"required without tools", llm.Request{Messages: []llm.Message{llm.UserText("hi")}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}}, errcat.ProviderInvalidRequest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMock(t)
			_, err := newProvider(t, m.URL).Complete(context.Background(), &tt.req)
			if errcat.Of(err) != tt.cat || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("err %v, want %s %v", err, tt.cat, tt.is)
			}
			if n := len(m.requests()); n != 0 {
				t.Fatalf("sent %d requests", n)
			}
		})
	}
}

// TestExtrasEscapeHatch: with a declared field absent, an extras key of
// its wire name rides untouched; a matching one is a no-op; a malformed
// stopSequences extra is ignored.
func TestExtrasEscapeHatch(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  llm.Config
		want string
	}{
		"absent declared field": {llm.Config{Extras: map[string]any{"maxOutputTokens": 99}}, `{"maxOutputTokens":99}`},
		"matching scalar":       {llm.Config{Temperature: new(1.0), Extras: map[string]any{"temperature": 1}}, `{"temperature":1}`},
		"malformed stop extra":  {llm.Config{StopSequences: []string{"END"}, Extras: map[string]any{"stopSequences": []any{"A", 1}}}, `{"stopSequences":["END"]}`},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMock(t, scripted{Body: json.RawMessage(okBody)})
			if _, err := newProvider(t, m.URL).Complete(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Config: tc.cfg}); err != nil {
				t.Fatal(err)
			}
			var body struct{ GenerationConfig json.RawMessage }
			_ = json.Unmarshal(m.requests()[0].Body, &body)
			if string(body.GenerationConfig) != tc.want {
				t.Errorf("generationConfig %s, want %s", body.GenerationConfig, tc.want)
			}
		})
	}
}

// TestWireByteStability: structurally equal requests give equal bytes,
// however their JSON was written.
func TestWireByteStability(t *testing.T) {
	m := newMock(t, scripted{Body: json.RawMessage(okBody)}, scripted{Body: json.RawMessage(okBody)})
	p := newProvider(t, m.URL)
	mk := func(params, args string, extras map[string]any) *llm.Request {
		return &llm.Request{
			Messages: []llm.Message{llm.UserText("hi"), llm.AssistantToolCalls(llm.ToolCall{ID: "c1", Name: "t", Arguments: json.RawMessage(args)}), llm.ToolResult("c1", "ok")},
			Tools:    []llm.Tool{{Name: "t", Parameters: json.RawMessage(params)}},
			Config:   llm.Config{Extras: extras},
		}
	}
	a := mk(`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`, `{"b":"x","a":1}`, map[string]any{"z": 1, "a": map[string]any{"y": 1, "x": 2}})
	b := mk(`{ "properties": {"a":{"type":"integer"}, "b":{"type":"string"}}, "type":"object" }`, `{"a":1, "b":"x"}`, map[string]any{"a": map[string]any{"x": 2, "y": 1}, "z": 1})
	for _, r := range []*llm.Request{a, b} {
		if _, err := p.Complete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	reqs := m.requests()
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("bodies differ:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
}

// TestResponseToolCallChecks: under a non-error finish a tool call must
// name a declared tool with conforming arguments.
func TestResponseToolCallChecks(t *testing.T) {
	for name, part := range map[string]string{
		"undeclared tool": `{"functionCall":{"name":"launch","args":{}}}`,
		"bad arguments":   `{"functionCall":{"name":"get_weather","args":{"unit":"c"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			m := newMock(t, scripted{Body: json.RawMessage(`{"candidates":[{"content":{"role":"model","parts":[` + part + `]},"finishReason":"STOP"}]}`)})
			_, err := newProvider(t, m.URL).Complete(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Tools: []llm.Tool{weatherTool}})
			if !errors.Is(err, errcat.ProviderInvalidResponse) {
				t.Fatalf("err %v, want provider_invalid_response", err)
			}
		})
	}
}

func TestStructuredOutputInvalid(t *testing.T) {
	m := newMock(t, scripted{Body: json.RawMessage(`{"candidates":[{"content":{"role":"model","parts":[{"text":"{\"value\":\"x\"}"}]},"finishReason":"MAX_TOKENS"}]}`)})
	_, err := newProvider(t, m.URL).Complete(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")},
		ResponseSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)})
	var soe *llm.StructuredOutputError
	if !errors.As(err, &soe) || soe.OutputContent != `{"value":"x"}` || soe.FinishReason != llm.FinishLength {
		t.Fatalf("err %v (%+v), want structured_output_invalid with the content and finish", err, soe)
	}
}

func TestCancellation(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p := newProvider(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := llm.Complete(ctx, p, &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Retry: &llm.RetryPolicy{MaxAttempts: 3}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if errcat.Of(err).Transient() {
		t.Fatal("cancellation classified as transient")
	}

	// A Timeout with no caller deadline is provider_unavailable.
	p = newProvider(t, srv.URL, func(c *gemini.Config) { c.Timeout = 20 * time.Millisecond })
	_, err = p.Complete(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
	if !errors.Is(err, errcat.ProviderUnavailable) {
		t.Fatalf("timeout: %v, want provider_unavailable", err)
	}
}

// TestConnectionReuse: sequential calls, successes and errors alike, ride
// one keep-alive connection; concurrent calls are not serialized.
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int32
	var inflight, peak atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		if strings.Contains(r.Header.Get("X-Fail"), "1") {
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}`))
			return
		}
		_, _ = w.Write([]byte(okBody))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	p := newProvider(t, srv.URL)
	pf := newProvider(t, srv.URL, func(c *gemini.Config) { c.ExtraHeaders = map[string]string{"X-Fail": "1"} })
	req := &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}
	for i := range 6 {
		pp := p
		if i%2 == 1 {
			pp = pf
		}
		_, _ = pp.Complete(context.Background(), req)
	}
	if n := conns.Load(); n > 2 { // one per Provider's pool
		t.Errorf("%d connections for 6 sequential calls on 2 providers", n)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := p.Complete(context.Background(), req); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if peak.Load() < 2 {
		t.Errorf("peak concurrency %d: calls were serialized", peak.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []gemini.Config{
		{},
		{Model: "../v1/files"},
		{Model: "gemini?key=x"},
		{Model: "m", BaseURL: "ftp://x"},
		{Model: "m", StructuredOutput: "tool"},
		{Model: "m", APIVersion: "v1/x"},
	} {
		if _, err := gemini.New(c); !errors.Is(err, gemini.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	for _, m := range []string{"gemini-2.5-flash", "models/gemini-2.5-flash", "tunedModels/my-model-1"} {
		if _, err := gemini.New(gemini.Config{Model: m}); err != nil {
			t.Errorf("New(%q): %v", m, err)
		}
	}
}

func TestSentinelPrefix(t *testing.T) {
	if !strings.HasPrefix(gemini.ErrInvalidConfig.Error(), "gemini: ") {
		t.Errorf("sentinel %q lacks the package prefix", gemini.ErrInvalidConfig)
	}
}

func TestInferMediaType(t *testing.T) {
	for u, want := range map[string]string{
		"https://x/cat.JPG": llm.MediaTypeJPEG, "https://x/a.jpeg#f": llm.MediaTypeJPEG, "https://x/a.png?s=1": llm.MediaTypePNG,
		"data:image/webp;base64,AAA": llm.MediaTypeWebP, "gs://b/photo.heic": "image/heic", "https://x/file": "",
	} {
		if got := gemini.InferMediaType(u); got != want {
			t.Errorf("InferMediaType(%q) = %q, want %q", u, got, want)
		}
	}
}
