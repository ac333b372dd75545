package cli

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

func TestParseTokens(t *testing.T) {
	got, err := parseTokens(" s3cret-token-0001:acme , other-secret-0002:globex")
	if err != nil || len(got) != 2 || got[0].Tenant != "acme" || got[1].Secret != "other-secret-0002" {
		t.Fatalf("parseTokens = %+v, %v", got, err)
	}
	for _, bad := range []string{"nocolon", ":tenant", "secret:"} {
		if _, err := parseTokens(bad); err == nil {
			t.Errorf("parseTokens(%q) succeeded", bad)
		}
	}
}

func TestWorkspace(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "ws.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ws, err := loadWorkspace("")
	if err != nil || len(ws.Agents) != 1 || ws.Agents[0].Provider != "demo" {
		t.Fatalf("default workspace = %+v, %v", ws, err)
	}
	ws, err = loadWorkspace(write(`
default_agent: support
task_hints: {refunds: support}
agents:
  - id: support
    provider: demo
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
    window: {max_messages: 40, max_tokens: 8000}
    compaction: {prompt: Summarize tersely.}
`))
	if err != nil {
		t.Fatal(err)
	}
	if w, c := ws.Agents[0].Window, ws.Agents[0].Compaction; w.MaxMessages != 40 || w.MaxTokens != 8000 || c == nil || c.Prompt != "Summarize tersely." {
		t.Errorf("window = %+v, compaction %+v", w, c)
	}
	a, err := ws.Agents[0].build(t.Context(), nil)
	if err != nil || a == nil {
		t.Fatalf("build = %v", err)
	}
	bounded, err := loadWorkspace(write("agents: [{id: x, tool_timeout: 30s, max_tool_result_bytes: 64KiB}]"))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := bounded.Agents[0].build(t.Context(), nil); err != nil || a == nil {
		t.Fatalf("build with tool bounds = %v", err)
	}
	for _, tc := range []struct{ body, want string }{
		{"agents: []", "no agents"},
		{"agents: [{id: x, provider: nope}]", "unknown provider"},
		{"agents: [{id: x, tools: [rm_rf]}]", "unknown tool"},
		{"agents: [{id: x, tools: [lookup_order], approval: [issue_refund]}]", "not among the agent's tools"},
		{"agents: {", "workspace"},
		{"agents: [{id: x, window: {max_tokens: -1}}]", "Window bounds must not be negative"},
		{"agents: [{id: x, compaction: {}}]", "Compaction needs a Window bound"},
		{"agents: [{id: x, provider: openai, timeout: soon}]", "a positive duration"},
		{"agents: [{id: x, provider: openai, timeout: -1s}]", "a positive duration"},
		{"agents: [{id: x, timeout: 5s}]", "the demo model makes no call"},
		{"agents: [{id: x, provider: openai, max_response_bytes: lots}]", "a positive size"},
		{"agents: [{id: x, provider: openai, max_response_bytes: 0}]", "a positive size"},
		{"agents: [{id: x, provider: openai, max_response_bytes: -1}]", "a positive size"},
		{"agents: [{id: x, max_response_bytes: 1MiB}]", "the demo model makes no call"},
		{"agents: [{id: x, tool_timeout: soon}]", "tool_timeout \"soon\": a positive duration"},
		{"agents: [{id: x, tool_timeout: 0s}]", "tool_timeout \"0s\": a positive duration"},
		{"agents: [{id: x, max_tool_result_bytes: lots}]", "max_tool_result_bytes \"lots\": a positive size"},
		{"agents: [{id: x, max_tool_result_bytes: 8GiB}]", "max_tool_result_bytes \"8GiB\": a positive size"},
		{"agents: [{id: x, extras: {user: me}}]", "extras: the demo model sends no request"},
		{"agents: [{id: x, provider: openai, model: m, extras: {model: other}}]", `extras key "model" conflicts`},
		{"agents: [{id: x, provider: openai, model: m, extras: {stream: true}}]", `extras key "stream" conflicts`},
		{"agents: [{id: x, provider: openai, model: m, extras: {stream: false}}]", `extras key "stream" conflicts`},
		{"agents: [{id: x, provider: openai, model: m, max_tokens: 10, extras: {max_tokens: 20}}]", `extras key "max_tokens" conflicts`},
		{"agents: [{id: x, provider: openai, model: m, tools: [lookup_order], extras: {tools: []}}]", `extras key "tools" conflicts`},
		{"agents: [{id: x, provider: anthropic, model: m, extras: {messages: []}}]", `extras key "messages" conflicts`},
		{"agents: [{id: x, provider: anthropic, model: m, extras: {stream: false}}]", `extras key "stream" conflicts`},
		{"agents: [{id: x, provider: gemini, model: m, max_tokens: 10, extras: {maxOutputTokens: 20}}]", `extras key "maxOutputTokens" conflicts`},
		{"agents: [{id: x, provider: openai, model: m, extras: {n: .nan}}]", `extras: "n" is not a JSON value`},
	} {
		ws, err := loadWorkspace(write(tc.body))
		if err == nil {
			_, err = ws.Agents[0].build(t.Context(), nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1073741824", 1 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1GiB", 1 << 30, true},
		{" 64 KB ", 64 << 10, true},
		{"2GB", 2 << 30, true},
		{"0", 0, true},
		{"10B", 10, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5GiB", 0, false},
		{"lots", 0, false},
		{"9223372036854775807GiB", 0, false},
	}
	for _, tc := range tests {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestServeRetentionFlags(t *testing.T) {
	t.Setenv("ARMATURE_RUN_MAX_BYTES", "2GiB")
	t.Setenv("ARMATURE_SESSION_CACHE_BYTES", "")
	c, err := parseServe([]string{"--run-retention", "72h", "--session-cache-bytes", "64MiB"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.runRetention != 72*time.Hour || c.runMaxBytes != 2<<30 || c.cacheBytes != 64<<20 {
		t.Fatalf("retention %v, run cap %d, cache %d", c.runRetention, c.runMaxBytes, c.cacheBytes)
	}
	if _, err := parseServe([]string{"--run-max-bytes", "a lot"}, io.Discard); err == nil {
		t.Fatal("an invalid size was accepted")
	}
}

// TestServeSessionWaitFlag: --session-wait (ARMATURE_SESSION_WAIT)
// defaults to server.DefaultSessionWait; 0 is no bound.
func TestServeSessionWaitFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want time.Duration
	}{
		{nil, "", server.DefaultSessionWait},
		{[]string{"--session-wait", "30s"}, "", 30 * time.Second},
		{nil, "45s", 45 * time.Second},
		{[]string{"--session-wait", "0"}, "", 0},
	} {
		t.Setenv("ARMATURE_SESSION_WAIT", tc.env)
		c, err := parseServe(tc.args, io.Discard)
		if err != nil || c.sessionWait != tc.want {
			t.Errorf("parseServe(%q) with ARMATURE_SESSION_WAIT=%q: %v, %v; want %v", tc.args, tc.env, c.sessionWait, err, tc.want)
		}
	}
}

// TestServeStreamKeepAliveFlag: --stream-keepalive
// (ARMATURE_STREAM_KEEPALIVE) defaults to server.DefaultStreamKeepAlive;
// 0 is none; a negative one is refused.
func TestServeStreamKeepAliveFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want time.Duration
	}{
		{nil, "", server.DefaultStreamKeepAlive},
		{[]string{"--stream-keepalive", "5s"}, "", 5 * time.Second},
		{nil, "20s", 20 * time.Second},
		{[]string{"--stream-keepalive", "0"}, "", 0},
	} {
		t.Setenv("ARMATURE_STREAM_KEEPALIVE", tc.env)
		c, err := parseServe(tc.args, io.Discard)
		if err != nil || c.keepAlive != tc.want {
			t.Errorf("parseServe(%q) with ARMATURE_STREAM_KEEPALIVE=%q: %v, %v; want %v", tc.args, tc.env, c.keepAlive, err, tc.want)
		}
	}
	t.Setenv("ARMATURE_STREAM_KEEPALIVE", "")
	if _, err := parseServe([]string{"--stream-keepalive", "-1s"}, io.Discard); err == nil {
		t.Error("a negative --stream-keepalive was accepted")
	}
}

func TestWorkspacePrompts(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts", "support.yaml"), []byte(
		"labels: {production: '1'}\nversions: [{version: '1', template: 'You help {{ team }}.'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(body string) *workspace {
		p := filepath.Join(dir, "ws.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ws, err := loadWorkspace(p)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	ws := write(`
prompts: {dir: prompts, cache_ttl: 30s, labels: {default: production}}
agents:
  - id: support
    provider: demo
    system_prompt: {name: support, variables: {team: billing}}
`)
	m, err := ws.promptManager(nil)
	if err != nil || m == nil {
		t.Fatalf("manager: %v", err)
	}
	if res, err := m.Get(t.Context(), "support", "", map[string]any{"team": "x"}, prompt.FetchOptions{}, prompt.RenderOptions{}); err != nil || res.Version != "1" {
		t.Fatalf("get: %+v %v", res, err)
	}
	if a, err := ws.Agents[0].build(t.Context(), m); err != nil || a == nil {
		t.Fatalf("build: %v", err)
	}
	if _, err := ws.Agents[0].build(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "prompts section") {
		t.Fatalf("system_prompt without prompts: %v", err)
	}
	for body, want := range map[string]string{
		"prompts: {dir: nowhere}\nagents: [{id: x}]":                  "not a directory",
		"prompts: {dir: prompts, cache_ttl: soon}\nagents: [{id: x}]": "cache_ttl",
		"prompts: {}\nagents: [{id: x}]":                              "declare a dir or langfuse",
		"prompts: {langfuse: {base_url: 'nope'}}\nagents: [{id: x}]":  "langfuse",
		"prompts: {dir: prompts, cache_ttl: -1s}\nagents: [{id: x}]":  "cache_ttl",
	} {
		if _, err := write(body).promptManager(nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// TestServeDurabilityFlag: --durability and ARMATURE_DURABILITY choose
// the SQLite store's level, full by default; a bad value is an error
// naming what is accepted.
func TestServeDurabilityFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string
		args    []string
		want    sqlite.Durability
		wantErr string
	}{
		{name: "default", want: sqlite.DurabilityFull},
		{name: "flag normal", args: []string{"--durability", "normal"}, want: sqlite.DurabilityNormal},
		{name: "flag full", args: []string{"--durability=full"}, want: sqlite.DurabilityFull},
		{name: "env normal", env: "normal", want: sqlite.DurabilityNormal},
		{name: "flag over env", env: "normal", args: []string{"--durability", "full"}, want: sqlite.DurabilityFull},
		{name: "bad flag", args: []string{"--durability", "fast"}, wantErr: `durability "fast": want full or normal`},
		{name: "bad env", env: "off", wantErr: `ARMATURE_DURABILITY: sqlite: invalid config: durability "off": want full or normal`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ARMATURE_DURABILITY", tc.env)
			c, err := parseServe(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseServe(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.durability != tc.want {
				t.Errorf("durability = %v, want %v", c.durability, tc.want)
			}
		})
	}
}

// TestServeKeepRunsFlag: --keep-runs-on-delete and
// ARMATURE_KEEP_RUNS_ON_DELETE keep a deleted session's run records; a
// value that is not a boolean is an error, not a silent "delete them".
func TestServeKeepRunsFlag(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      bool
		wantErr   string
	}{
		{name: "default"},
		{name: "flag", args: []string{"--keep-runs-on-delete"}, want: true},
		{name: "env", env: "true", want: true},
		{name: "env false", env: "false"},
		{name: "flag over env", env: "true", args: []string{"--keep-runs-on-delete=false"}},
		{name: "bad env", env: "yes", wantErr: `ARMATURE_KEEP_RUNS_ON_DELETE must be true or false, not "yes"`},
		{name: "bad flag", args: []string{"--keep-runs-on-delete=garbage"}, wantErr: "invalid boolean value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ARMATURE_KEEP_RUNS_ON_DELETE", tc.env)
			c, err := parseServe(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseServe(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.keepRuns != tc.want {
				t.Errorf("keepRuns = %v, want %v", c.keepRuns, tc.want)
			}
		})
	}
}

// TestWorkspaceTimeout: an agent's timeout bounds its model calls: a
// turn on an upstream that never answers fails at the timeout, in the
// retryable bucket, instead of holding the session for the provider's
// default ten minutes.
func TestWorkspaceTimeout(t *testing.T) {
	done := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(done) }) // runs first: no handler outlives the test
	a := workspaceAgent(t, "agents: [{id: x, provider: openai, model: m, base_url: "+hung.URL+", timeout: 300ms}]")
	h := servertest.Harness(t, servertest.SQLite(t), a)
	start := time.Now()
	out, _ := h.Send(t.Context(), "s", llm.UserText("hi"))
	e, ok := out.(*chat.Errored)
	if !ok || e.Bucket != harness.RetryableTransient || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %#v", time.Since(start), out)
	}
}

// TestWorkspaceMaxResponseBytes: an agent's max_response_bytes bounds
// what its model calls read of a reply: a reply over it fails the turn
// as provider_invalid_response, one the provider's default admits
// completes.
func TestWorkspaceMaxResponseBytes(t *testing.T) {
	reply := strings.Repeat("H", 256<<10)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+reply+`"}}]}`+"\n\n"+
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"`+reply+`"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(upstream.Close)
	for _, tc := range []struct {
		name, setting string
		want          errcat.Category
	}{
		{"bounded", ", max_response_bytes: 64KiB", errcat.ProviderInvalidResponse},
		{"default", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := workspaceAgent(t, "agents: [{id: x, provider: openai, model: m, base_url: "+upstream.URL+tc.setting+"}]")
			h := servertest.Harness(t, servertest.SQLite(t), a)
			out, err := h.Send(t.Context(), "s", llm.UserText("hi"))
			if tc.want == "" {
				if _, ok := out.(*chat.Completed); !ok || err != nil {
					t.Fatalf("%#v, %v; want a completed turn", out, err)
				}
				return
			}
			if e, ok := out.(*chat.Errored); !ok || e.Category != tc.want || !errors.Is(err, llm.ErrResponseTooLarge) {
				t.Fatalf("%#v, %v; want an errored turn in %s", out, err, tc.want)
			}
		})
	}
}

// TestServeEmptyAddr: an empty --addr (an unset variable in a unit file:
// --addr=$LISTEN) is refused. Before, the server's check took it for the
// loopback default (no tokens needed) while the listener served every
// interface without authentication.
func TestServeEmptyAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--addr", ""}, ""},
		{"flag of spaces", []string{"--addr= "}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ARMATURE_ADDR", tc.env)
			if _, err := parseServe(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), "--addr") {
				t.Fatalf("parseServe(%q) = %v, want an error naming --addr", tc.args, err)
			}
		})
	}
	t.Setenv("ARMATURE_ADDR", "")
	if c, err := parseServe(nil, io.Discard); err != nil || c.addr != "127.0.0.1:8080" {
		t.Fatalf("the default: %q, %v", c.addr, err)
	}
}

