package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// oaiToken is the bearer token of the test servers (tenant "acme").
const oaiToken = "test-token-0123456789"

// newOpenAIServer serves the demo agent as armature serve does: an
// SQLite store in a temporary directory and durable checkpoints. The
// agent is "demo"; the task hint "support" routes
// to it.
func newOpenAIServer(t *testing.T) *httptest.Server {
	t.Helper()
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	return newOpenAIServerWith(t, a)
}

// newOpenAIServerWith serves agent a as newOpenAIServer serves the demo.
func newOpenAIServerWith(t *testing.T, a *agent.Agent, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	return servertest.New(t, a, append([]func(*server.Config){func(c *server.Config) {
		c.Agents[0].Tools = []string{"lookup_order", "issue_refund"}
		c.TaskHints = map[string]string{"support": "demo"}
		c.Tokens = []server.Token{{Secret: oaiToken, Tenant: "acme"}}
	}}, mutate...)...)
}

// call sends a request with the test token and decodes a JSON answer
// into out (when not nil).
func call(t *testing.T, ts *httptest.Server, method, path string, body string, header map[string]string, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp
}

// completion is the chat.completion shape as a client decodes it.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string            `json:"role"`
			Content   string            `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
	XArmature xArmature `json:"x_armature"`
}

type xArmature struct {
	SessionID string `json:"session_id"`
	Outcome   string `json:"outcome"`
	ToolCalls []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Result string `json:"result"`
	} `json:"tool_calls"`
	Suspended *struct {
		SignalID     string `json:"signal_id"`
		InvocationID string `json:"invocation_id"`
		SessionID    string `json:"session_id"`
		ResumeURL    string `json:"resume_url"`
	} `json:"suspended"`
}

type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func userBody(model, text string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	return string(b)
}

func TestOpenAICompletion(t *testing.T) {
	ts := newOpenAIServer(t)
	type tool struct{ Name, Status, Result string }
	for _, tc := range []struct {
		name, model, text, content string
		tools                      []tool
	}{
		{name: "text", model: "demo", text: "hello",
			content: `You said: "hello". I'm the offline demo agent: ask me about an order ("where is order 42?") or for a refund.`},
		{name: "task hint", model: "support", text: "hi",
			content: `You said: "hi". I'm the offline demo agent: ask me about an order ("where is order 42?") or for a refund.`},
		{name: "server-side tool loop", model: "demo", text: "where is order 7?",
			content: "Here is what I found: order 7: shipped, arriving Thursday",
			tools:   []tool{{"lookup_order", "completed", "order 7: shipped, arriving Thursday"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got completion
			resp := call(t, ts, "POST", "/v1/chat/completions", userBody(tc.model, tc.text), nil, &got)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			sid := resp.Header.Get(server.SessionHeader)
			if sid == "" || got.XArmature.SessionID != sid {
				t.Errorf("session: header %q, x_armature %q", sid, got.XArmature.SessionID)
			}
			if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Object != "chat.completion" || got.Created == 0 || got.Model != tc.model || got.Usage == nil {
				t.Errorf("envelope: %+v", got)
			}
			if len(got.Choices) != 1 {
				t.Fatalf("choices: %+v", got.Choices)
			}
			c := got.Choices[0]
			if c.Message.Role != "assistant" || c.FinishReason != "stop" || c.Message.ToolCalls != nil {
				t.Errorf("choice: %+v", c)
			}
			if diff := cmp.Diff(tc.content, c.Message.Content); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			var tools []tool
			for _, x := range got.XArmature.ToolCalls {
				tools = append(tools, tool{x.Name, x.Status, x.Result})
			}
			if diff := cmp.Diff(tc.tools, tools); diff != "" {
				t.Errorf("x_armature.tool_calls (-want +got):\n%s", diff)
			}
			if got.XArmature.Outcome != "completed" {
				t.Errorf("outcome %q", got.XArmature.Outcome)
			}
			// The turn is recorded as a run like any other.
			var runs struct {
				Runs []struct {
					Status string `json:"status"`
				} `json:"runs"`
			}
			call(t, ts, "GET", "/v1/sessions/"+sid+"/runs", "", nil, &runs)
			if len(runs.Runs) != 1 || runs.Runs[0].Status != "completed" {
				t.Errorf("runs %+v", runs)
			}
		})
	}
}

