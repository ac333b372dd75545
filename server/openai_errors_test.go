package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/internal/syncbuf"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/server"
)

// rawRequest sends a request over a fresh connection: head (request
// line and headers, without the blank line) and body as given; cut half
// closes the connection after the body, else it stays open. It returns
// the response.
func rawRequest(t *testing.T, addr, head, body string, cut bool) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	if cut {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestBodyReadErrors: a body shorter than its Content-Length (the
// client closes its side) is 400, and one sent slower than the read
// timeout 408, in each surface's error shape, never a 500 with an
// ERROR log (the OpenAI paths answered 500 internal_error).
func TestBodyReadErrors(t *testing.T) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	logs := &syncbuf.Buffer{}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a)}}, Sessions: store,
		Tokens: []server.Token{{Secret: oaiToken, Tenant: "acme"}}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config.ReadTimeout = 500 * time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	for _, tc := range []struct {
		path, body string
		shape      string // "openai", "rest" or "openharness"
	}{
		{"/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi`, "openai"},
		{"/v1/responses", `{"model":"demo","input":"hi`, "openai"},
		{"/v1/sessions/tr/messages", `{"content":"hi`, "rest"},
		{"/v1/openharness", `{"protocol_version":"1.0.0","request":{"context":{"user_intent":"hi`, "openharness"},
	} {
		for _, c := range []struct {
			name   string
			cut    bool
			status int
			code   string
		}{
			{"truncated", true, http.StatusBadRequest, "invalid_request"},
			{"too slow", false, http.StatusRequestTimeout, server.CodeRequestTimeout},
		} {
			t.Run(tc.path+"/"+c.name, func(t *testing.T) {
				head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000",
					tc.path, addr, oaiToken)
				resp := rawRequest(t, addr, head, tc.body, c.cut)
				raw, _ := io.ReadAll(resp.Body)
				var got struct {
					Error    map[string]any `json:"error"`
					Response struct {
						Error map[string]any `json:"error"`
					} `json:"response"`
				}
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
				}
				e := got.Error
				if tc.shape == "openharness" {
					e = got.Response.Error
				}
				if resp.StatusCode != c.status || e["code"] != c.code || e["message"] == "" {
					t.Fatalf("got %d %s, want %d %s", resp.StatusCode, raw, c.status, c.code)
				}
				if _, hasType := e["type"]; hasType != (tc.shape == "openai") {
					t.Errorf("error %v: not in the %s shape", e, tc.shape)
				}
			})
		}
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("a client's fault logged as an error:\n%s", l)
	}
}

// openAIErr is an error answer as a client decodes it, with its raw
// "error" object (to see that "param" is there, null or not).
type openAIErr struct {
	status int
	header http.Header
	raw    map[string]any
	shape  struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
}

func callError(t *testing.T, ts *httptest.Server, method, path, body string, header map[string]string) openAIErr {
	t.Helper()
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	resp := call(t, ts, method, path, body, header, &doc)
	got := openAIErr{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(doc.Error, &got.raw); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, doc.Error)
	}
	_ = json.Unmarshal(doc.Error, &got.shape)
	return got
}

