package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/server"
)

// responseObj is a response object as a client decodes it.
type responseObj struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	CreatedAt          int64   `json:"created_at"`
	Status             string  `json:"status"`
	Model              string  `json:"model"`
	PreviousResponseID *string `json:"previous_response_id"`
	Instructions       *string `json:"instructions"`
	Store              bool    `json:"store"`
	Error              *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output   []respItem        `json:"output"`
	Metadata map[string]string `json:"metadata"`
	Usage    *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
	XArmature struct {
		SessionID string `json:"session_id"`
		RunID     string `json:"run_id"`
		Outcome   string `json:"outcome"`
		Replayed  bool   `json:"replayed"`
	} `json:"x_armature"`
}

type respItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	ServerLabel string  `json:"server_label"`
	Name        string  `json:"name"`
	Arguments   string  `json:"arguments"`
	Output      *string `json:"output"`
	Error       *string `json:"error"`
}

// kinds lists the output's item types, with the tool name of an
// mcp_call or approval request ("mcp_call:lookup_order").
func (r responseObj) kinds() string {
	var k []string
	for _, it := range r.Output {
		if it.Name != "" {
			k = append(k, it.Type+":"+it.Name)
		} else {
			k = append(k, it.Type)
		}
	}
	return strings.Join(k, " ")
}

// text is the output messages' text.
func (r responseObj) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// respond posts a Responses request and decodes the response (or the
// error into out when the status is not 200).
func respond(t *testing.T, ts *httptest.Server, body string, header map[string]string) (responseObj, *http.Response, apiError) {
	t.Helper()
	var raw json.RawMessage
	resp := call(t, ts, http.MethodPost, "/v1/responses", body, header, &raw)
	var r responseObj
	var e apiError
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
	} else if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	return r, resp, e
}

// TestResponsesTurn: a turn through the agent's server-side tool loop is
// a response whose id is the run's; its tool call is an mcp_call item,
// its answer a message; GET /v1/responses/{id} and GET /v1/runs/{id}
// answer for the same id; previous_response_id continues the session.
func TestResponsesTurn(t *testing.T) {
	ts := newOpenAIServer(t)
	r, resp, e := respond(t, ts, `{"model": "demo", "input": "where is order 4?", "metadata": {"topic": "orders"}}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if r.Object != "response" || r.Status != "completed" || r.Model != "demo" || !r.Store || r.Metadata["topic"] != "orders" {
		t.Errorf("response %+v", r)
	}
	if got := r.kinds(); got != "mcp_call:lookup_order message" {
		t.Errorf("output %s", got)
	}
	call0 := r.Output[0]
	if call0.ServerLabel != server.ResponsesServerLabel || call0.Arguments != `{"order":"4"}` || call0.Output == nil ||
		*call0.Output != "order 4: shipped, arriving Thursday" || call0.Status != "completed" {
		t.Errorf("mcp_call %+v", call0)
	}
	if want := "Here is what I found: order 4: shipped, arriving Thursday"; r.text() != want {
		t.Errorf("text %q", r.text())
	}
	sid := resp.Header.Get(server.SessionHeader)
	if r.ID == "" || r.XArmature.RunID != r.ID || r.XArmature.SessionID != sid {
		t.Errorf("id %q, x_armature %+v, session header %q", r.ID, r.XArmature, sid)
	}
	var run struct {
		ID        string `json:"id"`
		SessionID string `json:"sessionId"`
		Status    string `json:"status"`
	}
	if resp := call(t, ts, http.MethodGet, "/v1/runs/"+r.ID, "", nil, &run); resp.StatusCode != http.StatusOK ||
		run.ID != r.ID || run.SessionID != sid || run.Status != "completed" {
		t.Errorf("run %d %+v", resp.StatusCode, run)
	}
	var got responseObj
	if resp := call(t, ts, http.MethodGet, "/v1/responses/"+r.ID, "", nil, &got); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %d", resp.StatusCode)
	}
	if got.ID != r.ID || got.kinds() != r.kinds() || got.text() != r.text() || got.Output[1].ID != r.Output[1].ID ||
		got.Metadata["topic"] != "orders" || got.Status != "completed" {
		t.Errorf("GET = %+v, want %+v", got, r)
	}

	next, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"role": "user", "content": "thanks"}]}`, r.ID), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if next.XArmature.SessionID != sid || next.ID == r.ID || next.PreviousResponseID == nil || *next.PreviousResponseID != r.ID {
		t.Errorf("continued %+v", next)
	}
	if got := storedMessages(t, ts, sid); len(got) != 6 || got[4] != "user: thanks" {
		t.Errorf("history %q", got)
	}
}