func TestOpenAIRequestErrors(t *testing.T) {
	ts := newOpenAIServer(t)
	for _, tc := range []struct {
		name, body string
		header     map[string]string
		status     int
		typ, code  string
	}{
		{"unknown model", userBody("gpt-4o", "hi"), nil, 404, "invalid_request_error", "model_not_found"},
		{"not JSON", "{", nil, 400, "invalid_request_error", "invalid_request"},
		{"no messages", `{"model":"demo","messages":[]}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"last message not user", `{"model":"demo","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"empty user content", `{"model":"demo","messages":[{"role":"user","content":""}]}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"n", `{"model":"demo","n":2,"messages":[{"role":"user","content":"a"}]}`, nil, 400, "invalid_request_error", "unsupported_parameter"},
		{"image of a file: URL", `{"model":"demo","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"image of a data: URL not an image", `{"model":"demo","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/html;base64,PGh0bWw+"}}]}]}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"client tools", `{"model":"demo","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"a"}]}`, nil, 400, "invalid_request_error", "unsupported_parameter"},
		{"response_format json_schema", `{"model":"demo","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"messages":[{"role":"user","content":"a"}]}`, nil, 400, "invalid_request_error", "unsupported_parameter"},
		{"response_format json_object", `{"model":"demo","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"a"}]}`, nil, 400, "invalid_request_error", "unsupported_parameter"},
		{"bad session header", userBody("demo", "hi"), map[string]string{server.SessionHeader: "a/b"}, 400, "invalid_request_error", "invalid_request"},
		{"header and metadata disagree", `{"model":"demo","metadata":{"session_id":"x"},"messages":[{"role":"user","content":"a"}]}`,
			map[string]string{server.SessionHeader: "y"}, 400, "invalid_request_error", "invalid_request"},
		{"no token", userBody("demo", "hi"), map[string]string{"Authorization": "Bearer wrong-token-0123456789"}, 401, "authentication_error", "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got apiError
			resp := call(t, ts, "POST", "/v1/chat/completions", tc.body, tc.header, &got)
			if resp.StatusCode != tc.status || got.Error.Type != tc.typ || got.Error.Code != tc.code || got.Error.Message == "" {
				t.Errorf("got %d %+v, want %d %s %s", resp.StatusCode, got, tc.status, tc.typ, tc.code)
			}
		})
	}
}

func TestOpenAIModels(t *testing.T) {
	ts := newOpenAIServer(t)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object string
			OwnedBy    string `json:"owned_by"`
		} `json:"data"`
	}
	call(t, ts, "GET", "/v1/models", "", nil, &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID+":"+m.Object)
	}
	if diff := cmp.Diff([]string{"demo:model", "support:model"}, ids); list.Object != "list" || diff != "" {
		t.Errorf("models %q (-want +got):\n%s", list.Object, diff)
	}
	var one struct{ ID string }
	if resp := call(t, ts, "GET", "/v1/models/support", "", nil, &one); resp.StatusCode != 200 || one.ID != "support" {
		t.Errorf("GET /v1/models/support: %d %+v", resp.StatusCode, one)
	}
	var e apiError
	if resp := call(t, ts, "GET", "/v1/models/nope", "", nil, &e); resp.StatusCode != 404 || e.Error.Code != "model_not_found" {
		t.Errorf("GET /v1/models/nope: %d %+v", resp.StatusCode, e)
	}
}

// storedMessages returns a session's stored history as role: text lines.
func storedMessages(t *testing.T, ts *httptest.Server, id string) []string {
	t.Helper()
	var s struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if resp := call(t, ts, "GET", "/v1/sessions/"+id, "", nil, &s); resp.StatusCode != 200 {
		t.Fatalf("GET session %s: %d", id, resp.StatusCode)
	}
	var out []string
	for _, m := range s.Messages {
		var text string
		_ = json.Unmarshal(m.Content, &text)
		out = append(out, m.Role+": "+text)
	}
	return out
}

