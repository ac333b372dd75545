package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// The end-to-end tests run the real armature binary, built once per test
// run, on a free loopback port with a temporary data directory, and talk
// to it over HTTP only.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// armatureBinary builds the command once.
func armatureBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "armature-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "armature")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/armature-go/armature/cmd/armature").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// e2eServer is a running armature serve process.
type e2eServer struct {
	t     *testing.T
	cmd   *exec.Cmd
	base  string
	data  string
	token string
	logs  *bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts armature serve on data with extra args.
func startServer(t *testing.T, data string, args ...string) *e2eServer {
	t.Helper()
	return startServerEnv(t, data, nil, args...)
}

// startServerEnv is startServer with extra environment variables.
func startServerEnv(t *testing.T, data string, env []string, args ...string) *e2eServer {
	t.Helper()
	addr := freeAddr(t)
	s := &e2eServer{t: t, data: data, base: "http://" + addr, logs: &bytes.Buffer{}}
	s.cmd = exec.Command(armatureBinary(t), append([]string{"serve", "--addr", addr, "--data", data}, args...)...)
	s.cmd.Env = append(append(os.Environ(), "ARMATURE_WORKSPACE=", "ARMATURE_TOKENS=", "OTEL_EXPORTER_OTLP_ENDPOINT=",
		"LANGFUSE_PUBLIC_KEY=", "LANGFUSE_SECRET_KEY="), env...)
	s.cmd.Stderr = s.logs
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "serving on") {
		t.Fatalf("server did not start: %q, %v\n%s", line, err, s.logs)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return s
}

// stop shuts the server down gracefully (SIGTERM) and waits.
func (s *e2eServer) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			s.t.Errorf("server exited with %v\n%s", err, s.logs)
		}
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Errorf("server did not shut down\n%s", s.logs)
	}
}

// do sends a request and decodes a JSON response into out (when non-nil).
func (s *e2eServer) do(method, path string, body any, out any) int {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

type e2eOutcome struct {
	Outcome         string            `json:"outcome"`
	InvocationID    string            `json:"invocation_id"`
	Replayed        bool              `json:"replayed"`
	Replies         []json.RawMessage `json:"replies"`
	PendingMessages []json.RawMessage `json:"pending_messages"`
	Signal          *struct {
		SignalID string `json:"signal_id"`
	} `json:"signal"`
	Error *struct {
		Bucket   string `json:"bucket"`
		Category string `json:"category"`
	} `json:"error"`
}

func text(raw json.RawMessage) string {
	var m struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Content
}

type e2eSession struct {
	Version  int64             `json:"version"`
	Messages []json.RawMessage `json:"messages"`
}

func TestE2EChatRESTSuspendRestartResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	s := startServer(t, data)
	var out e2eOutcome
	if code := s.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "where is order 7?"}, &out); code != 200 || out.Outcome != "completed" {
		t.Fatalf("send: %d %+v", code, out)
	}
	if got := text(out.Replies[len(out.Replies)-1]); !strings.Contains(got, "order 7: shipped") {
		t.Fatalf("reply %q", got)
	}
	s.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "refund order 7"}, &out)
	if out.Outcome != "suspended" || out.Signal == nil {
		t.Fatalf("refund: %+v", out)
	}
	signalID := out.Signal.SignalID

	// Restart: history and the paused turn survive, and the approval
	// resumes the turn on the new process.
	s.stop()
	s = startServer(t, data)
	var sess e2eSession
	if code := s.do("GET", "/v1/sessions/s1", nil, &sess); code != 200 || len(sess.Messages) != 7 {
		t.Fatalf("history after restart: %d, %d messages", code, len(sess.Messages))
	}
	if code := s.do("POST", "/v1/sessions/s1/signals", map[string]any{"signal_id": signalID,
		"payload": map[string]any{"approval": map[string]any{"approved": true}}}, &out); code != 200 || out.Outcome != "completed" {
		t.Fatalf("resume after restart: %d %+v", code, out)
	}
	if got := text(out.Replies[0]); got != "refunded $30.00 for order 7" {
		t.Fatalf("resumed tool result %q", got)
	}
	// The signal is spent.
	s.do("POST", "/v1/sessions/s1/signals", map[string]any{"signal_id": signalID, "payload": map[string]any{}}, &out)
	if out.Outcome != "errored" || out.Error.Category != "harness_signal_correlation_failed" {
		t.Fatalf("second resume: %+v", out)
	}

	// Idempotent retransmit: one turn.
	s.do("GET", "/v1/sessions/s1", nil, &sess)
	before := len(sess.Messages)
	for range 2 {
		s.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "hello", "message_id": "m-1"}, &out)
	}
	s.do("GET", "/v1/sessions/s1", nil, &sess)
	if len(sess.Messages) != before+2 {
		t.Fatalf("retransmitted message ran %d messages' worth of turns", len(sess.Messages)-before)
	}
}