// TestResponsesApproval: a suspended turn answers with the pending
// message and an mcp_approval_request item; an mcp_approval_response
// with previous_response_id resumes it (a signal, never a new message),
// as a new run linked to the suspended one.
func TestResponsesApproval(t *testing.T) {
	for _, tc := range []struct {
		name    string
		approve string
		want    string
		kinds   string
	}{
		{"approve", `true, "reason": "ok"`, "refunded $30.00 for order 7", "mcp_call:issue_refund message"},
		{"deny", `false, "reason": "too much"`, "too much", "mcp_call:issue_refund message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newOpenAIServer(t)
			susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %+v", resp.StatusCode, e)
			}
			if susp.Status != "completed" || susp.XArmature.Outcome != "suspended" {
				t.Fatalf("suspended %+v", susp)
			}
			if got := susp.kinds(); got != "message mcp_approval_request:issue_refund" {
				t.Fatalf("output %s", got)
			}
			ar := susp.Output[1]
			if !strings.HasPrefix(ar.ID, agent.SignalPrefix) || ar.ServerLabel != server.ResponsesServerLabel ||
				ar.Arguments != `{"amount":30,"order":"7"}` {
				t.Errorf("approval request %+v", ar)
			}
			body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
				"approval_request_id": %q, "approve": %s}]}`, susp.ID, ar.ID, tc.approve)
			done, resp, e := respond(t, ts, body, map[string]string{server.IdempotencyHeader: "dec-" + tc.name})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %+v", resp.StatusCode, e)
			}
			if done.Status != "completed" || done.XArmature.Outcome != "completed" || done.ID == susp.ID || done.kinds() != tc.kinds ||
				!strings.Contains(done.text()+fmt.Sprint(done.Output[0].Output, done.Output[0].Error), "") {
				t.Errorf("resumed %+v", done)
			}
			if all := fmt.Sprintf("%s %v %v", done.text(), deref(done.Output[0].Output), deref(done.Output[0].Error)); !strings.Contains(all, tc.want) {
				t.Errorf("resumed output %q, want %q in it", all, tc.want)
			}
			var run struct {
				Parent string `json:"parentRequestId"`
			}
			call(t, ts, http.MethodGet, "/v1/runs/"+done.ID, "", nil, &run)
			if run.Parent != susp.ID {
				t.Errorf("the resumed run's parentRequestId %q, want %q", run.Parent, susp.ID)
			}
			// The retransmitted decision answers the recorded response.
			again, resp, _ := respond(t, ts, body, map[string]string{server.IdempotencyHeader: "dec-" + tc.name})
			if resp.StatusCode != http.StatusOK || again.ID != done.ID || !again.XArmature.Replayed || again.kinds() != done.kinds() {
				t.Errorf("retransmission %d %+v", resp.StatusCode, again)
			}
			// Without the key, a second decision finds the approval
			// answered: 409, with the category as its code.
			_, resp, e = respond(t, ts, body, nil)
			if resp.StatusCode != http.StatusConflict || e.Error.Code != "harness_signal_correlation_failed" {
				t.Errorf("second decision %d %+v", resp.StatusCode, e)
			}
			var got responseObj
			call(t, ts, http.MethodGet, "/v1/responses/"+susp.ID, "", nil, &got)
			if got.kinds() != susp.kinds() {
				t.Errorf("GET of the suspended response: %s", got.kinds())
			}
		})
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestResponsesRequests: what the endpoint refuses, each with the
// documented status and code.
func TestResponsesRequests(t *testing.T) {
	ts := newOpenAIServer(t)
	first, _, _ := respond(t, ts, `{"model": "demo", "input": "hello"}`, nil)
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"no input", `{"model": "demo"}`, 400, "invalid_request"},
		{"empty list", `{"model": "demo", "input": []}`, 400, "invalid_request"},
		{"not json", `{"model": "demo", "input": `, 400, "invalid_request"},
		{"input a number", `{"model": "demo", "input": 7}`, 400, "invalid_request"},
		{"last item not a user message", `{"model": "demo", "input": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}`, 400, "invalid_request"},
		{"client tools", `{"model": "demo", "input": "a", "tools": [{"type": "function", "name": "f"}]}`, 400, "unsupported_parameter"},
		{"structured output", `{"model": "demo", "input": "a", "text": {"format": {"type": "json_schema"}}}`, 400, "unsupported_parameter"},
		{"background", `{"model": "demo", "input": "a", "background": true}`, 400, "unsupported_parameter"},
		{"unknown item", `{"model": "demo", "input": [{"type": "computer_call"}]}`, 400, "unsupported_parameter"},
		{"file input", `{"model": "demo", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}`, 400, "unsupported_parameter"},
		{"unknown model", `{"model": "gpt-9", "input": "a"}`, 404, "model_not_found"},
		{"unknown previous", `{"model": "demo", "input": "a", "previous_response_id": "NOSUCHRUN"}`, 404, "previous_response_not_found"},
		{"malformed previous", `{"model": "demo", "input": "a", "previous_response_id": "a/b"}`, 404, "previous_response_not_found"},
		{"history with previous", fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}`, first.ID), 400, "invalid_request"},
		{"too much metadata", `{"model": "demo", "input": "a", "metadata": {` + strings.Repeat(`"k": "v",`, 0) + metadataPairs(17) + `}}`, 400, "invalid_request"},
		{"metadata not a string", `{"model": "demo", "input": "a", "metadata": {"k": 1}}`, 400, "invalid_request"},
		{"approval without previous", `{"model": "demo", "input": [{"type": "mcp_approval_response", "approval_request_id": "approval:call_1", "approve": true}]}`, 400, "invalid_request"},
		{"approval not a bool", fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response", "approval_request_id": "approval:call_1", "approve": 1}]}`, first.ID), 400, "invalid_request"},
		{"approval missing approve", fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response", "approval_request_id": "approval:call_1"}]}`, first.ID), 400, "invalid_request"},
		{"approval with a message", fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"role": "user", "content": "a"}, {"type": "mcp_approval_response", "approval_request_id": "approval:call_1", "approve": true}]}`, first.ID), 400, "invalid_request"},
		{"approval of nothing", fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response", "approval_request_id": "approval:call_1", "approve": true}]}`, first.ID), 400, "harness_signal_correlation_failed"},
		{"huge instructions", `{"model": "demo", "input": "a", "instructions": "` + strings.Repeat("x", 300<<10) + `"}`, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, e := respond(t, ts, tc.body, nil)
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Errorf("%d %+v, want %d %s", resp.StatusCode, e, tc.status, tc.code)
			}
		})
	}
}