func TestOpenAISessions(t *testing.T) {
	ts := newOpenAIServer(t)
	echo := func(s string) string {
		return `assistant: You said: "` + s + `". I'm the offline demo agent: ask me about an order ("where is order 42?") or for a refund.`
	}

	t.Run("fresh session seeded with the request's messages", func(t *testing.T) {
		body := `{"model":"demo","messages":[
			{"role":"system","content":"ignored: the agent has its own instructions"},
			{"role":"user","content":"first"},
			{"role":"assistant","content":"an earlier answer"},
			{"role":"user","content":[{"type":"text","text":"second"}]}]}`
		var got completion
		resp := call(t, ts, "POST", "/v1/chat/completions", body, nil, &got)
		sid := resp.Header.Get(server.SessionHeader)
		if resp.StatusCode != 200 || sid == "" {
			t.Fatalf("status %d, session %q", resp.StatusCode, sid)
		}
		want := []string{"user: first", "assistant: an earlier answer", "user: ", echo("second")}
		if diff := cmp.Diff(want, storedMessages(t, ts, sid)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		// The same stateless request again gets another session.
		resp2 := call(t, ts, "POST", "/v1/chat/completions", body, nil, nil)
		if sid2 := resp2.Header.Get(server.SessionHeader); sid2 == "" || sid2 == sid {
			t.Errorf("second stateless request: session %q after %q", sid2, sid)
		}
	})

	t.Run("named session keeps its stored history", func(t *testing.T) {
		h := map[string]string{server.SessionHeader: "conv-1"}
		call(t, ts, "POST", "/v1/chat/completions", userBody("demo", "one"), h, nil)
		// A client resending the conversation: only the last message is
		// the turn; the rest is assumed to be the stored history.
		body := `{"model":"demo","messages":[{"role":"user","content":"one"},{"role":"assistant","content":"whatever the client kept"},{"role":"user","content":"two"}]}`
		resp := call(t, ts, "POST", "/v1/chat/completions", body, h, nil)
		if got := resp.Header.Get(server.SessionHeader); got != "conv-1" {
			t.Errorf("session header %q", got)
		}
		want := []string{"user: one", echo("one"), "user: two", echo("two")}
		if diff := cmp.Diff(want, storedMessages(t, ts, "conv-1")); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})

	t.Run("new named session is seeded", func(t *testing.T) {
		body := `{"model":"demo","metadata":{"session_id":"conv-2"},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`
		var got completion
		call(t, ts, "POST", "/v1/chat/completions", body, nil, &got)
		if got.XArmature.SessionID != "conv-2" {
			t.Errorf("session %q", got.XArmature.SessionID)
		}
		want := []string{"user: a", "assistant: b", "user: c", echo("c")}
		if diff := cmp.Diff(want, storedMessages(t, ts, "conv-2")); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
}

func TestOpenAISuspendAndResume(t *testing.T) {
	ts := newOpenAIServer(t)
	var got completion
	resp := call(t, ts, "POST", "/v1/chat/completions", userBody("demo", "refund order 3 please"), nil, &got)
	if resp.StatusCode != 200 || len(got.Choices) != 1 {
		t.Fatalf("status %d: %+v", resp.StatusCode, got)
	}
	c := got.Choices[0]
	if want := `I need your approval to call issue_refund with {"order":"3","amount":30}.`; c.Message.Content != want || c.FinishReason != "stop" {
		t.Errorf("choice %+v, want content %q", c, want)
	}
	x := got.XArmature
	if x.Outcome != "suspended" || x.Suspended == nil || x.Suspended.SignalID == "" || x.Suspended.SessionID != x.SessionID ||
		x.Suspended.InvocationID == "" ||
		x.Suspended.ResumeURL != "/v1/sessions/"+x.SessionID+"/signals" {
		t.Fatalf("x_armature %+v", x)
	}
	if len(x.ToolCalls) != 1 || x.ToolCalls[0].Name != "issue_refund" || x.ToolCalls[0].Status != "requested" {
		t.Errorf("tool calls %+v", x.ToolCalls)
	}
	var out struct {
		Outcome string `json:"outcome"`
		Replies []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"replies"`
	}
	sig, _ := json.Marshal(map[string]any{"signal_id": x.Suspended.SignalID, "invocation_id": x.Suspended.InvocationID,
		"payload": map[string]any{"approval": map[string]any{"approved": true}}})
	call(t, ts, "POST", x.Suspended.ResumeURL, string(sig), nil, &out)
	if out.Outcome != "completed" || len(out.Replies) == 0 ||
		out.Replies[len(out.Replies)-1].Content != "Here is what I found: refunded $30.00 for order 3" {
		t.Errorf("resumed: %+v", out)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string
	Data  string
}

// readSSE reads the events of a stream as a plain client (curl) sees
// them.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data += strings.TrimPrefix(line, "data: ")
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage      *json.RawMessage `json:"usage"`
	XArmature  *xArmature       `json:"x_armature"`
	ToolCallID string           `json:"tool_call_id"`
	Name       string           `json:"name"`
	Status     string           `json:"status"`
}

// stream posts a streaming completion and returns its events.
func stream(t *testing.T, ts *httptest.Server, body string) (*http.Response, []sseEvent) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, ct, raw)
	}
	return resp, readSSE(t, resp.Body)
}

func TestOpenAIStreamRawSSE(t *testing.T) {
	ts := newOpenAIServer(t)
	_, events := stream(t, ts, `{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"where is order 8?"}]}`)
	if len(events) < 4 || events[len(events)-1] != (sseEvent{Data: "[DONE]"}) {
		t.Fatalf("events %+v", events)
	}
	var content strings.Builder
	var progress []string
	var final *chunk
	id := ""
	usage := false
	for i, ev := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, ev.Data)
		}
		if id == "" {
			id = c.ID
		}
		if c.ID != id || c.Object != "chat.completion.chunk" {
			t.Errorf("event %d: id %q object %q", i, c.ID, c.Object)
		}
		switch ev.Event {
		case server.ToolProgressEvent:
			// Progress frames are separate events whose delta is empty:
			// nothing of them reaches the content.
			if len(c.Choices) != 1 || c.Choices[0].Delta.Content != nil || c.Choices[0].Delta.Role != "" {
				t.Errorf("progress frame with a delta: %s", ev.Data)
			}
			progress = append(progress, c.Name+" "+c.Status)
			if c.ToolCallID == "" {
				t.Errorf("progress frame without tool_call_id: %s", ev.Data)
			}
		case "":
			if c.ToolCallID != "" || c.Status != "" {
				t.Errorf("content chunk carries progress: %s", ev.Data)
			}
			if i == 0 && (len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant") {
				t.Errorf("first chunk does not announce the role: %s", ev.Data)
			}
			if c.Usage != nil {
				usage = len(c.Choices) == 0
				continue
			}
			if d := c.Choices[0].Delta.Content; d != nil {
				content.WriteString(*d)
			}
			if c.Choices[0].FinishReason != nil {
				final = &c
			}
		default:
			t.Errorf("unexpected event %q", ev.Event)
		}
	}
	if diff := cmp.Diff([]string{"lookup_order running", "lookup_order completed"}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if got, want := content.String(), "Here is what I found: order 8: shipped, arriving Thursday"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if final == nil || *final.Choices[0].FinishReason != "stop" || final.XArmature == nil || final.XArmature.Outcome != "completed" ||
		len(final.XArmature.ToolCalls) != 1 || final.XArmature.ToolCalls[0].Status != "completed" {
		t.Errorf("final chunk %+v", final)
	}
	if !usage {
		t.Error("no usage chunk despite include_usage")
	}
}

func TestOpenAIStreamSuspended(t *testing.T) {
	ts := newOpenAIServer(t)
	_, events := stream(t, ts, `{"model":"demo","stream":true,"messages":[{"role":"user","content":"refund order 5"}]}`)
	var content strings.Builder
	var x *xArmature
	for _, ev := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatal(err)
		}
		if ev.Event != "" || len(c.Choices) == 0 {
			continue
		}
		if d := c.Choices[0].Delta.Content; d != nil {
			content.WriteString(*d)
		}
		if c.XArmature != nil {
			x = c.XArmature
		}
	}
	if want := `I need your approval to call issue_refund with {"order":"5","amount":30}.`; content.String() != want {
		t.Errorf("content %q, want %q", content.String(), want)
	}
	if x == nil || x.Suspended == nil || x.Suspended.SignalID == "" {
		t.Errorf("x_armature %+v", x)
	}
}

// failingModel streams partial (if any) and then fails as an unavailable
// provider would, with internals in the error that must not leak.
type failingModel struct{ partial string }

func (failingModel) Ready(context.Context) error { return nil }

func (m failingModel) err() error {
	return &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "fake", Op: "stream",
		Message: "dial tcp 10.0.0.7:443: connection refused"}
}

func (m failingModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, m.err()
}

func (m failingModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		if m.partial != "" && !yield(&llm.Chunk{Content: m.partial, Raw: json.RawMessage(`{}`)}, nil) {
			return
		}
		yield(nil, m.err())
	}
}

func TestOpenAIErroredTurn(t *testing.T) {
	newServer := func(partial string) *httptest.Server {
		a, err := agent.New(agent.Config{Provider: failingModel{partial: partial}})
		if err != nil {
			t.Fatal(err)
		}
		return newOpenAIServerWith(t, a)
	}
	wantErr := apiError{}
	wantErr.Error.Message = chat.DefaultRetryableTransientReply
	wantErr.Error.Type = "server_error"
	wantErr.Error.Code = string(errcat.ProviderUnavailable)

	t.Run("completion", func(t *testing.T) {
		var got apiError
		resp := call(t, newServer(""), "POST", "/v1/chat/completions", userBody("demo", "hi"), nil, &got)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if diff := cmp.Diff(wantErr, got); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
	t.Run("stream that sent nothing", func(t *testing.T) {
		var got apiError
		resp := call(t, newServer(""), "POST", "/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil, &got)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if diff := cmp.Diff(wantErr, got); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
	t.Run("stream that sent text", func(t *testing.T) {
		_, events := stream(t, newServer("partial "), `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		last := events[len(events)-1]
		var got apiError
		if err := json.Unmarshal([]byte(last.Data), &got); err != nil || last.Event != "error" {
			t.Fatalf("last event %+v", last)
		}
		if diff := cmp.Diff(wantErr, got); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
		var c chunk
		if err := json.Unmarshal([]byte(events[1].Data), &c); err != nil || *c.Choices[0].Delta.Content != "partial " {
			t.Errorf("second event %+v", events[1])
		}
	})
}
