package adaptertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/npmtest"
	"github.com/armature-go/armature/runtime"
)

// UpstreamKeyEnv is the environment variable RunUpstream sets to the
// mock's API key, for the workspace's api_key_env.
const UpstreamKeyEnv = "ARMATURE_TEST_UPSTREAM_KEY"

// upstreamFixtures are aimock's answers to the script's turns, matched
// on the last user message (a substring) and, for a tool turn, on
// whether the request carries the tool's result.
const upstreamFixtures = `{"fixtures": [
 {"match": {"userMessage": "hello"}, "response": {"content": "Hello from the mock."}},
 {"match": {"userMessage": "where is order 7", "hasToolResult": false}, "response": {"toolCalls": [{"name": "lookup_order", "arguments": {"order": "7"}}]}},
 {"match": {"userMessage": "where is order 7", "hasToolResult": true}, "response": {"content": "Order 7 is on its way."}},
 {"match": {"userMessage": "refund order 5", "hasToolResult": false}, "response": {"toolCalls": [{"name": "issue_refund", "arguments": {"order": "5", "amount": 30}}]}},
 {"match": {"userMessage": "refund order 5", "hasToolResult": true}, "response": {"content": "The refund is done."}},
 {"match": {"userMessage": "refund orders 8 and 9", "hasToolResult": false}, "response": {"toolCalls": [{"name": "issue_refund", "arguments": {"order": "8", "amount": 10}}, {"name": "issue_refund", "arguments": {"order": "9", "amount": 20}}]}},
 {"match": {"userMessage": "refund orders 8 and 9", "hasToolResult": true}, "response": {"content": "Both refunds are done."}},
 {"match": {"userMessage": "limit"}, "response": {"error": {"message": "Rate limit exceeded.", "type": "rate_limit_error", "code": "rate_limit_exceeded"}, "status": 429}},
 {"match": {"userMessage": "nothing"}, "response": {"content": ""}},
 {"match": {"userMessage": "cut"}, "response": {"content": "This answer is long enough to arrive in several chunks, but the connection drops."}, "truncateAfterChunks": 2}
]}`

// UpstreamConfig is an armature serve binary whose agent calls a real
// model API, served by aimock.
type UpstreamConfig struct {
	// Package is the main package to build (as for RunBinary).
	Package string
	// Workspace returns the workspace YAML for the mock's base URL: one
	// agent, id AgentID, with tools [lookup_order, issue_refund] and
	// approval [issue_refund], whose model is the mock's API (base URL
	// mock, or mock+"/v1" for OpenAI's) with api_key_env UpstreamKeyEnv.
	Workspace func(mock string) string
	// Streaming is whether the agent streams the model's answer; a
	// stream the mock cuts short is then part of the script.
	Streaming bool
}