func metadataPairs(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`"k%d": "v"`, i))
	}
	return strings.Join(parts, ", ")
}

// TestResponsesStore: store: false keeps no response to read or
// continue; another tenant's response is not found either.
func TestResponsesStore(t *testing.T) {
	ts := servertest.NewDemo(t, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: oaiToken, Tenant: "acme"}, {Secret: "other-token-globex-1", Tenant: "globex"}}
	})
	unstored, resp, e := respond(t, ts, `{"model": "demo", "input": "hello", "store": false}`, nil)
	if resp.StatusCode != http.StatusOK || unstored.Store {
		t.Fatalf("%d %+v %+v", resp.StatusCode, unstored, e)
	}
	if resp := call(t, ts, http.MethodGet, "/v1/responses/"+unstored.ID, "", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of an unstored response: %d", resp.StatusCode)
	}
	_, resp, e = respond(t, ts, fmt.Sprintf(`{"model": "demo", "input": "a", "previous_response_id": %q}`, unstored.ID), nil)
	if resp.StatusCode != http.StatusNotFound || e.Error.Code != server.CodePreviousResponseNotFound {
		t.Errorf("continuing an unstored response: %d %+v", resp.StatusCode, e)
	}
	stored, _, _ := respond(t, ts, `{"model": "demo", "input": "hello"}`, nil)
	other := map[string]string{"Authorization": "Bearer other-token-globex-1"}
	if resp := call(t, ts, http.MethodGet, "/v1/responses/"+stored.ID, "", other, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's GET: %d", resp.StatusCode)
	}
	_, resp, e = respond(t, ts, fmt.Sprintf(`{"model": "demo", "input": "a", "previous_response_id": %q}`, stored.ID), other)
	if resp.StatusCode != http.StatusNotFound || e.Error.Code != server.CodePreviousResponseNotFound {
		t.Errorf("another tenant continuing: %d %+v", resp.StatusCode, e)
	}
}

