package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// harness: one build per test binary, a process per server

// TestMain removes the binary the process tests built, once they ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if ptBin != "" {
		_ = os.RemoveAll(filepath.Dir(ptBin))
	}
	os.Exit(code)
}

var (
	ptBuildOnce sync.Once
	ptBin       string
	ptBuildErr  error
)

func ptBinary(t *testing.T) string {
	t.Helper()
	ptBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "armature-test-binary-")
		if err != nil {
			ptBuildErr = err
			return
		}
		ptBin = filepath.Join(dir, "armature")
		out, err := exec.Command("go", "build", "-o", ptBin, ".").CombinedOutput()
		if err != nil {
			ptBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if ptBuildErr != nil {
		t.Fatal(ptBuildErr)
	}
	return ptBin
}

const (
	ptToken  = "proc-token-aaaaaaaaaaaa"
	ptToken2 = "proc-token-bbbbbbbbbbbb"
)

type ptServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	data   string
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

func ptEnv(extra ...string) []string {
	return append(append(os.Environ(), "ARMATURE_WORKSPACE=", "ARMATURE_TOKENS=", "ARMATURE_DATABASE_URL=",
		"ARMATURE_DATA=", "ARMATURE_ADDR=", "ARMATURE_DURABILITY=", "OTEL_EXPORTER_OTLP_ENDPOINT=",
		"LANGFUSE_PUBLIC_KEY=", "LANGFUSE_SECRET_KEY=", "ARMATURE_LOG_LEVEL=warn"), extra...)
}

// ptStart starts armature serve on data; it fails the test unless it
// prints its "serving on" line.
func ptStart(t *testing.T, data string, args ...string) *ptServer {
	t.Helper()
	s, line := ptTryStart(t, data, args...)
	if s.base == "" {
		s.wait(10 * time.Second)
		t.Fatalf("server did not start (%q): %v\n%s", line, s.err, s.stderr)
	}
	return s
}

// ptTryStart starts the process and returns once it printed its serving
// line or exited (then base is empty).
func ptTryStart(t *testing.T, data string, args ...string) (*ptServer, string) {
	t.Helper()
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--tokens",
		ptToken + ":t1," + ptToken2 + ":t2"}, args...)
	s := &ptServer{t: t, data: data, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(ptBinary(t), all...)
	s.cmd.Env = ptEnv()
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		line, _ := br.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, br)
	}()
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	var line string
	select {
	case line = <-lines:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("server neither served nor exited in 15s\n%s", s.stderr)
	}
	if i := strings.Index(line, "serving on http://"); i >= 0 {
		rest := line[i+len("serving on http://"):]
		s.base = "http://" + strings.Fields(rest)[0]
	}
	return s, line
}

// wait waits for the process to exit; reports whether it did.
func (s *ptServer) wait(d time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (s *ptServer) exitCode() int {
	if s.cmd.ProcessState == nil {
		return -999
	}
	return s.cmd.ProcessState.ExitCode()
}

// term sends SIGTERM and requires a clean exit within d.
func (s *ptServer) term(d time.Duration) {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if !s.wait(d) {
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Fatalf("SIGTERM: not exited within %v\n%s", d, s.stderr)
	}
	if c := s.exitCode(); c != 0 {
		s.t.Fatalf("SIGTERM: exit code %d (%v)\n%s", c, s.err, s.stderr)
	}
}

func (s *ptServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

var ptClient = &http.Client{Timeout: 60 * time.Second}

// req sends a JSON request as tenant t1 and returns status, headers and body.
func (s *ptServer) req(method, path string, body any, hdr ...string) (int, http.Header, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+ptToken)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ptClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, err
}

func (s *ptServer) mustReq(method, path string, body any, hdr ...string) (int, []byte) {
	s.t.Helper()
	code, _, raw, err := s.req(method, path, body, hdr...)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, raw
}

func ptNoPanic(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "panic:") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("%s: panic trace on stderr:\n%s", what, stderr)
	}
}

// ---------------------------------------------------------------------------
// a fake OpenAI upstream whose replies can be slow and whose calls are counted

type ptUpstream struct {
	url   string
	mu    sync.Mutex
	calls map[string]int // by the last message's content
	delay atomic.Int64   // ns, for messages containing "slow"
	// toolResults counts the calls that carried a tool result.
	toolResults atomic.Int64
	toolDelay   atomic.Int64
}

func ptNewUpstream(t *testing.T) *ptUpstream {
	u := &ptUpstream{calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/v1"
	return u
}

func (u *ptUpstream) count(content string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[content]
}

func (u *ptUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"nope"}}`, 404)
		return
	}
	var body struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	last := body.Messages[len(body.Messages)-1]
	var content string
	if err := json.Unmarshal(last.Content, &content); err != nil {
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(last.Content, &parts)
		for _, p := range parts {
			content += p.Text
		}
	}
	u.mu.Lock()
	u.calls[content]++
	u.mu.Unlock()
	var msg map[string]any
	switch {
	case last.Role == "tool":
		u.toolResults.Add(1)
		if d := u.toolDelay.Load(); d > 0 {
			select {
			case <-time.After(time.Duration(d)):
			case <-r.Context().Done():
				return
			}
		}
		msg = map[string]any{"role": "assistant", "content": "done: " + content}
	case strings.Contains(content, "refund"):
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_r1", "type": "function", "function": map[string]any{"name": "issue_refund",
				"arguments": `{"order":"7","amount":30}`}}}}
	default:
		if strings.Contains(content, "slow") {
			select {
			case <-time.After(time.Duration(u.delay.Load())):
			case <-r.Context().Done():
				return
			}
		}
		msg = map[string]any{"role": "assistant", "content": "echo: " + content}
	}
	finish := "stop"
	if msg["tool_calls"] != nil {
		finish = "tool_calls"
	}
	if !body.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "cmpl-1", "object": "chat.completion", "created": 1,
			"model": "m", "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	delta := map[string]any{"role": "assistant"}
	if tc, ok := msg["tool_calls"].([]any); ok {
		c := tc[0].(map[string]any)
		c["index"] = 0
		delta["tool_calls"] = []any{c}
	} else {
		delta["content"] = msg["content"]
	}
	for _, ch := range []map[string]any{
		{"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta}}},
		{"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}},
	} {
		raw, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", raw)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func ptWorkspace(t *testing.T, u *ptUpstream) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws.yaml")
	yaml := "default_agent: up\nagents:\n  - id: up\n    provider: openai\n    base_url: " + u.url +
		"\n    model: m\n    timeout: 60s\n    tools: [lookup_order, issue_refund]\n    approval: [issue_refund]\n"
	if err := os.WriteFile(ws, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws
}

// history returns the session's messages as (role, content) pairs.
type ptMsg struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []any           `json:"tool_calls"`
}

func (m ptMsg) text() string {
	var s string
	_ = json.Unmarshal(m.Content, &s)
	return s
}

func (s *ptServer) history(session string) []ptMsg {
	s.t.Helper()
	code, raw := s.mustReq("GET", "/v1/sessions/"+session, nil)
	if code != 200 {
		s.t.Fatalf("GET session %s: %d %s", session, code, raw)
	}
	var out struct {
		Messages []ptMsg `json:"messages"`
		History  []ptMsg `json:"history"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("session %s: %v %s", session, err, raw)
	}
	if out.Messages == nil {
		return out.History
	}
	return out.Messages
}