func TestE2EBadInputStoresNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const token = "e2e-secret-token-000001"
	s := startServer(t, t.TempDir(), "--tokens", token+":acme")
	type errBody struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	big := `{"content":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, method, path, body, token string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/sessions/s1/messages", `{"content":"hi"}`, "", 401, "unauthorized"},
		{"bad token", "POST", "/v1/sessions/s1/messages", `{"content":"hi"}`, "wrong-token-wrong-token", 401, "unauthorized"},
		{"malformed json", "POST", "/v1/sessions/s1/messages", `{"content":`, token, 400, "invalid_request"},
		{"oversized", "POST", "/v1/sessions/s1/messages", big, token, 413, "body_too_large"},
		{"bad session id", "POST", "/v1/sessions/a%2Fb/messages", `{"content":"hi"}`, token, 400, "invalid_request"},
		{"unknown route", "GET", "/v1/nope", "", token, 404, "not_found"},
		{"a tool message", "POST", "/v1/sessions/s1/messages", `{"message":{"role":"tool","content":"x"}}`, token, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.token = tc.token
			var e errBody
			if code := s.do(tc.method, tc.path, tc.body, &e); code != tc.status || e.Error.Code != tc.code {
				t.Fatalf("%d %q, want %d %q", code, e.Error.Code, tc.status, tc.code)
			}
		})
	}
	// An invalid message is a user-correctable outcome, not stored.
	s.token = token
	var out e2eOutcome
	s.do("POST", "/v1/sessions/s1/messages", `{"message":{"role":"user","content":""}}`, &out)
	if out.Outcome != "errored" || out.Error.Category != "chat_message_shape_invalid" || out.Error.Bucket != "user_correctable" {
		t.Fatalf("invalid message: %+v", out)
	}
	var list struct {
		Sessions []any `json:"sessions"`
	}
	if s.do("GET", "/v1/sessions", nil, &list); len(list.Sessions) != 0 {
		t.Fatalf("bad requests stored sessions: %+v", list)
	}
	// Health and metrics need no token.
	s.token = ""
	if code := s.do("GET", "/healthz", nil, nil); code != 200 {
		t.Fatalf("healthz %d", code)
	}
}

func TestE2ETenantsAreIsolated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const a, b = "tenant-a-secret-00001", "tenant-b-secret-00001"
	s := startServer(t, t.TempDir(), "--tokens", a+":acme,"+b+":globex")
	s.token = a
	var out e2eOutcome
	s.do("POST", "/v1/sessions/shared/messages", map[string]string{"content": "refund order 9"}, &out)
	if out.Outcome != "suspended" {
		t.Fatalf("%+v", out)
	}
	s.token = b
	var sess e2eSession
	if code := s.do("GET", "/v1/sessions/shared", nil, &sess); code != 404 {
		t.Fatalf("tenant B read tenant A's session: %d", code)
	}
	s.do("POST", "/v1/sessions/shared/signals", map[string]any{"signal_id": out.Signal.SignalID, "payload": map[string]any{"approval": map[string]any{"approved": true}}}, &out)
	if out.Outcome != "errored" {
		t.Fatalf("tenant B resumed tenant A's turn: %+v", out)
	}
	var list struct {
		Sessions []any `json:"sessions"`
	}
	if s.do("GET", "/v1/sessions", nil, &list); len(list.Sessions) != 0 {
		t.Fatalf("tenant B lists %+v", list)
	}
}

// TestE2ELangfuseExport: with the Langfuse keys set, a turn becomes a
// Langfuse trace named after the agent, sent to the ingestion API with
// the keys (a fake one here) and flushed at shutdown.
func TestE2ELangfuseExport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	lf := langfusetest.NewServer()
	defer lf.Close()
	s := startServerEnv(t, t.TempDir(), []string{"LANGFUSE_PUBLIC_KEY=" + langfusetest.PublicKey,
		"LANGFUSE_SECRET_KEY=" + langfusetest.SecretKey, "LANGFUSE_HOST=" + lf.URL})
	var out e2eOutcome
	s.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "where is order 1?"}, &out)
	if out.Outcome != "completed" {
		t.Fatalf("%+v", out)
	}
	s.stop() // flushes the export
	if p := lf.Problems(); len(p) > 0 {
		t.Fatalf("ingestion API problems: %v", p)
	}
	traces := lf.Traces()
	if len(traces) != 1 {
		t.Fatalf("%d traces", len(traces))
	}
	tr := traces[0]
	sid, _ := tr.Fields["sessionId"].(string)
	if tr.ID != langfuse.TraceID(out.InvocationID) || !strings.HasSuffix(sid, "s1") || tr.Fields["name"] != "demo" {
		t.Errorf("trace %s fields %v (invocation %s)", tr.ID, tr.Fields, out.InvocationID)
	}
	gens := 0
	langfusetest.Walk(tr.Observations, func(o *langfusetest.Observation) {
		if o.Type == "generation" {
			gens++
			if _, leaked := o.Fields["input"]; leaked {
				t.Error("the generation carries the model input (payload is off by default)")
			}
		}
	})
	if len(tr.Observations) == 0 || gens == 0 {
		t.Errorf("observations %d, generations %d", len(tr.Observations), gens)
	}
	if strings.Contains(s.logs.String(), langfusetest.SecretKey) {
		t.Error("the secret key is in the logs")
	}
}

func httptestServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// sseFrames reads server-sent events from the session's stream into a
// channel of "type|data" strings until the stream closes.
func sseFrames(t *testing.T, s *e2eServer, session string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/v1/sessions/"+session+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	out := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var typ string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				out <- typ + "|" + line[6:]
			}
		}
	}()
	return out
}

// waitFrame waits for a frame whose text contains all of want.
func waitFrame(t *testing.T, frames <-chan string, want ...string) string {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("stream closed before %q", want)
			}
			match := true
			for _, w := range want {
				match = match && strings.Contains(f, w)
			}
			if match {
				return f
			}
		case <-deadline:
			t.Fatalf("no frame with %q", want)
		}
	}
}

// TestE2EThreeSurfaces: a session driven through the OpenHarness
// endpoint, the OpenAI-compatible endpoint and the chat REST API, watched
// on the SSE stream; a turn suspended through OpenHarness is approved
// through the REST API and its resumed reply arrives on the stream; run
// records survive a restart.
func TestE2EThreeSurfaces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	s := startServer(t, data)
	frames := sseFrames(t, s, "multi")

	// OpenHarness: a refund suspends with a request_approval directive.
	var oh struct {
		Response struct {
			Status           string `json:"status"`
			ActionDirectives []struct {
				ActionType string `json:"action_type"`
				Payload    struct {
					SignalID string `json:"signal_id"`
				} `json:"payload"`
			} `json:"action_directives"`
		} `json:"response"`
	}
	code := s.do("POST", "/v1/openharness", map[string]any{"protocol_version": "1.0.0", "request_id": "r-1",
		"request": map[string]any{"context": map[string]any{"session_id": "multi", "user_intent": "refund order 12"}}}, &oh)
	if code != 200 || oh.Response.Status != "success" {
		t.Fatalf("openharness: %d %+v", code, oh)
	}
	var signal string
	for _, d := range oh.Response.ActionDirectives {
		if d.ActionType == "request_approval" {
			signal = d.Payload.SignalID
		}
	}
	if signal == "" {
		t.Fatalf("no request_approval directive: %+v", oh)
	}
	waitFrame(t, frames, "runtime.approval.requested|")

	// Approve through the REST API: the resumed reply reaches the stream.
	var out e2eOutcome
	s.do("POST", "/v1/sessions/multi/signals", map[string]any{"signal_id": signal,
		"payload": map[string]any{"approval": map[string]any{"approved": true}}}, &out)
	if out.Outcome != "completed" {
		t.Fatalf("signal: %+v", out)
	}
	waitFrame(t, frames, "runtime.request.completed|", "parentRequestId", "refunded $30.00 for order 12")

	// The OpenAI-compatible endpoint, streaming, on the same session.
	body, _ := json.Marshal(map[string]any{"model": "demo", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "where is order 12?"}}})
	req, _ := http.NewRequest("POST", s.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("X-Armature-Session-Id", "multi")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "chat.completion.chunk") ||
		!strings.Contains(string(raw), "event: stable_harness.tool.progress") || !strings.Contains(string(raw), "data: [DONE]") {
		t.Fatalf("openai stream: %d\n%s", resp.StatusCode, raw)
	}
	waitFrame(t, frames, "agent.output.delta")
	waitFrame(t, frames, "runtime.request.completed|", "order 12: shipped")

	// Restart: the session's run records are intact.
	var runs struct {
		Runs []struct {
			Status   string `json:"status"`
			ParentID string `json:"parentRequestId"`
		} `json:"runs"`
	}
	s.do("GET", "/v1/sessions/multi/runs", nil, &runs)
	before := len(runs.Runs)
	s.stop()
	s = startServer(t, data)
	s.do("GET", "/v1/sessions/multi/runs", nil, &runs)
	if len(runs.Runs) != before || before != 3 {
		t.Fatalf("runs after restart: %d, before %d", len(runs.Runs), before)
	}
	statuses := map[string]int{}
	parents := 0
	for _, r := range runs.Runs {
		statuses[r.Status]++
		if r.ParentID != "" {
			parents++
		}
	}
	if statuses["completed"] != 2 || statuses["suspended"] != 1 || parents != 1 {
		t.Fatalf("runs: %+v", runs.Runs)
	}
}

// TestE2EOpenHarnessProtocol: over HTTP only, a retransmitted request_id
// runs one turn, a wrong major version and a non-JSON body get the
// documented errors with nothing stored, and unknown fields are ignored.
func TestE2EOpenHarnessProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	s := startServer(t, t.TempDir())
	type ohResp struct {
		RequestID string `json:"request_id"`
		Response  struct {
			Status string `json:"status"`
			Error  *struct {
				Code      string `json:"code"`
				Retryable bool   `json:"retryable"`
			} `json:"error"`
		} `json:"response"`
		SupportedProtocolVersions []string `json:"supported_protocol_versions"`
	}
	req := func(version, id, text string, extra map[string]any) map[string]any {
		ctx := map[string]any{"session_id": "oh", "user_intent": text}
		body := map[string]any{"protocol_version": version, "request_id": id, "request": map[string]any{"context": ctx}}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	var first, again ohResp
	s.do("POST", "/v1/openharness", req("1.0.0", "same-id", "where is order 5?", map[string]any{"x_unknown": map[string]any{"deep": true}}), &first)
	s.do("POST", "/v1/openharness", req("1.0.0", "same-id", "where is order 5?", nil), &again)
	if first.Response.Status != "success" || again.Response.Status != "success" || again.RequestID != "same-id" {
		t.Fatalf("retransmit: %+v / %+v", first, again)
	}
	var sess e2eSession
	if s.do("GET", "/v1/sessions/oh", nil, &sess); len(sess.Messages) != 4 {
		t.Fatalf("a retransmitted request_id ran %d messages' worth of turns, want one turn (4 messages)", len(sess.Messages))
	}
	var bad ohResp
	if code := s.do("POST", "/v1/openharness", req("2.0.0", "v2", "hi", nil), &bad); code != 200 ||
		bad.Response.Status != "error" || bad.Response.Error.Code != "protocol_version_unsupported" || bad.Response.Error.Retryable ||
		len(bad.SupportedProtocolVersions) == 0 {
		t.Fatalf("wrong version: %d %+v", code, bad)
	}
	if code := s.do("POST", "/v1/openharness", `not json`, nil); code != 400 {
		t.Fatalf("non-JSON body: %d", code)
	}
	if s.do("GET", "/v1/sessions/oh", nil, &sess); len(sess.Messages) != 4 {
		t.Fatalf("rejected requests stored messages: %d", len(sess.Messages))
	}
}