// TestResponsesInputItems: a stateless client sends the conversation as
// items (messages, function calls and outputs, an earlier response's
// mcp_call): they seed a fresh session ahead of the turn; instructions
// replace the agent's system prompt for this turn only.
func TestResponsesInputItems(t *testing.T) {
	p := llmtest.New(llmtest.Reply("first"), llmtest.Reply("second"))
	a, err := agent.New(agent.Config{Provider: p, System: "You are the agent."})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	body := `{"model": "demo", "instructions": "Answer in French.", "input": [
		{"role": "developer", "content": "ignored"},
		{"role": "user", "content": "where is order 1?"},
		{"type": "function_call", "call_id": "c1", "name": "lookup_order", "arguments": "{\"order\":\"1\"}"},
		{"type": "function_call_output", "call_id": "c1", "output": "shipped"},
		{"type": "mcp_call", "id": "mcp_c2", "server_label": "armature", "name": "lookup_order", "arguments": "{}", "output": "late"},
		{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It shipped."}]},
		{"type": "reasoning", "summary": []},
		{"role": "user", "content": [{"type": "input_text", "text": "and order 2?"}]}]}`
	r, resp, e := respond(t, ts, body, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if r.text() != "first" || r.Instructions == nil || *r.Instructions != "Answer in French." {
		t.Errorf("response %+v", r)
	}
	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls", len(reqs))
	}
	var roles []string
	sent := reqs[0].Transcript() // what goes on the wire
	for _, m := range sent {
		roles = append(roles, string(m.Role))
	}
	if got := strings.Join(roles, " "); got != "system user assistant tool assistant tool assistant user" {
		t.Errorf("the model saw %s", got)
	}
	if sent[0].Text() != "Answer in French." {
		t.Errorf("system prompt %q", sent[0].Text())
	}
	// The next turn of the session has the agent's own prompt again.
	if _, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": "more"}`, r.ID), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if reqs := p.Requests(); reqs[1].System != "You are the agent." {
		t.Errorf("next turn's system prompt %q", reqs[1].System)
	}
}

// TestResponsesIdempotency: a retransmission under the same
// Idempotency-Key answers the first response's id and output, marked
// replayed, and runs no second turn.
func TestResponsesIdempotency(t *testing.T) {
	ts := newOpenAIServer(t)
	h := map[string]string{server.IdempotencyHeader: "k-1"}
	first, _, _ := respond(t, ts, `{"model": "demo", "input": "where is order 8?"}`, h)
	time.Sleep(1100 * time.Millisecond) // a retransmission's second is not its first try's
	again, resp, _ := respond(t, ts, `{"model": "demo", "input": "where is order 8?"}`, h)
	if resp.StatusCode != http.StatusOK || again.ID != first.ID || again.CreatedAt != first.CreatedAt || !again.XArmature.Replayed || again.kinds() != first.kinds() || again.text() != first.text() {
		t.Errorf("retransmission %+v, first %+v", again, first)
	}
	var runs struct {
		Runs []json.RawMessage `json:"runs"`
	}
	call(t, ts, http.MethodGet, "/v1/sessions/"+first.XArmature.SessionID+"/runs", "", nil, &runs)
	if len(runs.Runs) != 1 {
		t.Errorf("%d runs", len(runs.Runs))
	}
}