// TestServeMalformedEnv: an environment variable that gives a flag its
// default is refused when malformed, as the flag's value is, naming the
// variable; before, it was replaced by the default without a word
// (ARMATURE_RUN_RETENTION=90d kept 30 days, ARMATURE_RUN_MAX_BYTES=10G
// 1 GiB).
func TestServeMalformedEnv(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"ARMATURE_RUN_RETENTION", "90d"},
		{"ARMATURE_RUN_MAX_BYTES", "10G"},
		{"ARMATURE_SESSION_CACHE_BYTES", "lots"},
		{"ARMATURE_RECONCILE_INTERVAL", "15"},
		{"ARMATURE_DRAIN_DELAY", "soon"},
		{"ARMATURE_MAX_TURNS", "many"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			if _, err := parseServe(nil, io.Discard); err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("%s=%q: parseServe = %v, want an error naming the variable", tc.key, tc.value, err)
			}
		})
	}
	t.Setenv("ARMATURE_RUN_RETENTION", "2160h")
	if c, err := parseServe(nil, io.Discard); err != nil || c.runRetention != 2160*time.Hour {
		t.Fatalf("a well-formed variable: %v, %v", c.runRetention, err)
	}
}

// TestServeRefusesMeaninglessFlags: a log format other than text or json,
// and a negative duration or limit, are refused at startup. Before,
// --log yaml logged text, and negative values were read as zero or the
// default.
func TestServeRefusesMeaninglessFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--log", "yaml"},
		{"--grace", "-1s"},
		{"--drain-delay", "-5s"},
		{"--run-retention", "-1h"},
		{"--max-turns", "-3"},
		{"--max-queued-turns-per-tenant", "-1"},
		{"--session-wait", "-1m"},
	} {
		if _, err := parseServe(args, io.Discard); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("parseServe(%q) = %v, want an error naming the flag", args, err)
		}
	}
	t.Setenv("ARMATURE_LOG", "xml")
	if _, err := parseServe(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "ARMATURE_LOG") {
		t.Errorf("ARMATURE_LOG=xml: %v", err)
	}
}