// RunUpstream drives an agent whose model is a third-party mock of the
// vendor's API (aimock, from the npm registry), through the armature
// serve binary of cfg.Package, as an operator pointing it at a real
// vendor would: a plain turn on REST and on the OpenAI-compatible
// endpoint (streamed and not); a tool turn; an approval asked on
// OpenHarness, the process killed, and the approval given over REST to
// a new process; two approvals asked in one answer; the upstream's rate
// limit, its empty answer and (when streaming) its stream cut mid-way,
// each an errored turn of the category a native agent reports, after
// which the session goes on; and the run records of it all.
func RunUpstream(t *testing.T, cfg UpstreamConfig) {
	t.Helper()
	mock := npmtest.StartAimock(t, upstreamFixtures)
	t.Setenv(UpstreamKeyEnv, "mock-key-0123456789")
	bs := buildServer(t, cfg.Package, []byte(cfg.Workspace(mock)))
	base, stop := bs.serve(t)
	defer func() { stop() }()

	turn := func(session, text string) map[string]any {
		t.Helper()
		code, out := postJSON(t, base, "/v1/sessions/"+session+"/messages", fmt.Sprintf(`{"content":%q}`, text))
		if code >= 500 {
			t.Fatalf("%q: %d %v", text, code, out)
		}
		return out
	}
	completed := func(session, text string, want ...string) map[string]any {
		t.Helper()
		out := turn(session, text)
		replies := fmt.Sprint(out["replies"])
		if out["outcome"] != "completed" {
			t.Fatalf("%q in %s: %v", text, session, out)
		}
		for _, w := range want {
			if !strings.Contains(replies, w) {
				t.Fatalf("%q in %s: the replies lack %q: %v", text, session, w, out)
			}
		}
		return out
	}
	errored := func(session, text, category string) {
		t.Helper()
		out := turn(session, text)
		e, _ := out["error"].(map[string]any)
		if out["outcome"] != "errored" || e["category"] != category {
			t.Fatalf("%q in %s: %v, want an errored turn in %s", text, session, out, category)
		}
		if s := fmt.Sprint(out); strings.Contains(s, "mock-key-0123456789") {
			t.Fatalf("the API key is in the answer: %s", s)
		}
		run := getJSON(t, base, "/v1/runs/"+fmt.Sprint(out["run_id"]))
		if run["status"] != "failed" {
			t.Fatalf("the errored turn's run: %v", run)
		}
	}

	completed("plain", "hello", "Hello from the mock.")
	out := completed("tool", "where is order 7", "order 7: shipped, arriving Thursday", "Order 7 is on its way.")
	if types := eventTypes(t, base, fmt.Sprint(out["run_id"])); !strings.Contains(types, ":"+runtime.PhaseToolStart) || !strings.Contains(types, ":"+runtime.PhaseToolResult) {
		t.Fatalf("the tool turn's run records no tool events: %s", types)
	}

	for _, stream := range []bool{false, true} {
		code, raw := post(t, base, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, AgentID, stream))
		if got := completionText(raw, stream); code != 200 || got != "Hello from the mock." {
			t.Fatalf("OpenAI endpoint (stream %v): %d %q\n%s", stream, code, got, raw)
		}
	}

	code, raw := post(t, base, "/v1/openharness", `{"protocol_version":"1.0.0","request_id":"r-refund","request":{"context":{"session_id":"refund","user_intent":"refund order 5"}}}`)
	var oh ohAnswer
	if err := json.Unmarshal(raw, &oh); err != nil || code != 200 || oh.signal() == "" {
		t.Fatalf("OpenHarness refund: %d %v\n%s", code, err, raw)
	}
	stop() // SIGKILL with the approval pending
	base, stop = bs.serve(t)
	code, out = postJSON(t, base, "/v1/sessions/refund/signals", fmt.Sprintf(`{"signal_id":%q,"payload":{"approval":{"approved":true}}}`, oh.signal()))
	if code != 200 || out["outcome"] != "completed" || !strings.Contains(fmt.Sprint(out["replies"]), "refunded $30.00 for order 5") ||
		!strings.Contains(fmt.Sprint(out["replies"]), "The refund is done.") {
		t.Fatalf("approval after the restart: %d %v", code, out)
	}
	completed("refund", "hello", "Hello from the mock.")

	// Two calls that each need approval, in one answer: each is
	// approved in turn (a backend may ask for both at once or one after
	// the other), and both run.
	out = turn("refunds", "refund orders 8 and 9")
	said := fmt.Sprint(out["pending_messages"])
	for i := 0; out["outcome"] == "suspended" && i < 3; i++ {
		sig, _ := out["signal"].(map[string]any)
		code, out = postJSON(t, base, "/v1/sessions/refunds/signals", fmt.Sprintf(`{"signal_id":%q,"payload":{"approval":{"approved":true}}}`, sig["signal_id"]))
		if code != 200 {
			t.Fatalf("approval %d of two calls: %d %v", i+1, code, out)
		}
		said += fmt.Sprint(out["pending_messages"], out["replies"])
	}
	if out["outcome"] != "completed" || !strings.Contains(said, "refunded $10.00 for order 8") ||
		!strings.Contains(said, "refunded $20.00 for order 9") || !strings.Contains(said, "Both refunds are done.") {
		t.Fatalf("two approvals in one answer: %v, after %s", out, said)
	}
	completed("refunds", "hello", "Hello from the mock.")

	errored("limited", "limit", "provider_rate_limit")
	completed("limited", "hello", "Hello from the mock.")
	errored("empty", "nothing", "provider_invalid_response")
	completed("empty", "hello", "Hello from the mock.")
	if cfg.Streaming {
		errored("cut", "cut", "provider_unavailable")
		completed("cut", "hello", "Hello from the mock.")
	}
	// What each session holds is what its completed turns said: no
	// errored turn left a message behind, in the runtime's session or the
	// upstream's (whose history the next turn sent).
	for session, failed := range map[string]string{"limited": "limit", "empty": "nothing", "cut": "cut"} {
		if session == "cut" && !cfg.Streaming {
			continue
		}
		s := fmt.Sprint(getJSON(t, base, "/v1/sessions/"+session)["messages"])
		if strings.Contains(s, failed) || strings.Contains(s, "connection drops") || strings.Count(s, "Hello from the mock.") != 1 {
			t.Errorf("session %s holds: %s", session, s)
		}
	}
}

// post posts body to base+path and returns the status and the body.
func post(t *testing.T, base, path, body string) (int, []byte) {
	t.Helper()
	resp, err := httpPost(base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.code, resp.body
}

// getJSON gets base+path and decodes its JSON object.
func getJSON(t *testing.T, base, path string) map[string]any {
	t.Helper()
	resp, err := httpGet(base + path)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(resp.body, &out); err != nil || resp.code != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.code, resp.body)
	}
	return out
}

// eventTypes lists the types of a run's events (with agent.* phases).
func eventTypes(t *testing.T, base, runID string) string {
	t.Helper()
	var evs struct {
		Events []runtime.Event `json:"events"`
	}
	resp, err := httpGet(base + "/v1/runs/" + runID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(resp.body, &evs); err != nil || resp.code != 200 {
		t.Fatalf("events of %s: %d %s", runID, resp.code, resp.body)
	}
	return typesOf(evs.Events)
}

// completionText is the assistant's text of an OpenAI chat completion,
// or of its stream of chunks joined.
func completionText(raw []byte, stream bool) string {
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if !stream {
		if json.Unmarshal(raw, &c) != nil || len(c.Choices) == 0 {
			return ""
		}
		return c.Choices[0].Message.Content
	}
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		c.Choices = nil
		if json.Unmarshal([]byte(data), &c) == nil && len(c.Choices) > 0 {
			b.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return b.String()
}

// answer is an HTTP answer read whole.
type answer struct {
	code int
	body []byte
}

func httpPost(url, body string) (answer, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	return readAnswer(resp, err)
}

func httpGet(url string) (answer, error) {
	return readAnswer(http.Get(url))
}

func readAnswer(resp *http.Response, err error) (answer, error) {
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, b}, err
}