// TestResponsesReplayEchoesFirst: a retransmission answered with the
// recorded response echoes what the first request asked for (store),
// not the retry's: a retry with store true of a response stored with
// store false said store true, though GET answered 404.
func TestResponsesReplayEchoesFirst(t *testing.T) {
	ts := newOpenAIServer(t)
	for i, first := range []bool{false, true} {
		h := map[string]string{server.IdempotencyHeader: fmt.Sprintf("k-store-%d", i)}
		body := func(store bool) string {
			return fmt.Sprintf(`{"model": "demo", "input": "where is order 8?", "store": %v}`, store)
		}
		orig, _, _ := respond(t, ts, body(first), h)
		again, resp, _ := respond(t, ts, body(!first), h)
		if resp.StatusCode != http.StatusOK || !again.XArmature.Replayed || again.ID != orig.ID || again.Store != first || orig.Store != first {
			t.Errorf("store %v, retried with %v: first %v, retransmission %v (replayed %v)", first, !first, orig.Store, again.Store, again.XArmature.Replayed)
		}
		streamed := strings.Replace(body(!first), `"model"`, `"stream": true, "model"`, 1)
		stream := readRespSSE(t, postStream(t, ts, streamed, h))
		if len(stream) == 0 {
			t.Errorf("store %v: the streamed retransmission is empty", first)
		}
		for _, ev := range stream {
			// Every event carrying the response (created, in_progress,
			// completed) echoes the first request's store.
			if r, ok := ev.data["response"].(map[string]any); ok && r["store"] != first {
				t.Errorf("store %v: the streamed retransmission's %s says store %v", first, ev.name, r["store"])
			}
		}
	}
}

// respEvent is one typed event of a streamed response.
type respEvent struct {
	name string
	data map[string]any
}

func readRespSSE(t *testing.T, resp *http.Response) []respEvent {
	t.Helper()
	var out []respEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
			out = append(out, respEvent{name, d})
		}
	}
	return out
}

// TestResponsesStreaming: the typed events, in order, numbered from 0:
// created, in_progress, the tool as an mcp_call item with its progress,
// the answer's text deltas, completed with the final response (the same
// as GET answers).
func TestResponsesStreaming(t *testing.T) {
	ts := newOpenAIServer(t)
	for _, tc := range []struct {
		name, input string
		want        []string
	}{
		{"tool then text", "where is order 5?", []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.mcp_call_arguments.done", "response.mcp_call.in_progress",
			"response.mcp_call.completed", "response.output_item.done",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}},
		{"approval", "refund order 5", []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added", "response.output_item.done", "response.completed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := postStream(t, ts, fmt.Sprintf(`{"model": "demo", "stream": true, "input": %q}`, tc.input))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			evs := readRespSSE(t, resp)
			var names []string
			var text strings.Builder
			for i, ev := range evs {
				// Consecutive deltas count as one: the model streams in pieces.
				if ev.name != "response.output_text.delta" || len(names) == 0 || names[len(names)-1] != ev.name {
					names = append(names, ev.name)
				}
				if ev.data["type"] != ev.name || ev.data["sequence_number"] != float64(i) {
					t.Errorf("event %d: %v", i, ev.data)
				}
				if ev.name == "response.output_text.delta" {
					text.WriteString(ev.data["delta"].(string))
				}
			}
			if strings.Join(names, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("events\n%s\nwant\n%s", strings.Join(names, " "), strings.Join(tc.want, " "))
			}
			raw, _ := json.Marshal(evs[len(evs)-1].data["response"])
			var final responseObj
			if err := json.Unmarshal(raw, &final); err != nil {
				t.Fatal(err)
			}
			if final.text() != text.String() || final.Status != "completed" || final.ID != evs[0].data["response"].(map[string]any)["id"] {
				t.Errorf("final %+v, streamed text %q", final, text.String())
			}
			var got responseObj
			call(t, ts, http.MethodGet, "/v1/responses/"+final.ID, "", nil, &got)
			if got.kinds() != final.kinds() || got.text() != final.text() {
				t.Errorf("GET %s %q, streamed %s %q", got.kinds(), got.text(), final.kinds(), final.text())
			}
			for i := range final.Output {
				if got.Output[i].ID != final.Output[i].ID {
					t.Errorf("item %d: GET id %q, streamed %q", i, got.Output[i].ID, final.Output[i].ID)
				}
			}
		})
	}
}