// TestServeMaxConns: --max-conns (ARMATURE_MAX_CONNS) reaches the
// server's connection cap: 0 the default, negative no cap.
func TestServeMaxConns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want int
	}{
		{nil, "", 0},
		{[]string{"--max-conns", "5"}, "", 5},
		{[]string{"--max-conns", "-1"}, "", -1},
		{nil, "200", 200},
		{[]string{"--max-conns", "7"}, "200", 7},
	} {
		t.Setenv("ARMATURE_MAX_CONNS", tc.env)
		c, err := parseServe(tc.args, io.Discard)
		if err != nil || c.limits.conns != tc.want {
			t.Errorf("parseServe(%q) with ARMATURE_MAX_CONNS=%q: conns %d, %v; want %d", tc.args, tc.env, c.limits.conns, err, tc.want)
		}
	}
}

// TestWorkspaceExtras: an agent's extras go with each of its model
// requests, as written: with Anthropic's extended thinking on, a tool
// turn's reasoning goes back to the model (which refuses the request
// otherwise), on a native agent as through an adapter's bridge; the
// same extras on an adapter's agent are checked at startup as a native
// agent's.
func TestWorkspaceExtras(t *testing.T) {
	srv, requests := adaptertest.AnthropicThinkingUpstream(t, "lookup_order", `{"order":"7"}`, "Order 7 ships Thursday.")
	a := workspaceAgent(t, "agents: [{id: x, provider: anthropic, model: claude-test, base_url: "+srv.URL+
		", max_tokens: 4096, tools: [lookup_order], extras: {thinking: {type: enabled, budget_tokens: 2048}}}]")
	adaptertest.ThinkingToolTurn(t, servertest.Harness(t, servertest.SQLite(t), a), requests)
	for i, r := range requests() {
		if !strings.Contains(r, `"thinking":{"budget_tokens":2048,"type":"enabled"}`) {
			t.Fatalf("request %d lacks the extras: %s", i, r)
		}
	}
	for _, backend := range []string{"adk", "eino"} {
		spec := agentSpec{ID: "x", Backend: backend, Provider: "openai", Model: "m", Extras: map[string]any{"model": "other"}}
		if _, err := spec.adapterAgent(); err == nil || !strings.Contains(err.Error(), `extras key "model" conflicts`) {
			t.Errorf("%s agent: %v", backend, err)
		}
	}
}

// workspaceAgent is the native agent of the workspace file body's first
// agent, as armature serve builds it.
func workspaceAgent(t *testing.T, body string) *agent.Agent {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ws.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWorkspace(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ws.Agents[0].build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