func countSub(msgs []ptMsg, role, sub string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role && strings.Contains(string(m.Content), sub) {
			n++
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// approvals across a restart and across surfaces

// ptSuspend starts a refund turn on the given surface and returns the
// suspended run's id, its signal id and (OpenHarness) continuation token.
func ptSuspend(t *testing.T, s *ptServer, surface, session string) (runID, signalID string) {
	t.Helper()
	switch surface {
	case "rest":
		code, raw := s.mustReq("POST", "/v1/sessions/"+session+"/messages",
			map[string]any{"content": "please refund order 7", "message_id": "m-" + session})
		var out struct {
			Outcome string `json:"outcome"`
			RunID   string `json:"run_id"`
			Signal  struct {
				SignalID string `json:"signal_id"`
			} `json:"signal"`
		}
		_ = json.Unmarshal(raw, &out)
		if code != 200 || out.Outcome != "suspended" {
			t.Fatalf("rest suspend: %d %s", code, raw)
		}
		return out.RunID, out.Signal.SignalID
	case "oh":
		code, raw := s.mustReq("POST", "/v1/openharness", map[string]any{"protocol_version": "1.0.0",
			"request_id": "r-" + session, "request": map[string]any{"context": map[string]any{
				"session_id": session, "user_intent": "please refund order 7"}}})
		var out struct {
			Response struct {
				ActionDirectives []struct {
					ActionType string `json:"action_type"`
					Payload    struct {
						SignalID string `json:"signal_id"`
						RunID    string `json:"run_id"`
					} `json:"payload"`
				} `json:"action_directives"`
			} `json:"response"`
		}
		_ = json.Unmarshal(raw, &out)
		for _, d := range out.Response.ActionDirectives {
			if d.ActionType == "request_approval" {
				return d.Payload.RunID, d.Payload.SignalID
			}
		}
		t.Fatalf("oh suspend: %d %s", code, raw)
	case "resp":
		code, raw := s.mustReq("POST", "/v1/responses", map[string]any{"model": "demo",
			"input": "please refund order 7"}, "X-Armature-Session-Id", session, "Idempotency-Key", "k-"+session)
		var out struct {
			ID     string `json:"id"`
			Output []struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"output"`
		}
		_ = json.Unmarshal(raw, &out)
		for _, o := range out.Output {
			if o.Type == "mcp_approval_request" {
				return out.ID, o.ID
			}
		}
		t.Fatalf("responses suspend: %d %s", code, raw)
	}
	t.Fatalf("surface %s", surface)
	return "", ""
}

// ptApprove approves on a surface; it returns whether the surface says
// the approved call ran in this request (not a replay), and the raw body.
func ptApprove(t *testing.T, s *ptServer, surface, session, runID, signalID, reqID string) (int, string) {
	t.Helper()
	switch surface {
	case "rest":
		code, raw := s.mustReq("POST", "/v1/sessions/"+session+"/signals", map[string]any{"signal_id": signalID,
			"payload": map[string]any{"approval": map[string]any{"approved": true}}})
		return code, string(raw)
	case "oh":
		code, raw := s.mustReq("POST", "/v1/openharness", map[string]any{"protocol_version": "1.0.0",
			"request_id": reqID, "request": map[string]any{"context": map[string]any{
				"session_id": session, "user_intent": "yes", "continuation": map[string]any{"run_id": runID},
				"extensions": map[string]any{"dev.armature": map[string]any{
					"signal_payload": map[string]any{"approval": map[string]any{"approved": true}}}}}}})
		return code, string(raw)
	case "resp":
		code, raw := s.mustReq("POST", "/v1/responses", map[string]any{"model": "demo",
			"previous_response_id": runID, "input": []any{map[string]any{"type": "mcp_approval_response",
				"approval_request_id": signalID, "approve": true}}})
		return code, string(raw)
	}
	return 0, ""
}

// TestApprovalAfterRestartFromAnotherSurface: a turn suspended
// for approval on one surface survives SIGTERM and restart and is
// approved on another; the refund runs exactly once, and a second
// approval on the third surface (and a retry on the first) runs nothing.
func TestApprovalAfterRestartFromAnotherSurface(t *testing.T) {
	data := t.TempDir()
	s := ptStart(t, data)
	type tc struct{ start, approve, again string }
	cases := []tc{{"rest", "resp", "oh"}, {"oh", "rest", "resp"}, {"resp", "oh", "rest"}}
	type susp struct{ run, sig string }
	sus := map[int]susp{}
	for i, c := range cases {
		run, sig := ptSuspend(t, s, c.start, fmt.Sprintf("x%d", i))
		sus[i] = susp{run, sig}
	}
	s.term(20 * time.Second)
	s = ptStart(t, data)
	for i, c := range cases {
		session := fmt.Sprintf("x%d", i)
		code, body := ptApprove(t, s, c.approve, session, sus[i].run, sus[i].sig, "ap1-"+session)
		if code != 200 || !strings.Contains(body, "refunded $30.00 for order 7") {
			t.Errorf("%s→%s: approval after restart: %d %s", c.start, c.approve, code, body)
		}
		// a second approval on the third surface, and a retry of the first
		code2, body2 := ptApprove(t, s, c.again, session, sus[i].run, sus[i].sig, "ap2-"+session)
		if code2 >= 500 {
			t.Errorf("%s→%s then %s: %d %s", c.start, c.approve, c.again, code2, body2)
		}
		code3, body3 := ptApprove(t, s, c.approve, session, sus[i].run, sus[i].sig, "ap1-"+session)
		if code3 >= 500 {
			t.Errorf("%s→%s retried: %d %s", c.start, c.approve, code3, body3)
		}
	}
	s.term(20 * time.Second)
	s = ptStart(t, data)
	for i, c := range cases {
		session := fmt.Sprintf("x%d", i)
		h := s.history(session)
		if n := countSub(h, "tool", "refunded $30.00"); n != 1 {
			t.Errorf("%s→%s: %d refund tool results in history, want 1: %+v", c.start, c.approve, n, h)
		}
		if n := countSub(h, "assistant", "Here is what I found: refunded"); n != 1 {
			t.Errorf("%s→%s: %d final replies in history, want 1", c.start, c.approve, n)
		}
		if n := countSub(h, "user", "refund order 7"); n != 1 {
			t.Errorf("%s→%s: %d user messages, want 1", c.start, c.approve, n)
		}
		// runs: one suspended + one completed child, nothing else started
		code, raw := s.mustReq("GET", "/v1/sessions/"+session+"/runs", nil)
		var runs struct {
			Runs []struct {
				Status string `json:"status"`
			} `json:"runs"`
		}
		_ = json.Unmarshal(raw, &runs)
		st := map[string]int{}
		for _, r := range runs.Runs {
			st[r.Status]++
		}
		if code != 200 || st["completed"] < 1 || st["started"] != 0 {
			t.Errorf("%s→%s: runs %v (%d)", c.start, c.approve, st, code)
		}
		t.Logf("%s→%s runs: %v", c.start, c.approve, st)
	}
	s.term(20 * time.Second)
	ptNoPanic(t, "serve", s.stderr.String())
}

// ptTurn sends message i of the burst on one of three surfaces, with
// its idempotency key; it returns the reply text ("" when none).
func ptTurn(s *ptServer, i int, session string) (int, string, error) {
	content := fmt.Sprintf("slow msg %d", i)
	var code int
	var raw []byte
	var err error
	switch i % 3 {
	case 0:
		code, _, raw, err = s.req("POST", "/v1/sessions/"+session+"/messages",
			map[string]any{"content": content, "message_id": fmt.Sprintf("mid-%d", i)})
	case 1:
		code, _, raw, err = s.req("POST", "/v1/openharness", map[string]any{"protocol_version": "1.0.0",
			"request_id": fmt.Sprintf("rid-%d", i), "request": map[string]any{"context": map[string]any{
				"session_id": session, "user_intent": content}}})
	case 2:
		code, _, raw, err = s.req("POST", "/v1/chat/completions", map[string]any{"model": "up",
			"messages": []any{map[string]any{"role": "user", "content": content}}},
			"X-Armature-Session-Id", session, "Idempotency-Key", fmt.Sprintf("ik-%d", i))
	}
	return code, string(raw), err
}

// TestKillDuringBurst: SIGKILL while many turns run on several
// sessions and three surfaces; after restart every session holds whole
// turns, every acknowledged turn is there, no run is left started, and a
// retry of every request with its idempotency key answers the original
// turn (or runs it once if it never committed), never a second model call.
func TestKillDuringBurst(t *testing.T) {
	u := ptNewUpstream(t)
	u.delay.Store(int64(150 * time.Millisecond))
	ws := ptWorkspace(t, u)
	data := t.TempDir()
	s := ptStart(t, data, "--workspace", ws)
	const n, sessions = 36, 4
	type res struct {
		code int
		body string
		err  error
	}
	results := make([]res, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, b, e := ptTurn(s, i, fmt.Sprintf("k%d", i%sessions))
			results[i] = res{c, b, e}
		}(i)
	}
	time.Sleep(900 * time.Millisecond)
	s.kill()
	wg.Wait()
	acked := map[int]bool{}
	for i, r := range results {
		if r.err == nil && r.code == 200 && strings.Contains(r.body, fmt.Sprintf("echo: slow msg %d", i)) {
			acked[i] = true
		}
	}
	t.Logf("acknowledged before SIGKILL: %d of %d", len(acked), n)
	callsBefore := map[int]int{}
	for i := 0; i < n; i++ {
		callsBefore[i] = u.count(fmt.Sprintf("slow msg %d", i))
	}

	s = ptStart(t, data, "--workspace", ws)
	inHistory := map[int]bool{}
	for k := 0; k < sessions; k++ {
		session := fmt.Sprintf("k%d", k)
		code, _, raw, _ := s.req("GET", "/v1/sessions/"+session, nil)
		if code == 404 {
			continue
		}
		h := s.history(session)
		for j, m := range h {
			if m.Role != "user" {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(m.text(), "slow msg %d", &i); err != nil {
				t.Errorf("%s: unexpected user message %q", session, m.text())
				continue
			}
			if inHistory[i] {
				t.Errorf("%s: message %d twice in history", session, i)
			}
			inHistory[i] = true
			if j+1 >= len(h) || h[j+1].Role != "assistant" || h[j+1].text() != fmt.Sprintf("echo: slow msg %d", i) {
				t.Errorf("%s: half turn: user message %d without its reply after restart: %s", session, i, raw)
			}
		}
		if code, raw = s.mustReq("GET", "/v1/sessions/"+session+"/runs?page_size=100", nil); code != 200 {
			t.Fatalf("%s: runs: %d %s", session, code, raw)
		}
		var runs struct {
			Runs []struct {
				ID     string          `json:"id"`
				Status string          `json:"status"`
				Error  json.RawMessage `json:"error"`
			} `json:"runs"`
		}
		_ = json.Unmarshal(raw, &runs)
		st := map[string]int{}
		for _, r := range runs.Runs {
			st[r.Status]++
			if r.Status == "started" || r.Status == "running" {
				t.Errorf("%s: run %s still %s after restart", session, r.ID, r.Status)
			}
		}
		t.Logf("%s runs after restart: %v", session, st)
	}
	for i := range acked {
		if !inHistory[i] {
			t.Errorf("acknowledged turn %d (%s) lost after SIGKILL", i, results[i].body)
		}
	}
	// retry every request with its key
	for i := 0; i < n; i++ {
		code, body, err := ptTurn(s, i, fmt.Sprintf("k%d", i%sessions))
		if err != nil || code >= 500 && code != 503 {
			t.Errorf("retry %d: %d %v %s", i, code, err, body)
			continue
		}
		calls := u.count(fmt.Sprintf("slow msg %d", i))
		if inHistory[i] {
			if calls != callsBefore[i] {
				t.Errorf("retry of committed turn %d called the model again (%d→%d): %s", i, callsBefore[i], calls, body)
			}
			if !strings.Contains(body, fmt.Sprintf("echo: slow msg %d", i)) {
				t.Errorf("retry of committed turn %d did not answer the original: %d %s", i, code, body)
			}
		}
	}
	// after the retries, each message is in history exactly once with its reply
	for k := 0; k < sessions; k++ {
		h := s.history(fmt.Sprintf("k%d", k))
		seen := map[string]int{}
		for _, m := range h {
			if m.Role == "user" {
				seen[m.text()]++
			}
		}
		for msg, c := range seen {
			if c != 1 {
				t.Errorf("k%d: %q %d times in history after retries", k, msg, c)
			}
		}
	}
	s.term(20 * time.Second)
	ptNoPanic(t, "serve", s.stderr.String())
}

// TestSigtermLetsInFlightTurnsFinish: SIGTERM while six slow
// turns run (2 s each, grace 30 s): every turn's client gets its reply,
// a turn sent after the signal is refused 503 (or the connection is
// refused), and the process exits 0.
func TestSigtermLetsInFlightTurnsFinish(t *testing.T) {
	u := ptNewUpstream(t)
	u.delay.Store(int64(2 * time.Second))
	ws := ptWorkspace(t, u)
	data := t.TempDir()
	s := ptStart(t, data, "--workspace", ws)
	const n = 6
	type res struct {
		code int
		body string
		err  error
	}
	results := make([]res, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, b, e := ptTurn(s, i, fmt.Sprintf("g%d", i))
			results[i] = res{c, b, e}
		}(i)
	}
	time.Sleep(700 * time.Millisecond)
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond)
	code, _, body, err := s.req("POST", "/v1/sessions/late/messages", map[string]any{"content": "hi"})
	if err == nil && code != 503 {
		t.Errorf("turn sent during shutdown: %d %s, want 503", code, body)
	}
	wg.Wait()
	if !s.wait(15 * time.Second) {
		s.kill()
		t.Fatalf("not exited 15 s after SIGTERM\n%s", s.stderr)
	}
	t.Logf("exited %v after SIGTERM, code %d", time.Since(start), s.exitCode())
	if s.exitCode() != 0 {
		t.Errorf("exit code %d after graceful shutdown\n%s", s.exitCode(), s.stderr)
	}
	for i, r := range results {
		if r.err != nil || r.code != 200 || !strings.Contains(r.body, fmt.Sprintf("echo: slow msg %d", i)) {
			t.Errorf("in-flight turn %d across SIGTERM: %d %v %s", i, r.code, r.err, r.body)
		}
	}
	ptNoPanic(t, "serve", s.stderr.String())
	s = ptStart(t, data, "--workspace", ws)
	for i := 0; i < n; i++ {
		h := s.history(fmt.Sprintf("g%d", i))
		if len(h) != 2 {
			t.Errorf("g%d after restart: %+v", i, h)
		}
	}
	s.term(20 * time.Second)
}

// TestSigtermGraceExpires: with --grace 1s and turns that take
// 8 s, SIGTERM cancels them: each client gets an error (not a hang, not
// a reply later), the process exits 0 within a few seconds, and after
// restart the runs are ended (cancelled/failed), no half turn.
func TestSigtermGraceExpires(t *testing.T) {
	u := ptNewUpstream(t)
	u.delay.Store(int64(8 * time.Second))
	ws := ptWorkspace(t, u)
	data := t.TempDir()
	s := ptStart(t, data, "--workspace", ws, "--grace", "1s")
	const n = 3
	type res struct {
		code int
		body string
		err  error
	}
	results := make([]res, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, b, e := ptTurn(s, i, fmt.Sprintf("c%d", i))
			results[i] = res{c, b, e}
		}(i)
	}
	time.Sleep(700 * time.Millisecond)
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if !s.wait(10 * time.Second) {
		s.kill()
		t.Fatalf("not exited 10 s after SIGTERM with --grace 1s\n%s", s.stderr)
	}
	took := time.Since(start)
	wg.Wait()
	t.Logf("exited %v after SIGTERM, code %d", took, s.exitCode())
	if s.exitCode() != 0 {
		t.Errorf("exit code %d\n%s", s.exitCode(), s.stderr)
	}
	if took > 6*time.Second {
		t.Errorf("shutdown took %v with --grace 1s", took)
	}
	for i, r := range results {
		t.Logf("turn %d: %d %v %.300s", i, r.code, r.err, r.body)
		if r.err == nil && r.code == 200 && strings.Contains(r.body, "echo:") {
			t.Errorf("turn %d completed although cancelled?", i)
		}
		if r.err != nil {
			t.Errorf("turn %d: client got no answer, only %v (README: clients get invocation_cancelled)", i, r.err)
		} else if !strings.Contains(r.body, "cancel") {
			t.Errorf("turn %d: answer does not say cancelled: %d %s", i, r.code, r.body)
		}
	}
	ptNoPanic(t, "serve", s.stderr.String())
	s = ptStart(t, data, "--workspace", ws)
	for i := 0; i < n; i++ {
		session := fmt.Sprintf("c%d", i)
		code, raw := s.mustReq("GET", "/v1/sessions/"+session+"/runs", nil)
		if code != 200 {
			continue
		}
		if strings.Contains(string(raw), `"status":"started"`) {
			t.Errorf("%s: a run still started after restart: %s", session, raw)
		}
		code, raw = s.mustReq("GET", "/v1/sessions/"+session, nil)
		if code == 200 && strings.Contains(string(raw), "slow msg") && !strings.Contains(string(raw), "echo:") {
			t.Errorf("%s: half turn after cancel: %s", session, raw)
		}
	}
	// the cancelled turns stored nothing: their retries run, once
	u.delay.Store(0)
	for i := 0; i < n; i++ {
		code, body, err := ptTurn(s, i, fmt.Sprintf("c%d", i))
		if err != nil || code != 200 || !strings.Contains(body, fmt.Sprintf("echo: slow msg %d", i)) {
			t.Errorf("retry of cancelled turn %d after restart: %d %v %.400s", i, code, err, body)
		}
		h := s.history(fmt.Sprintf("c%d", i))
		if countSub(h, "user", "slow msg") != 1 || countSub(h, "assistant", "echo: slow msg") != 1 {
			t.Errorf("c%d after retry: %+v", i, h)
		}
	}
	s.term(20 * time.Second)
}

// TestTwoProcessesOneDataDir: a second armature serve on the
// data directory of a running one refuses clearly, exits non-zero, and
// the first keeps working with its data intact.
func TestTwoProcessesOneDataDir(t *testing.T) {
	data := t.TempDir()
	a := ptStart(t, data)
	if code, raw := a.mustReq("POST", "/v1/sessions/two/messages", map[string]any{"content": "where is order 1?"}); code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	b, line := ptTryStart(t, data)
	if b.base != "" {
		code, raw := b.mustReq("POST", "/v1/sessions/two/messages", map[string]any{"content": "where is order 2?"})
		t.Errorf("second process on the same data dir started (%q); a turn on it: %d %s", line, code, raw)
		b.term(20 * time.Second)
	} else {
		if !b.wait(10 * time.Second) {
			t.Fatal("second process neither served nor exited")
		}
		msg := b.stderr.String()
		t.Logf("second process: exit %d: %s", b.exitCode(), msg)
		if b.exitCode() == 0 {
			t.Errorf("second process exited 0")
		}
		if !strings.Contains(strings.ToLower(msg), "lock") && !strings.Contains(strings.ToLower(msg), "another") &&
			!strings.Contains(strings.ToLower(msg), "in use") {
			t.Errorf("refusal does not say the directory is in use: %s", msg)
		}
		ptNoPanic(t, "second", msg)
	}
	if code, raw := a.mustReq("POST", "/v1/sessions/two/messages", map[string]any{"content": "where is order 3?"}); code != 200 {
		t.Fatalf("first process after the second tried: %d %s", code, raw)
	}
	if h := a.history("two"); countSub(h, "user", "order") != 2 {
		t.Errorf("history: %+v", h)
	}
	a.term(20 * time.Second)
}

// ptMustRefuse runs serve with args and requires a non-zero exit with a
// one-line-ish error and no panic.
func ptMustRefuse(t *testing.T, what, data string, args ...string) string {
	t.Helper()
	s, line := ptTryStart(t, data, args...)
	if s.base != "" {
		s.kill()
		t.Errorf("%s: server started (%q), want a startup error", what, strings.TrimSpace(line))
		return ""
	}
	if !s.wait(15 * time.Second) {
		s.kill()
		t.Errorf("%s: neither served nor exited", what)
		return ""
	}
	msg := s.stderr.String()
	if s.exitCode() == 0 {
		t.Errorf("%s: exit 0 without serving: %s", what, msg)
	}
	if strings.TrimSpace(msg) == "" {
		t.Errorf("%s: exit %d with nothing on stderr", what, s.exitCode())
	}
	ptNoPanic(t, what, msg)
	return msg
}

// TestBadDataDirs: a data path that is a file, one under a
// read-only file system, armature.db that is a directory, garbage, a
// truncated or corrupted database: a clear error, non-zero exit.
func TestBadDataDirs(t *testing.T) {
	// a real database to damage
	good := t.TempDir()
	s := ptStart(t, good)
	for i := 0; i < 30; i++ {
		s.mustReq("POST", fmt.Sprintf("/v1/sessions/d%d/messages", i), map[string]any{"content": strings.Repeat("where is order 5? ", 50)})
	}
	s.term(20 * time.Second)
	dbBytes, err := os.ReadFile(filepath.Join(good, "armature.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("database: %d bytes", len(dbBytes))

	file := filepath.Join(t.TempDir(), "afile")
	_ = os.WriteFile(file, []byte("x"), 0o600)
	t.Logf("file: %s", ptMustRefuse(t, "data is a file", file))
	t.Logf("sysfs: %s", ptMustRefuse(t, "read-only fs", "/sys/-binary"))

	dbdir := t.TempDir()
	_ = os.Mkdir(filepath.Join(dbdir, "armature.db"), 0o700)
	t.Logf("db dir: %s", ptMustRefuse(t, "armature.db is a directory", dbdir))

	garbage := t.TempDir()
	_ = os.WriteFile(filepath.Join(garbage, "armature.db"), bytes.Repeat([]byte("garbage!"), 4096), 0o600)
	t.Logf("garbage: %s", ptMustRefuse(t, "garbage armature.db", garbage))

	trunc := t.TempDir()
	_ = os.WriteFile(filepath.Join(trunc, "armature.db"), dbBytes[:len(dbBytes)/2+100], 0o600)
	t.Logf("truncated: %s", ptMustRefuse(t, "truncated armature.db", trunc))

	corrupt := t.TempDir()
	c := append([]byte(nil), dbBytes...)
	for i := 4096 + 200; i < len(c)-4096; i += 4096 { // keep page 1, scribble over every other page's body
		copy(c[i:i+300], bytes.Repeat([]byte{0xA5}, 300))
	}
	_ = os.WriteFile(filepath.Join(corrupt, "armature.db"), c, 0o600)
	t.Logf("corrupt: %s", ptMustRefuse(t, "corrupt armature.db", corrupt))

	// garbage beside a good database: a bogus -wal and -shm and other
	// files must not stop it or lose data
	beside := t.TempDir()
	_ = os.WriteFile(filepath.Join(beside, "armature.db"), dbBytes, 0o600)
	_ = os.WriteFile(filepath.Join(beside, "armature.db-wal"), bytes.Repeat([]byte{0x37}, 10000), 0o600)
	_ = os.WriteFile(filepath.Join(beside, "armature.db-shm"), bytes.Repeat([]byte{0xff}, 32768), 0o600)
	for i := 0; i < 20; i++ {
		_ = os.WriteFile(filepath.Join(beside, fmt.Sprintf("junk%d", i)), []byte("junk"), 0o600)
	}
	s2, line := ptTryStart(t, beside)
	if s2.base == "" {
		s2.wait(10 * time.Second)
		ptNoPanic(t, "garbage wal", s2.stderr.String())
		t.Logf("garbage -wal/-shm beside a good db refused: exit %d %s (%q)", s2.exitCode(), s2.stderr, line)
		if s2.exitCode() == 0 {
			t.Errorf("garbage -wal: exit 0 without serving")
		}
	} else {
		code, raw := s2.mustReq("GET", "/v1/sessions/d7", nil)
		if code != 200 || !strings.Contains(string(raw), "order 5") {
			t.Errorf("good db with garbage -wal/-shm: session d7: %d %.200s", code, raw)
		}
		s2.term(20 * time.Second)
	}
}

// TestBadFlags: malformed or out-of-range flag values are clear
// startup errors, never a server running with a nonsense setting.
func TestBadFlags(t *testing.T) {
	cases := [][]string{
		{"--addr", "not-an-address"},
		{"--addr", "127.0.0.1:99999"},
		{"--addr", "256.1.1.1:80"},
		{"--durability", "off"},
		{"--durability", "FULL "},
		{"--log", "xml"},
		{"--log-level", "loud"},
		{"--max-turns", "-5"},
		{"--max-streams", "-1"},
		{"--max-queued-turns", "-1"},
		{"--max-turns-per-tenant", "-3"},
		{"--max-turns", "99999999999999999999"},
		{"--session-cache-bytes", "-1"},
		{"--session-cache-bytes", "99999999999999999999999"},
		{"--run-max-bytes", "-5"},
		{"--run-max-bytes", "1ZB"},
		{"--grace", "-1s"},
		{"--session-wait", "-1s"},
		{"--drain-delay", "-1s"},
		{"--run-retention", "-1h"},
		{"--reconcile-interval", "-1s"},
		{"--tokens", "short:t1"},
		{"--tokens", "-token-cccccccccccc:bad tenant"},
		{"--debug-addr", "0.0.0.0:0"},
		{"--nonsense-flag"},
	}
	for _, args := range cases {
		data := t.TempDir()
		msg := ptMustRefuse(t, strings.Join(args, " "), data, args...)
		if msg != "" {
			t.Logf("%v → %s", args, strings.TrimSpace(firstLine(msg)))
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// TestHTTPLimits: a 5 MiB body (with and without Content-Length),
// a slowloris client, HTTP/1.0 without Host, and a 100 KiB header: each
// is answered within its limit, nothing stored, and the server keeps
// serving others throughout.
func TestHTTPLimits(t *testing.T) {
	data := t.TempDir()
	s := ptStart(t, data)
	host := strings.TrimPrefix(s.base, "http://")
	big := `{"content":"` + strings.Repeat("a", 5<<20) + `"}`
	code, raw := s.mustReq("POST", "/v1/sessions/big/messages", big)
	if code != 413 {
		t.Errorf("5 MiB body: %d %.300s, want 413", code, raw)
	}
	// chunked, no Content-Length
	req, _ := http.NewRequest("POST", s.base+"/v1/sessions/big/messages", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Authorization", "Bearer "+ptToken)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	if resp, err := ptClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("chunked 5 MiB body: %d %.300s, want 413", resp.StatusCode, b)
		}
	} else {
		t.Logf("chunked big body: %v", err)
	}
	// responses + chat completions too
	for _, p := range []string{"/v1/chat/completions", "/v1/responses", "/v1/openharness"} {
		code, raw := s.mustReq("POST", p, big)
		if code != 413 {
			t.Errorf("5 MiB body on %s: %d %.300s", p, code, raw)
		}
	}
	if code, _ := s.mustReq("GET", "/v1/sessions/big", nil); code != 404 {
		t.Errorf("a refused body stored a session: %d", code)
	}

	// slowloris: 20 connections sending one header byte a second
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /v1/sessions HTTP/1.1\r\nHost: %s\r\nX-A: ", host)
	}
	stop := make(chan struct{})
	closedAt := make([]time.Duration, len(conns))
	var swg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		swg.Add(1)
		go func(i int, c net.Conn) {
			defer swg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
				if _, err := c.Write([]byte("a")); err != nil {
					closedAt[i] = time.Since(start)
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
				var b [1]byte
				if _, err := c.Read(b[:]); err != nil && !isTimeout(err) {
					closedAt[i] = time.Since(start)
					return
				}
			}
		}(i, c)
	}
	// meanwhile the server serves
	for i := 0; i < 3; i++ {
		time.Sleep(time.Second)
		if code, raw := s.mustReq("POST", "/v1/sessions/ok/messages", map[string]any{"content": "where is order 1?"}); code != 200 {
			t.Errorf("during slowloris: %d %s", code, raw)
		}
	}
	time.Sleep(6 * time.Second)
	close(stop)
	swg.Wait()
	open := 0
	for _, d := range closedAt {
		if d == 0 {
			open++
		}
	}
	if open > 0 {
		t.Errorf("slowloris: %d of %d connections still open after %v (ReadHeaderTimeout is 5 s)", open, len(conns), time.Since(start))
	}
	for _, c := range conns {
		c.Close()
	}

	// HTTP/1.0 without Host
	for _, path := range []string{"/v1/sessions", "/healthz", "/"} {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", path, ptToken)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("HTTP/1.0 without Host %s: %v", path, err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("HTTP/1.0 no Host %s: %d %.120s", path, resp.StatusCode, b)
			if resp.StatusCode >= 500 {
				t.Errorf("HTTP/1.0 without Host %s: %d %s", path, resp.StatusCode, b)
			}
		}
		c.Close()
	}
	// a 100 KiB header
	hreq, _ := http.NewRequest("GET", s.base+"/v1/sessions", nil)
	hreq.Header.Set("Authorization", "Bearer "+ptToken)
	hreq.Header.Set("X-Big", strings.Repeat("b", 100<<10))
	if resp, err := ptClient.Do(hreq); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 431 {
			t.Errorf("100 KiB header: %d, want 431", resp.StatusCode)
		}
	} else {
		t.Logf("100 KiB header: %v", err)
	}
	if code, _ := s.mustReq("GET", "/healthz", nil); code != 200 {
		t.Errorf("healthz after the abuse: %d", code)
	}
	s.term(20 * time.Second)
	ptNoPanic(t, "serve", s.stderr.String())
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestTwoProcessesStartTogether: two processes started at the
// same instant on a fresh data directory: exactly one serves.
func TestTwoProcessesStartTogether(t *testing.T) {
	for round := 0; round < 4; round++ {
		data := filepath.Join(t.TempDir(), "fresh")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var servers []*ptServer
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, _ := ptTryStart(t, data)
				mu.Lock()
				servers = append(servers, s)
				mu.Unlock()
			}()
		}
		wg.Wait()
		serving := 0
		for _, s := range servers {
			if s.base != "" {
				serving++
			} else {
				s.wait(10 * time.Second)
				ptNoPanic(t, "loser", s.stderr.String())
				if s.exitCode() == 0 {
					t.Errorf("round %d: a process exited 0 without serving", round)
				}
			}
		}
		if serving != 1 {
			t.Errorf("round %d: %d processes serving one data dir", round, serving)
		}
		for _, s := range servers {
			if s.base != "" {
				s.term(20 * time.Second)
			}
		}
	}
}

// TestApprovedTurnCancelledByShutdown: the approved refund runs,
// then the model call after it hangs and SIGTERM's grace expires: the
// client is told the decision took effect (not retryable); after
// restart the approval sent again on every surface runs nothing, and a
// new message goes on with the refund in the history once.
func TestApprovedTurnCancelledByShutdown(t *testing.T) {
	u := ptNewUpstream(t)
	ws := ptWorkspace(t, u)
	data := t.TempDir()
	s := ptStart(t, data, "--workspace", ws, "--grace", "1s")
	code, raw := s.mustReq("POST", "/v1/sessions/ap/messages", map[string]any{"content": "please refund order 7"})
	var out struct {
		Outcome string `json:"outcome"`
		RunID   string `json:"run_id"`
		Signal  struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	_ = json.Unmarshal(raw, &out)
	if code != 200 || out.Outcome != "suspended" {
		t.Fatalf("suspend: %d %s", code, raw)
	}
	u.toolDelay.Store(int64(20 * time.Second))
	type res struct {
		code int
		hdr  http.Header
		body []byte
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		c, h, b, e := s.req("POST", "/v1/responses", map[string]any{"model": "up",
			"previous_response_id": out.RunID, "input": []any{map[string]any{"type": "mcp_approval_response",
				"approval_request_id": out.Signal.SignalID, "approve": true}}})
		ch <- res{c, h, b, e}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for u.toolResults.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if u.toolResults.Load() == 0 {
		t.Fatal("the approved call's result never reached the model")
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	r := <-ch
	if !s.wait(10 * time.Second) {
		s.kill()
		t.Fatal("not exited")
	}
	if s.exitCode() != 0 {
		t.Errorf("exit %d", s.exitCode())
	}
	t.Logf("resume cancelled by shutdown: %d %v should-retry=%q %s", r.code, r.err, r.hdr.Get("X-Should-Retry"), r.body)
	if r.err == nil && r.hdr.Get("X-Should-Retry") != "false" {
		t.Errorf("resumed turn cancelled after its approval took effect: X-Should-Retry %q, want false: %d %s",
			r.hdr.Get("X-Should-Retry"), r.code, r.body)
	}
	u.toolDelay.Store(0)
	s = ptStart(t, data, "--workspace", ws)
	before := u.toolResults.Load()
	for _, surface := range []string{"rest", "oh", "resp"} {
		var c int
		var b string
		switch surface {
		case "resp":
			c, raw := s.mustReq("POST", "/v1/responses", map[string]any{"model": "up",
				"previous_response_id": out.RunID, "input": []any{map[string]any{"type": "mcp_approval_response",
					"approval_request_id": out.Signal.SignalID, "approve": true}}})
			b = string(raw)
			if c != 409 {
				t.Errorf("responses approval again after restart: %d %s, want 409", c, b)
			}
			continue
		default:
			c, b = ptApprove(t, s, surface, "ap", out.RunID, out.Signal.SignalID, "again-"+surface)
		}
		if c >= 500 || strings.Contains(b, `"outcome":"completed"`) && !strings.Contains(b, "replayed") {
			t.Errorf("%s approval again after restart: %d %s", surface, c, b)
		}
		t.Logf("%s again: %d %.300s", surface, c, b)
	}
	h := s.history("ap")
	if n := countSub(h, "tool", "refunded $30.00"); n != 1 {
		t.Errorf("refund results in history: %d, want 1: %+v", n, h)
	}
	code, raw = s.mustReq("POST", "/v1/sessions/ap/messages", map[string]any{"content": "thanks"})
	if code != 200 || !strings.Contains(string(raw), "echo: thanks") {
		t.Errorf("new message after the cancelled resume: %d %s", code, raw)
	}
	if got := u.toolResults.Load(); got != before {
		t.Errorf("approvals after restart reran the model with a tool result: %d→%d", before, got)
	}
	h = s.history("ap")
	if n := countSub(h, "tool", "refunded $30.00"); n != 1 {
		t.Errorf("refund results in history after new message: %d: %+v", n, h)
	}
	s.term(20 * time.Second)
}

// TestStreamInterruptedThenSDKRetry: a streamed chat completion
// whose client hangs up mid-stream, then the OpenAI SDK's automatic
// retry (same body, X-Stainless-Retry-Count: 1, no Idempotency-Key):
// the retry answers the first attempt's turn and the model is called
// once.
func TestStreamInterruptedThenSDKRetry(t *testing.T) {
	u := ptNewUpstream(t)
	u.delay.Store(int64(1500 * time.Millisecond))
	ws := ptWorkspace(t, u)
	s := ptStart(t, t.TempDir(), "--workspace", ws)
	body := `{"model":"up","stream":true,"messages":[{"role":"user","content":"slow stream 1"}]}`
	send := func(ctx context.Context, retry string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ptToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Armature-Session-Id", "st")
		req.Header.Set("X-Stainless-Retry-Count", retry)
		req.Header.Set("X-Stainless-Lang", "js")
		return ptClient.Do(req)
	}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := send(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	buf := make([]byte, 64)
	_, _ = resp.Body.Read(buf) // the first bytes, then hang up
	time.Sleep(200 * time.Millisecond)
	cancel()
	resp.Body.Close()
	time.Sleep(100 * time.Millisecond)
	resp2, err := send(context.Background(), "1")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 200 || !strings.Contains(string(raw), "echo: slow stream 1") || !strings.Contains(string(raw), "[DONE]") {
		t.Errorf("SDK retry after the client hung up mid-stream: %d %s", resp2.StatusCode, raw)
	}
	if n := u.count("slow stream 1"); n != 1 {
		t.Errorf("model called %d times for one message and its SDK retry", n)
	}
	h := s.history("st")
	if countSub(h, "user", "slow stream 1") != 1 || countSub(h, "assistant", "echo: slow stream 1") != 1 {
		t.Errorf("history after the retry: %+v", h)
	}
	// a new attempt (retry count 0) of the same body is a new turn, as the SDK's next call
	s.term(20 * time.Second)
}

// TestDiskFull: the data directory's volume (a 4 MiB tmpfs)
// fills up while the server runs: turns fail retryably with nothing half
// written, the server stays up, and once space is freed turns work again;
// after a restart the history holds whole turns only.
func TestDiskFull(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	_ = os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	data := filepath.Join(mnt, "data")
	s := ptStart(t, data)
	for i := 0; i < 3; i++ {
		if code, raw := s.mustReq("POST", "/v1/sessions/full/messages", map[string]any{"content": fmt.Sprintf("where is order %d?", i)}); code != 200 {
			t.Fatalf("%d %s", code, raw)
		}
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{1}, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	f.Close()
	okDuringFull := 0
	for i := 0; i < 6; i++ {
		code, _, raw, err := s.req("POST", "/v1/sessions/full/messages",
			map[string]any{"content": fmt.Sprintf("where is order %d? %s", 10+i, strings.Repeat("pad ", 2000))})
		if err != nil {
			t.Errorf("turn on a full disk: %v", err)
			continue
		}
		t.Logf("full disk turn %d: %d %.250s", i, code, raw)
		if code >= 500 && !strings.Contains(string(raw), "retry") {
			t.Errorf("turn on a full disk: %d %s", code, raw)
		}
		if code == 200 && strings.Contains(string(raw), `"outcome":"completed"`) {
			okDuringFull++
		}
	}
	if code, raw := s.mustReq("GET", "/healthz", nil); code != 200 {
		t.Errorf("healthz on a full disk: %d %s", code, raw)
	}
	_ = os.Remove(filler)
	var code int
	var raw []byte
	for try := 0; try < 20; try++ {
		code, raw = s.mustReq("POST", "/v1/sessions/full/messages", map[string]any{"content": "where is order 99?"})
		if code == 200 && strings.Contains(string(raw), `"outcome":"completed"`) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code != 200 || !strings.Contains(string(raw), `"outcome":"completed"`) {
		t.Errorf("after freeing space: %d %s", code, raw)
	}
	s.term(20 * time.Second)
	ptNoPanic(t, "serve", s.stderr.String())
	s = ptStart(t, data)
	h := s.history("full")
	for j, m := range h {
		if m.Role == "user" && (j+1 >= len(h) || h[j+1].Role != "assistant") {
			t.Errorf("half turn after a full disk: %q", m.text())
		}
	}
	if n := countSub(h, "user", "order"); n != 4+okDuringFull {
		t.Errorf("history holds %d user messages, want %d (3 + %d during full + 1)", n, 4+okDuringFull, okDuringFull)
	}
	s.term(20 * time.Second)
}

// TestSecondSignalDuringGrace: a second SIGTERM (and then a
// SIGINT) while shutdown waits for a long turn: no panic trace, and the
// process ends (at once or at the end of its grace).
func TestSecondSignalDuringGrace(t *testing.T) {
	u := ptNewUpstream(t)
	u.delay.Store(int64(4 * time.Second))
	ws := ptWorkspace(t, u)
	s := ptStart(t, t.TempDir(), "--workspace", ws, "--grace", "10s")
	ch := make(chan string, 1)
	go func() {
		code, body, err := ptTurn(s, 0, "sig")
		ch <- fmt.Sprintf("%d %v %.300s", code, err, body)
	}()
	time.Sleep(500 * time.Millisecond)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	if !s.wait(15 * time.Second) {
		s.kill()
		t.Fatalf("not exited\n%s", s.stderr)
	}
	t.Logf("exit %d; turn: %s", s.exitCode(), <-ch)
	ptNoPanic(t, "serve", s.stderr.String())
	if s.exitCode() != 0 {
		t.Logf("stderr: %s", s.stderr)
	}
}

// TestSuspensionRetransmittedAfterKill: a suspended turn's
// request retransmitted with its key after a SIGKILL and restart (REST
// message_id, OpenHarness request_id, Responses Idempotency-Key) answers
// the same suspension, opens no second turn, and the approval then
// still works once.
func TestSuspensionRetransmittedAfterKill(t *testing.T) {
	data := t.TempDir()
	s := ptStart(t, data)
	type susp struct{ run, sig string }
	first := map[string]susp{}
	for _, surface := range []string{"rest", "oh", "resp"} {
		r, g := ptSuspend(t, s, surface, "rt-"+surface)
		first[surface] = susp{r, g}
	}
	s.kill()
	s = ptStart(t, data)
	for _, surface := range []string{"rest", "oh", "resp"} {
		r, g := ptSuspend(t, s, surface, "rt-"+surface)
		if r != first[surface].run || g != first[surface].sig {
			t.Errorf("%s: retransmission after SIGKILL answered run %s signal %s, first was %s %s",
				surface, r, g, first[surface].run, first[surface].sig)
		}
		h := s.history("rt-" + surface)
		if n := countSub(h, "user", "refund order 7"); n != 1 {
			t.Errorf("%s: %d user messages after the retransmission", surface, n)
		}
		code, body := ptApprove(t, s, "rest", "rt-"+surface, first[surface].run, first[surface].sig, "")
		if code != 200 || !strings.Contains(body, "refunded $30.00") {
			t.Errorf("%s: approval after retransmission: %d %s", surface, code, body)
		}
		// the original request retransmitted once more, after the approval
		code2, _, raw, _ := s.req("GET", "/v1/sessions/rt-"+surface, nil)
		if code2 != 200 || strings.Count(string(raw), "refunded $30.00 for order 7\"") < 1 {
			t.Errorf("%s: session after approval: %d %s", surface, code2, raw)
		}
	}
	// the suspending requests retransmitted once more after the approval,
	// and after another restart: no second turn, no second suspension
	s.term(20 * time.Second)
	s = ptStart(t, data)
	for _, surface := range []string{"rest", "oh", "resp"} {
		session := "rt-" + surface
		var code int
		var raw []byte
		switch surface {
		case "rest":
			code, raw = s.mustReq("POST", "/v1/sessions/"+session+"/messages",
				map[string]any{"content": "please refund order 7", "message_id": "m-" + session})
		case "oh":
			code, raw = s.mustReq("POST", "/v1/openharness", map[string]any{"protocol_version": "1.0.0",
				"request_id": "r-" + session, "request": map[string]any{"context": map[string]any{
					"session_id": session, "user_intent": "please refund order 7"}}})
		case "resp":
			code, raw = s.mustReq("POST", "/v1/responses", map[string]any{"model": "demo",
				"input": "please refund order 7"}, "X-Armature-Session-Id", session, "Idempotency-Key", "k-"+session)
		}
		t.Logf("%s original retransmitted after approval+restart: %d %.300s", surface, code, raw)
		if code >= 500 {
			t.Errorf("%s: %d %s", surface, code, raw)
		}
		h := s.history(session)
		if n := countSub(h, "user", "refund order 7"); n != 1 {
			t.Errorf("%s: retransmission after the approval ran a new turn: %d user messages: %+v", surface, n, h)
		}
		if n := countSub(h, "tool", "refunded $30.00"); n != 1 {
			t.Errorf("%s: %d refunds", surface, n)
		}
	}
	s.term(20 * time.Second)
}