// TestResponsesIncomplete: a turn whose last model call stopped at its
// token limit is incomplete (max_output_tokens), with its usage.
func TestResponsesIncomplete(t *testing.T) {
	s := llmtest.Reply("cut sh")
	s.Response.FinishReason = llm.FinishLength
	s.Response.Usage = llm.Usage{PromptTokens: new(9), CompletionTokens: new(3)}
	a, err := agent.New(agent.Config{Provider: llmtest.New(s)})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	r, resp, e := respond(t, ts, `{"model": "demo", "input": "go"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" ||
		r.Usage == nil || r.Usage.InputTokens != 9 || r.Usage.OutputTokens != 3 || r.Usage.TotalTokens != 12 {
		t.Errorf("response %+v usage %+v", r, r.Usage)
	}
	var got responseObj
	call(t, ts, http.MethodGet, "/v1/responses/"+r.ID, "", nil, &got)
	if got.Status != "incomplete" || got.Usage == nil || got.Usage.TotalTokens != 12 {
		t.Errorf("GET %+v", got)
	}
}

// TestResponsesStreamErrors: a turn that fails before any output is an
// HTTP error (an upstream 429 stays a 429 with Retry-After); one that
// fails after its first output ends the stream with response.failed,
// holding what was produced, and an error event.
func TestResponsesStreamErrors(t *testing.T) {
	limited := llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderRateLimit, Provider: "openai", Op: "complete", StatusCode: 429,
		Message: "Rate limit reached", RetryAfter: 7 * time.Second})
	broken := llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: "openai", Op: "complete", Message: "garbage"})
	lookup := llmtest.CallTools(llm.ToolCall{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"1"}`)})
	tool, err := agent.NewTool("lookup_order", "Look up an order.", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": shipped", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		steps  []llmtest.Step
		status int
		events string // the last two events
	}{
		{"rate limited before any output", []llmtest.Step{limited}, http.StatusTooManyRequests, ""},
		{"failed after a tool ran", []llmtest.Step{lookup, broken}, http.StatusOK, "response.failed error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := agent.New(agent.Config{Provider: llmtest.New(tc.steps...), Tools: []agent.Tool{tool}})
			if err != nil {
				t.Fatal(err)
			}
			ts := newOpenAIServerWith(t, a)
			resp := postStream(t, ts, `{"model": "demo", "stream": true, "input": "go"}`)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == http.StatusTooManyRequests {
				if resp.Header.Get("Retry-After") != "7" {
					t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
				}
				return
			}
			evs := readRespSSE(t, resp)
			n := len(evs)
			if n < 2 || evs[n-2].name+" "+evs[n-1].name != tc.events {
				t.Fatalf("events %v", evs)
			}
			failed, _ := evs[n-2].data["response"].(map[string]any)
			out, _ := failed["output"].([]any)
			if failed["status"] != "failed" || len(out) != 1 || evs[n-1].data["code"] != "provider_invalid_response" {
				t.Errorf("response.failed %v, error %v", failed, evs[n-1].data)
			}
			if e, _ := failed["error"].(map[string]any); e["code"] != "provider_invalid_response" {
				t.Errorf("error %v", failed["error"])
			}
			var got responseObj
			if resp := call(t, ts, http.MethodGet, "/v1/responses/"+failed["id"].(string), "", nil, &got); resp.StatusCode != http.StatusOK ||
				got.Status != "failed" || got.Error == nil || got.Error.Code != "provider_invalid_response" {
				t.Errorf("GET of the failed response: %d %+v", resp.StatusCode, got)
			}
		})
	}
}