// TestOpenAIErrorShapes: every error answered on an OpenAI path has
// OpenAI's shape {"message", "type", "param", "code"}, also those
// answered before routing (origin, media type) and for unserved routes;
// a wrong method on a served path is 405 with Allow; decoding errors
// say what JSON was expected, never a Go type, and name the field in
// param; every path under /v1 but Armature's own APIs' is OpenAI's
// (an OpenAI client trying /v1/embeddings reads a 404 it understands).
// The REST paths keep their envelope.
func TestOpenAIErrorShapes(t *testing.T) {
	ts := newOpenAIServer(t)
	userMsg := `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		typ, code, param, allow  string
	}{
		{"forbidden origin", "POST", "/v1/chat/completions", userBody("demo", "hi"), map[string]string{"Origin": "https://evil.example"},
			403, "permission_error", server.CodeForbiddenOrigin, "", ""},
		{"not JSON media type", "POST", "/v1/responses", `{}`, map[string]string{"Content-Type": "text/plain"},
			415, "invalid_request_error", server.CodeUnsupportedMediaType, "", ""},
		{"no token on an unserved route", "DELETE", "/v1/responses/abc", "", map[string]string{"Authorization": ""},
			401, "authentication_error", server.CodeUnauthorized, "", ""},
		{"GET chat completions", "GET", "/v1/chat/completions", "", nil, 405, "invalid_request_error", server.CodeMethodNotAllowed, "", "POST"},
		{"DELETE a response", "DELETE", "/v1/responses/abc", "", nil, 405, "invalid_request_error", server.CodeMethodNotAllowed, "", "GET, HEAD"},
		{"POST models", "POST", "/v1/models", `{}`, nil, 405, "invalid_request_error", server.CodeMethodNotAllowed, "", "GET, HEAD"},
		{"cancel a response", "POST", "/v1/responses/abc/cancel", "", nil, 404, "not_found_error", server.CodeNotFound, "", ""},
		{"embeddings", "POST", "/v1/embeddings", `{"model":"demo","input":"x"}`, nil, 404, "not_found_error", server.CodeNotFound, "", ""},
		{"legacy completions", "POST", "/v1/completions", `{"model":"demo","prompt":"x"}`, nil, 404, "not_found_error", server.CodeNotFound, "", ""},
		{"an unknown resource", "GET", "/v1/nothing", "", nil, 404, "not_found_error", server.CodeNotFound, "", ""},
		{"input items", "GET", "/v1/responses/abc/input_items", "", nil, 404, "not_found_error", server.CodeNotFound, "", ""},
		{"unknown response", "GET", "/v1/responses/nope", "", nil, 404, "not_found_error", server.CodeNotFound, "", ""},
		{"unknown model", "GET", "/v1/models/nope", "", nil, 404, "invalid_request_error", server.CodeModelNotFound, "model", ""},
		{"messages a string", "POST", "/v1/chat/completions", `{"model":"demo","messages":"hi"}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages", ""},
		{"a message a number", "POST", "/v1/chat/completions", `{"model":"demo","messages":[1]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages[0]", ""},
		{"a role a number", "POST", "/v1/chat/completions", `{"model":"demo","messages":[` + userMsg + `,{"role":1}]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages[1].role", ""},
		{"a user message of null content", "POST", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":null}]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages[0].content", ""},
		{"a user message without content", "POST", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user"}]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages[0].content", ""},
		{"an unknown role", "POST", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"wizard","content":"hi"}]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages[0].role", ""},
		{"metadata a string", "POST", "/v1/chat/completions", `{"model":"demo","metadata":"x","messages":[` + userMsg + `]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "metadata", ""},
		{"n a fraction", "POST", "/v1/chat/completions", `{"model":"demo","n":1.5,"messages":[` + userMsg + `]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "n", ""},
		{"n of 2", "POST", "/v1/chat/completions", `{"model":"demo","n":2,"messages":[` + userMsg + `]}`, nil,
			400, "invalid_request_error", server.CodeUnsupportedParameter, "n", ""},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"demo","messages":[]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "messages", ""},
		{"input a number", "POST", "/v1/responses", `{"model":"demo","input":42}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "input", ""},
		{"an item type a number", "POST", "/v1/responses", `{"model":"demo","input":[{"type":5}]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "input[0].type", ""},
		{"metadata an array", "POST", "/v1/responses", `{"model":"demo","metadata":[],"input":"hi"}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "metadata", ""},
		{"unknown previous response", "POST", "/v1/responses", `{"model":"demo","previous_response_id":"nope","input":"hi"}`, nil,
			404, "invalid_request_error", server.CodePreviousResponseNotFound, "previous_response_id", ""},
		{"an output of no call", "POST", "/v1/responses", `{"model":"demo","input":[{"type":"function_call_output","call_id":"c9","output":"x"},{"role":"user","content":"hi"}]}`, nil,
			400, "invalid_request_error", server.CodeBadRequest, "input[0].call_id", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := callError(t, ts, tc.method, tc.path, tc.body, tc.header)
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := got.raw[k]; !ok {
					t.Errorf("no %q in %v", k, got.raw)
				}
			}
			param := ""
			if got.shape.Param != nil {
				param = *got.shape.Param
			}
			if got.status != tc.status || got.shape.Type != tc.typ || got.shape.Code != tc.code || param != tc.param ||
				got.header.Get("Allow") != tc.allow {
				t.Errorf("got %d %v Allow %q, want %d %s %s param %q Allow %q", got.status, got.raw, got.header.Get("Allow"),
					tc.status, tc.typ, tc.code, tc.param, tc.allow)
			}
			if m := got.shape.Message; m == "" || strings.Contains(m, "server.") || strings.Contains(m, "interface") ||
				strings.Contains(m, "map[") || strings.Contains(m, "[]") {
				t.Errorf("message %q", m)
			}
		})
	}
	t.Run("REST", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path, body string
			status                   int
			code                     string
		}{
			{"wrong method", "PUT", "/v1/sessions/x", `{}`, 405, server.CodeMethodNotAllowed},
			{"unknown route", "GET", "/v1/sessions/x/nothing", "", 404, server.CodeNotFound},
			{"unknown run route", "GET", "/v1/runs/x/nothing", "", 404, server.CodeNotFound},
			{"payload not an object", "POST", "/v1/sessions/x/signals", `{"signal_id":"s","payload":"yes"}`, 400, server.CodeBadRequest},
		} {
			got := callError(t, ts, tc.method, tc.path, tc.body, nil)
			_, hasType := got.raw["type"]
			if got.status != tc.status || got.raw["code"] != tc.code || hasType || strings.Contains(fmt.Sprint(got.raw["message"]), "interface") {
				t.Errorf("%s: got %d %v", tc.name, got.status, got.raw)
			}
			if tc.status == 405 && got.header.Get("Allow") == "" {
				t.Errorf("%s: no Allow header", tc.name)
			}
		}
	})
}

// TestBearerSchemeCase: the Authorization scheme is case-insensitive
// (RFC 7235 §2.1) on every surface; the token itself is not.
func TestBearerSchemeCase(t *testing.T) {
	ts := newOpenAIServer(t)
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"Bearer " + oaiToken, 200},
		{"bearer " + oaiToken, 200},
		{"BEARER " + oaiToken, 200},
		{"bEaReR  " + oaiToken, 200},
		{"bearer " + strings.ToUpper(oaiToken), 401},
		{"Basic " + oaiToken, 401},
		{"bearer" + oaiToken, 401},
		{"bearer ", 401},
	} {
		for _, path := range []string{"/v1/models", "/v1/sessions", "/v1/responses/nope"} {
			want := tc.status
			if want == 200 && path == "/v1/responses/nope" {
				want = 404 // authenticated
			}
			resp := call(t, ts, "GET", path, "", map[string]string{"Authorization": tc.auth}, nil)
			if resp.StatusCode != want {
				t.Errorf("%s with %q: %d, want %d", path, tc.auth, resp.StatusCode, want)
			}
		}
	}
}

// TestTwoAuthorizationHeaders: a request with two Authorization headers
// is refused (401), whichever tokens they carry: a proxy checking one
// and this server reading the other would disagree on the tenant.
// Before, the first counted.
func TestTwoAuthorizationHeaders(t *testing.T) {
	ts := newOpenAIServer(t)
	for _, second := range []string{"Bearer " + oaiToken, "Bearer someone-elses-token"} {
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/v1/sessions", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Add("Authorization", "Bearer "+oaiToken)
		req.Header.Add("Authorization", second)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("two Authorization headers (%q second): %d, want 401", second, resp.StatusCode)
		}
	}
}

// TestResponsesStreamCutMessage: a stream the upstream cuts mid-message
// closes the partial message item as incomplete, not completed, in its
// response.output_item.done and in response.failed's response.
func TestResponsesStreamCutMessage(t *testing.T) {
	cut := llmtest.Step{Chunks: []*llm.Chunk{{Content: "Your order "}, {Content: "is on"}},
		Err: &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "stream", Message: "connection reset"}}
	a, err := agent.New(agent.Config{Provider: llmtest.New(cut)})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	evs := readRespSSE(t, postStream(t, ts, `{"model": "demo", "stream": true, "input": "where is my order?"}`))
	var done, failed map[string]any
	var names []string
	for _, e := range evs {
		names = append(names, e.name)
		switch e.name {
		case "response.output_item.done":
			done, _ = e.data["item"].(map[string]any)
		case "response.failed":
			failed, _ = e.data["response"].(map[string]any)
		}
	}
	if done == nil || failed == nil {
		t.Fatalf("events %v", names)
	}
	out, _ := failed["output"].([]any)
	if len(out) != 1 {
		t.Fatalf("response.failed output %v", out)
	}
	item, _ := out[0].(map[string]any)
	content, _ := item["content"].([]any)
	text := ""
	if len(content) == 1 {
		text, _ = content[0].(map[string]any)["text"].(string)
	}
	if done["status"] != "incomplete" || item["status"] != "incomplete" || text != "Your order is on" {
		t.Errorf("output_item.done %v; response.failed's item %v", done, item)
	}
}

// TestResponsesApprovalAnswered: of decisions racing for one approval,
// the losers are 409 with a message saying it was answered (they were
// 400 with the user-correctable "adjust your message" reply), as is a
// decision sent once it was; a decision on an approval a new message
// superseded stays 400 harness_signal_correlation_failed.
func TestResponsesApprovalAnswered(t *testing.T) {
	m := &gatedResume{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	release := sync.OnceFunc(func() { close(m.gate) })
	t.Cleanup(release)
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	ask := func(header map[string]string) (responseObj, respItem) {
		t.Helper()
		r, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, header)
		if resp.StatusCode != http.StatusOK || r.XArmature.Outcome != "suspended" || len(r.Output) == 0 {
			t.Fatalf("%d %+v %+v", resp.StatusCode, r, e)
		}
		return r, r.Output[len(r.Output)-1]
	}
	decision := func(prev responseObj, req respItem) string {
		return fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
			"approval_request_id": %q, "approve": true}]}`, prev.ID, req.ID)
	}
	susp, req := ask(nil)
	body := decision(susp, req)
	const racers = 3
	type answer struct {
		status int
		e      apiError
	}
	answers := make([]answer, racers)
	var wg sync.WaitGroup
	decide := func(i int) {
		_, resp, e := respond(t, ts, body, nil)
		answers[i] = answer{resp.StatusCode, e}
	}
	wg.Go(func() { decide(0) })
	<-m.entered // the first decision ran the refund and waits for its answer
	for i := 1; i < racers; i++ {
		wg.Go(func() { decide(i) })
	}
	time.Sleep(200 * time.Millisecond) // the others reach the session
	release()
	wg.Wait()
	won := 0
	for _, a := range answers {
		switch {
		case a.status == http.StatusOK:
			won++
		case a.status != http.StatusConflict || a.e.Error.Type != "conflict_error" ||
			a.e.Error.Code != string(errcat.HarnessSignalCorrelationFailed) || !strings.Contains(a.e.Error.Message, "already answered"):
			t.Errorf("a losing decision: %d %+v", a.status, a.e)
		}
	}
	if won != 1 {
		t.Errorf("%d decisions won: %+v", won, answers)
	}
	if _, resp, e := respond(t, ts, body, nil); resp.StatusCode != http.StatusConflict || !strings.Contains(e.Error.Message, "already answered") ||
		resp.Header.Get(server.ShouldRetryHeader) != "false" {
		t.Errorf("a decision after the race: %d %+v, %s %q (the official clients retry a 409 unless told not to)",
			resp.StatusCode, e, server.ShouldRetryHeader, resp.Header.Get(server.ShouldRetryHeader))
	}
	// A new message supersedes the next approval: its decision resumes
	// nothing, and nothing answered it.
	h := map[string]string{server.SessionHeader: "sup-1"}
	susp, req = ask(h)
	if _, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": "never mind"}`, susp.ID), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the superseding message: %d %+v", resp.StatusCode, e)
	}
	if _, resp, e := respond(t, ts, decision(susp, req), nil); resp.StatusCode != http.StatusBadRequest ||
		e.Error.Code != string(errcat.HarnessSignalCorrelationFailed) || strings.Contains(e.Error.Message, "adjust your message") {
		t.Errorf("a decision on a superseded approval: %d %+v", resp.StatusCode, e)
	}
}