// postStream posts a streamed Responses request; the body is closed when
// the test ends.
func postStream(t *testing.T, ts *httptest.Server, body string, header ...map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	for _, h := range header {
		for k, v := range h {
			req.Header.Set(k, v)
		}
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestStaleApprovalAfterDelete: a session deleted and begun again under
// the same id asks for a refund under the same approval request id as
// its first conversation did (the model numbers its calls alike). A
// decision on the first conversation's request (Responses with its
// previous_response_id; REST naming its invocation_id) is refused and
// runs nothing; the new request's own decision refunds the new order.
// Before, the old decision approved the new refund.
func TestStaleApprovalAfterDelete(t *testing.T) {
	// With the deleted session's run records kept (audit) or deleted
	// with the session (the default), the old response no longer
	// continues anything: 404, as a deleted stored response is.
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprint("keep_runs=", keep), func(t *testing.T) { staleApprovalAfterDelete(t, keep) })
	}
}

func staleApprovalAfterDelete(t *testing.T, keep bool) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a, func(c *server.Config) { c.KeepRunsOnDelete = keep })
	h := map[string]string{server.SessionHeader: "del-1"}
	ask := func(input string) (responseObj, respItem) {
		t.Helper()
		r, resp, e := respond(t, ts, `{"model": "demo", "input": "`+input+`"}`, h)
		if resp.StatusCode != http.StatusOK || r.XArmature.Outcome != "suspended" || len(r.Output) != 2 {
			t.Fatalf("%q: %d %+v %+v", input, resp.StatusCode, r, e)
		}
		return r, r.Output[1]
	}
	decide := func(prev responseObj, req respItem) (responseObj, *http.Response, apiError) {
		return respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
			"approval_request_id": %q, "approve": true}]}`, prev.ID, req.ID), nil)
	}
	hello, resp, _ := respond(t, ts, `{"model": "demo", "input": "hello"}`, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hello: %d", resp.StatusCode)
	}
	old, oldReq := ask("refund order 1")
	var oldRun struct {
		InvocationID string `json:"invocationId"`
	}
	call(t, ts, http.MethodGet, "/v1/runs/"+old.ID, "", nil, &oldRun)
	if resp := call(t, ts, http.MethodDelete, "/v1/sessions/del-1", "", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if _, resp, _ := respond(t, ts, `{"model": "demo", "input": "hi"}`, h); resp.StatusCode != http.StatusOK {
		t.Fatalf("hi: %d", resp.StatusCode)
	}
	cur, curReq := ask("refund order 555")
	if curReq.ID != oldReq.ID || oldRun.InvocationID == "" {
		t.Fatalf("the new request's id %q, the old one's %q (invocation %q): the test needs them alike", curReq.ID, oldReq.ID, oldRun.InvocationID)
	}
	// Either way the old response's session is gone: its
	// previous_response_id is not found (TestPreviousResponseOfDeletedSession).
	wantStatus, wantCode := http.StatusNotFound, "previous_response_not_found"
	if _, resp, e := decide(old, oldReq); resp.StatusCode != wantStatus || e.Error.Code != wantCode {
		t.Fatalf("the deleted conversation's decision (Responses): %d %+v, want it refused", resp.StatusCode, e)
	}
	// Naming a response that asked for nothing binds the decision to no
	// turn: refused too.
	if _, resp, e := decide(hello, oldReq); resp.StatusCode != wantStatus || e.Error.Code != wantCode {
		t.Fatalf("a decision naming a completed response: %d %+v, want it refused", resp.StatusCode, e)
	}
	body := fmt.Sprintf(`{"signal_id": %q, "invocation_id": %q, "payload": {"approval": {"approved": true}}}`, oldReq.ID, oldRun.InvocationID)
	if resp := call(t, ts, http.MethodPost, "/v1/sessions/del-1/signals", body, nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the deleted conversation's decision (REST, with its invocation_id): %d, want 404", resp.StatusCode)
	}
	done, resp, e := decide(cur, curReq)
	if resp.StatusCode != http.StatusOK || done.XArmature.Outcome != "completed" || !strings.Contains(fmt.Sprint(deref(done.Output[0].Output)), "order 555") {
		t.Fatalf("the new request's decision: %d %+v %+v", resp.StatusCode, done, e)
	}
}