// TestFieldNamesExact: on the REST and OpenAI surfaces too, a key that
// names a field only up to case is ignored, not taken as the field
// (encoding/json's case-insensitive match let "Content" replace
// "content", "Messages" replace "messages").
func TestFieldNamesExact(t *testing.T) {
	ts := newOpenAIServer(t)
	var rest struct {
		Outcome string `json:"outcome"`
	}
	resp := call(t, ts, http.MethodPost, "/v1/sessions/case-rest/messages", `{"content": "hello", "Content": "please refund order 7"}`, nil, &rest)
	if resp.StatusCode != http.StatusOK || rest.Outcome != "completed" {
		t.Errorf("REST: %d %+v", resp.StatusCode, rest)
	}
	var oai struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	resp = call(t, ts, http.MethodPost, "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "hello"}],
		"Messages": [{"role": "user", "content": "please refund order 7"}]}`, nil, &oai)
	if resp.StatusCode != http.StatusOK || len(oai.Choices) != 1 || !strings.HasPrefix(oai.Choices[0].Message.Content, "You said") {
		t.Errorf("chat completions: %d %+v", resp.StatusCode, oai)
	}
}

// TestRESTIdempotencyKeyHeader: on the REST message and signal routes,
// the Idempotency-Key header stands for a missing message_id /
// request_id, as on the OpenAI endpoints: a retransmission runs no
// second turn (before, the header was ignored and each copy ran). A
// header that disagrees with the body's id is 400.
func TestRESTIdempotencyKeyHeader(t *testing.T) {
	ts := newOpenAIServer(t)
	h := map[string]string{server.IdempotencyHeader: "rest-key-1"}
	var first, again struct {
		Outcome string `json:"outcome"`
		RunID   string `json:"run_id"`
	}
	call(t, ts, http.MethodPost, "/v1/sessions/idem-rest/messages", `{"content": "where is order 8?"}`, h, &first)
	call(t, ts, http.MethodPost, "/v1/sessions/idem-rest/messages", `{"content": "where is order 8?"}`, h, &again)
	if first.Outcome != "completed" || again.RunID != first.RunID {
		t.Errorf("first %+v, retransmission %+v: want one run", first, again)
	}
	var session struct {
		Messages []llm.Message `json:"messages"`
	}
	call(t, ts, http.MethodGet, "/v1/sessions/idem-rest", "", nil, &session)
	users := 0
	for _, m := range session.Messages {
		if m.Role == llm.RoleUser {
			users++
		}
	}
	if users != 1 {
		t.Errorf("%d user messages stored, want 1", users)
	}
	if resp := call(t, ts, http.MethodPost, "/v1/sessions/idem-rest/messages", `{"content": "hi", "message_id": "other"}`, h, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("message_id and a different header: %d, want 400", resp.StatusCode)
	}
}

// TestSignalPayloadDepth: a signal whose payload nests deeper than 64
// levels is refused (400, suspension_resume_payload_invalid) and the
// approval stays pending: recorded in the run's events a few levels
// down, a payload near the body's 10000-level bound was served back
// deeper than JSON decoders take.
func TestSignalPayloadDepth(t *testing.T) {
	ts := newOpenAIServer(t)
	var susp struct {
		Outcome string `json:"outcome"`
		Signal  struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	call(t, ts, http.MethodPost, "/v1/sessions/deep/messages", `{"content": "please refund order 7"}`, nil, &susp)
	if susp.Outcome != "suspended" {
		t.Fatalf("the refund: %+v", susp)
	}
	deep := strings.Repeat(`{"x":`, 100) + `1` + strings.Repeat(`}`, 100)
	body := fmt.Sprintf(`{"signal_id": %q, "payload": {"approval": {"approved": true}, "extra": %s}}`, susp.Signal.SignalID, deep)
	var out struct {
		Outcome string          `json:"outcome"`
		Error   json.RawMessage `json:"error"`
	}
	if resp := call(t, ts, http.MethodPost, "/v1/sessions/deep/signals", body, nil, &out); resp.StatusCode != http.StatusBadRequest ||
		out.Outcome != "errored" || !strings.Contains(string(out.Error), string(errcat.SuspensionResumePayloadInvalid)) {
		t.Fatalf("a payload 100 levels deep: %d %+v %s", resp.StatusCode, out, out.Error)
	}
	ok := fmt.Sprintf(`{"signal_id": %q, "payload": {"approval": {"approved": true}}}`, susp.Signal.SignalID)
	if call(t, ts, http.MethodPost, "/v1/sessions/deep/signals", ok, nil, &out); out.Outcome != "completed" {
		t.Fatalf("the approval after the refusal: %+v", out)
	}
}
