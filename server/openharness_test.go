package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// ohRefDir is the OpenHarness reference (schema and golden examples):
// $ARMATURE_OPENHARNESS_DIR, else shared/reference/openharness beside the
// repository. Outside CI the tests skip when it is missing.
func ohRefDir(t testing.TB) string {
	t.Helper()
	dir := ohRefPath()
	if _, err := os.Stat(filepath.Join(dir, "schema", "openharness-v1.draft.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the OpenHarness reference is missing at %s (set ARMATURE_OPENHARNESS_DIR): %v", dir, err)
		}
		t.Skipf("the OpenHarness reference is missing at %s (set ARMATURE_OPENHARNESS_DIR)", dir)
	}
	return dir
}

func ohRefPath() string {
	if dir := os.Getenv("ARMATURE_OPENHARNESS_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "shared", "reference", "openharness")
}

var (
	ohSchemaOnce sync.Once
	ohSchemas    map[string]*jsonschema.Schema
	ohSchemaErr  error
)

// ohSchema returns the compiled schema: "" for the whole message schema,
// or a $defs name ("requestMessage", "responseMessage").
func ohSchema(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	dir := ohRefDir(t)
	ohSchemaOnce.Do(func() {
		raw, err := os.ReadFile(filepath.Join(dir, "schema", "openharness-v1.draft.json"))
		if err != nil {
			ohSchemaErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			ohSchemaErr = err
			return
		}
		const url = "https://openharness.dev/schema/openharness-v1.draft.json"
		c := jsonschema.NewCompiler()
		if ohSchemaErr = c.AddResource(url, doc); ohSchemaErr != nil {
			return
		}
		ohSchemas = map[string]*jsonschema.Schema{}
		for _, d := range []string{"", "requestMessage", "responseMessage"} {
			loc := url
			if d != "" {
				loc += "#/$defs/" + d
			}
			if ohSchemas[d], ohSchemaErr = c.Compile(loc); ohSchemaErr != nil {
				return
			}
		}
	})
	if ohSchemaErr != nil {
		t.Fatalf("compiling the OpenHarness schema: %v", ohSchemaErr)
	}
	return ohSchemas[def]
}

// ohValidate checks raw against the schema (def as in ohSchema).
func ohValidate(t testing.TB, def string, raw []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	if err := ohSchema(t, "").Validate(inst); err != nil {
		t.Fatalf("the message does not validate against the OpenHarness schema: %v\n%s", err, raw)
	}
	if def != "" {
		if err := ohSchema(t, def).Validate(inst); err != nil {
			t.Fatalf("the message is not a valid %s: %v\n%s", def, err, raw)
		}
	}
}

// ohEnv is a server over the real demo agent with an SQLite store, built
// like cmd/armature's serve.
type ohEnv struct {
	srv   *Server
	h     http.Handler
	token string // bearer token sent by post ("" for none)
	store *sqlite.Store
	path  string
	conf  func(*Config)
}

const (
	ohSecretA = "secret-tenant-a-0123456789"
	ohSecretB = "secret-tenant-b-0123456789"
)

func newOHEnv(t *testing.T, configure func(*Config)) *ohEnv {
	t.Helper()
	return newOHEnvAt(t, filepath.Join(t.TempDir(), "armature.db"), configure)
}

// restart closes the server's store and serves a new server, with
// fresh in-memory state, on the same file: a process restart.
func (e *ohEnv) restart(t *testing.T) *ohEnv {
	t.Helper()
	if err := e.store.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := newOHEnvAt(t, e.path, e.conf)
	n.token = e.token
	return n
}

func newOHEnvAt(t *testing.T, path string, configure func(*Config)) *ohEnv {
	t.Helper()
	return newOHEnvWith(t, path, nil, configure)
}

// newOHEnvWith is newOHEnvAt whose chat harness configure also adjusts.
func newOHEnvWith(t *testing.T, path string, chatConf func(*chat.Config), configure func(*Config)) *ohEnv {
	t.Helper()
	ohRefDir(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	cc := chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()),
		Locker: store.SessionLocker(sqlite.LockerConfig{})}
	if chatConf != nil {
		chatConf(&cc)
	}
	h, err := chat.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runs.Close(context.Background()) })
	cfg := Config{Agents: []*Agent{{ID: "demo", Chat: h, Model: demo.ModelName}}, Sessions: store, Runs: runs,
		TaskHints: map[string]string{"refunds": "demo"}}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &ohEnv{srv: srv, h: srv.Handler(), store: store, path: path, conf: configure}
}

// ohResult is one answered request.
type ohResult struct {
	status int
	header http.Header
	raw    []byte
	msg    ohResponse
}

// post sends body to POST /v1/openharness and checks that the answer is
// a schema-valid response message (every status but 401/405, which the
// server's common layers answer).
func (e *ohEnv) post(t *testing.T, body string, header ...string) ohResult {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://localhost/v1/openharness", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	res := ohResult{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusMethodNotAllowed {
		return res
	}
	ohValidate(t, "responseMessage", res.raw)
	if err := json.Unmarshal(res.raw, &res.msg); err != nil {
		t.Fatalf("decoding the response: %v", err)
	}
	return res
}

// get reads a JSON (or text) resource of the server.
func (e *ohEnv) get(t *testing.T, path string) []byte {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://localhost"+path, nil)
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

var ohTurnsLine = regexp.MustCompile(`(?m)^armature_turns_total\{[^}]*\} (\d+)$`)

// turns is the number of chat turns the server ran (its /metrics).
func (e *ohEnv) turns(t *testing.T) int {
	t.Helper()
	n := 0
	for _, m := range ohTurnsLine.FindAllStringSubmatch(string(e.get(t, "/metrics")), -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// ohBody builds a request message around a context object (JSON).
func ohBody(requestID, contextJSON string) string {
	rid := ""
	if requestID != "" {
		rid = fmt.Sprintf(`"request_id": %q,`, requestID)
	}
	return fmt.Sprintf(`{"protocol_version": "1.0.0", %s "request": {"context": %s}}`, rid, contextJSON)
}

// directive is a decoded directive payload, for assertions.
type directive struct {
	Type    string
	Payload map[string]any
	Dir     ohDirective
}

func (r ohResult) directives(t *testing.T) []directive {
	t.Helper()
	var out []directive
	for _, d := range r.msg.Response.ActionDirectives {
		var p map[string]any
		if err := json.Unmarshal(d.Payload, &p); err != nil {
			t.Fatalf("directive %s payload: %v", d.ActionType, err)
		}
		out = append(out, directive{Type: d.ActionType, Payload: p, Dir: d})
	}
	return out
}

func (r ohResult) types(t *testing.T) []string {
	var out []string
	for _, d := range r.directives(t) {
		out = append(out, d.Type)
	}
	return out
}

// ext is response.extensions["dev.armature"].
func (r ohResult) ext(t *testing.T) ohExtension {
	t.Helper()
	var x ohExtension
	raw, ok := r.msg.Response.Extensions[ohNamespace]
	if !ok {
		t.Fatalf("no %s extension in %s", ohNamespace, r.raw)
	}
	if err := json.Unmarshal(raw, &x); err != nil {
		t.Fatal(err)
	}
	return x
}

func (r ohResult) errCode() string {
	if r.msg.Response.Error == nil {
		return ""
	}
	return r.msg.Response.Error.Code
}

// approval returns the request_approval directive's payload.
func (r ohResult) approval(t *testing.T) map[string]any {
	t.Helper()
	for _, d := range r.directives(t) {
		if d.Type == ohRequestApproval {
			return d.Payload
		}
	}
	t.Fatalf("no request_approval directive in %s", r.raw)
	return nil
}

func TestOpenHarnessSingleRequests(t *testing.T) {
	e := newOHEnv(t, nil)
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, r ohResult)
	}{
		{
			name: "completed text",
			body: ohBody("r1", `{"session_id": "s-text", "user_intent": "hello"}`),
			check: func(t *testing.T, r ohResult) {
				if r.msg.Response.Status != "success" || r.msg.RequestID != "r1" {
					t.Fatalf("got %s", r.raw)
				}
				d := r.directives(t)
				if len(d) != 1 || d[0].Type != ohRenderMessage || !strings.Contains(d[0].Payload["text"].(string), `You said: "hello"`) {
					t.Fatalf("directives: %s", r.raw)
				}
				if m, _ := d[0].Payload["message"].(map[string]any); m["role"] != "assistant" {
					t.Errorf("render_message.message = %v", d[0].Payload["message"])
				}
				x := r.ext(t)
				if x.SessionID != "s-text" || x.Outcome != "completed" || x.RunID == "" || x.Agent != "demo" {
					t.Errorf("extension = %+v", x)
				}
				if r.msg.Response.EngineLatencyMS == nil {
					t.Error("no engine_latency_ms")
				}
			},
		},
		{
			name: "completed with a tool call",
			body: ohBody("r2", `{"session_id": "s-tool", "user_intent": "where is order 42?"}`),
			check: func(t *testing.T, r ohResult) {
				if diff := cmp.Diff([]string{ohToolCall, ohToolResult, ohRenderMessage}, r.types(t)); diff != "" {
					t.Fatalf("directive types (-want +got):\n%s", diff)
				}
				d := r.directives(t)
				if d[0].Payload["name"] != "lookup_order" || d[0].Payload["fallback_message"] == "" {
					t.Errorf("tool_call = %v", d[0].Payload)
				}
				if d[1].Payload["content"] != "order 42: shipped, arriving Thursday" || d[1].Payload["fallback_message"] == nil {
					t.Errorf("tool_result = %v", d[1].Payload)
				}
				if !strings.HasPrefix(d[2].Payload["text"].(string), "Here is what I found") {
					t.Errorf("reply = %v", d[2].Payload)
				}
			},
		},
		{
			name: "suspended for approval",
			body: ohBody("r3", `{"session_id": "s-susp", "user_intent": "please refund order 7"}`),
			check: func(t *testing.T, r ohResult) {
				if r.msg.Response.Status != "success" {
					t.Fatalf("got %s", r.raw)
				}
				if diff := cmp.Diff([]string{ohToolCall, ohRenderMessage, ohRequestApproval}, r.types(t)); diff != "" {
					t.Fatalf("directive types (-want +got):\n%s", diff)
				}
				d := r.directives(t)[2]
				if d.Dir.RequiresUserApproval == nil || !*d.Dir.RequiresUserApproval || d.Dir.RiskTier != "dangerous" ||
					d.Dir.Priority != "high" || d.Dir.Execution != "sequential" {
					t.Errorf("request_approval = %+v", d.Dir)
				}
				x := r.ext(t)
				if x.Outcome != "suspended" || x.Continuation == nil || x.Continuation.RunID != x.RunID {
					t.Fatalf("extension = %+v", x)
				}
				p := d.Payload
				if p["run_id"] != x.RunID || p["continuation_token"] != x.Continuation.ContinuationToken ||
					p["signal_id"] != "approval:call_2" || !strings.Contains(p["message"].(string), "issue_refund") {
					t.Errorf("payload = %v", p)
				}
				if opts, _ := p["options"].([]any); len(opts) != 2 {
					t.Errorf("options = %v", p["options"])
				}
			},
		},
		{
			name: "missing user_intent",
			body: ohBody("r4", `{"session_id": "s-empty"}`),
			check: func(t *testing.T, r ohResult) {
				ohWantTurnError(t, r, "chat_message_shape_invalid", "user_correctable", false)
			},
		},
		{
			name: "blank user_intent",
			body: ohBody("", `{"session_id": "s-empty", "user_intent": "  "}`),
			check: func(t *testing.T, r ohResult) {
				ohWantTurnError(t, r, "chat_message_shape_invalid", "user_correctable", false)
			},
		},
		{
			name: "minted session",
			body: ohBody("", `{"user_intent": "hi"}`),
			check: func(t *testing.T, r ohResult) {
				x := r.ext(t)
				if r.msg.Response.Status != "success" || !validID(x.SessionID) {
					t.Fatalf("got %s", r.raw)
				}
			},
		},
		{
			name: "auth.session_id stands in for context.session_id",
			body: `{"protocol_version": "1.0.0", "request": {"auth": {"session_id": "s-auth"}, "context": {"user_intent": "hi"}}}`,
			check: func(t *testing.T, r ohResult) {
				if x := r.ext(t); x.SessionID != "s-auth" {
					t.Fatalf("session = %q", x.SessionID)
				}
			},
		},
		{
			name: "invalid session id",
			body: ohBody("r5", `{"session_id": "a/b", "user_intent": "hi"}`),
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request.context.session_id")
				if r.msg.RequestID != "r5" {
					t.Errorf("request_id not echoed: %s", r.raw)
				}
			},
		},
		{
			name: "unknown fields at every level",
			body: `{"protocol_version": "1.0.0", "x_top": {"a": 1}, "capabilities": {"com.example.x": {"y": 2}},
				"request": {"x_req": [1], "auth": {"tenant_id": "ignored", "x_auth": true},
				"extensions": {"com.example": {"z": 1}},
				"context": {"session_id": "s-unknown", "user_intent": "hello", "x_ctx": null,
					"task_hint": {"business_key": "k", "x_hint": 1},
					"shell": {"shell_kind": "im_bot", "x_shell": 1},
					"environment_state": {"privacy_tier": "public", "x_env": {}},
					"attachments": [{"ref_id": "r", "x_att": 1}],
					"extensions": {"dev.armature": {"x_ext": 1}, "com.example": 1}}}}`,
			check: func(t *testing.T, r ohResult) {
				if r.msg.Response.Status != "success" {
					t.Fatalf("got %s", r.raw)
				}
				if x := r.ext(t); !cmp.Equal(x.UnusedAttachments, []int{0}) {
					t.Errorf("unused attachments = %v", x.UnusedAttachments)
				}
			},
		},
		{
			name: "capability negotiation",
			body: `{"protocol_version": "1.0.0", "capabilities": {"openharness.streaming": true, "openharness.ui.rich_cards": true,
				"openharness.attachments.upload": true, "openharness.ui.approval": true, "openharness.actions.parallel": true,
				"com.example.unknown": true}, "request": {"context": {"user_intent": "hi"}}}`,
			check: func(t *testing.T, r ohResult) {
				got := slices.Sorted(maps.Keys(r.msg.SupportedCapabilities))
				if diff := cmp.Diff([]string{"openharness.ui.approval"}, got); diff != "" {
					t.Errorf("supported (-want +got):\n%s", diff)
				}
				var denied []string
				for _, d := range r.msg.CapabilityDenials {
					if d.Code != "not_supported" || d.Message == "" {
						t.Errorf("denial %+v", d)
					}
					denied = append(denied, d.Capability)
				}
				want := []string{"openharness.actions.parallel", "openharness.attachments.upload", "openharness.streaming", "openharness.ui.rich_cards"}
				if diff := cmp.Diff(want, denied); diff != "" {
					t.Errorf("denied (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "image attachment by reference",
			body: ohBody("", `{"session_id": "s-img", "user_intent": "what is this?", "attachments": [
				{"uri": "https://example.com/cat.png", "mime_type": "image/png"},
				{"uri": "https://example.com/brief.pdf", "mime_type": "application/pdf"},
				{"uri": "https://example.com/dog.jpg?size=2"}]}`),
			check: func(t *testing.T, r ohResult) {
				if r.msg.Response.Status != "success" {
					t.Fatalf("got %s", r.raw)
				}
				if x := r.ext(t); !cmp.Equal(x.UnusedAttachments, []int{1}) {
					t.Errorf("unused attachments = %v", x.UnusedAttachments)
				}
				hist := string(e.get(t, "/v1/sessions/s-img"))
				if !strings.Contains(hist, "https://example.com/cat.png") || !strings.Contains(hist, "https://example.com/dog.jpg?size=2") ||
					strings.Contains(hist, "brief.pdf") {
					t.Errorf("history = %s", hist)
				}
			},
		},
		{
			name: "inline attachment refused",
			body: ohBody("", `{"session_id": "s-inline", "user_intent": "look", "attachments": [{"uri": "data:image/png;base64,AAAA"}]}`),
			check: func(t *testing.T, r ohResult) {
				ohWantTurnError(t, r, "chat_message_shape_invalid", "user_correctable", false)
			},
		},
		{
			name: "closed enum checked",
			body: ohBody("", `{"user_intent": "hi", "environment_state": {"privacy_tier": "top-secret"}}`),
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request.context.environment_state.privacy_tier")
			},
		},
		{
			name: "wrong type",
			body: ohBody("", `{"user_intent": 42}`),
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request.context.user_intent")
			},
		},
		{
			name: "request_id too long",
			body: ohBody(strings.Repeat("r", ohMaxRequestID+1), `{"user_intent": "hi"}`),
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request_id")
			},
		},
		{
			name: "request missing",
			body: `{"protocol_version": "1.0.0", "request_id": "r6"}`,
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request")
			},
		},
		{
			name: "task hint names an unknown agent",
			body: ohBody("", `{"user_intent": "hi", "task_hint": {"dev.armature.agent": "nobody"}}`),
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request.context.task_hint.dev.armature.agent")
			},
		},
		{
			name: "task hint routes",
			body: ohBody("", `{"user_intent": "hi", "task_hint": {"dev.armature.agent": "refunds"}}`),
			check: func(t *testing.T, r ohResult) {
				if x := r.ext(t); r.msg.Response.Status != "success" || x.Agent != "demo" {
					t.Fatalf("got %s", r.raw)
				}
			},
		},
		{
			name: "an unmatched sop_id leaves the default agent",
			body: ohBody("", `{"user_intent": "hi", "task_hint": {"sop_id": "sop_unknown"}}`),
			check: func(t *testing.T, r ohResult) {
				if x := r.ext(t); r.msg.Response.Status != "success" || x.Agent != "demo" {
					t.Fatalf("got %s", r.raw)
				}
			},
		},
		{
			name: "signal_payload must be an object",
			body: ohBody("", `{"user_intent": "approve", "extensions": {"dev.armature": {"signal_payload": [1]}}}`),
			check: func(t *testing.T, r ohResult) {
				ohWantProtocolError(t, r, ohCodeInvalidRequest, "request.context.extensions.dev.armature.signal_payload")
			},
		},
		{
			name: "a continuation without a token",
			body: ohBody("", `{"user_intent": "approve", "continuation": {"run_id": "run_x"}}`),
			check: func(t *testing.T, r ohResult) {
				ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
			},
		},
		{
			name: "a forged continuation token",
			body: ohBody("", `{"user_intent": "approve", "continuation": {"continuation_token": "oh1.eyJhIjoiZGVtbyJ9"}}`),
			check: func(t *testing.T, r ohResult) {
				ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, tc.body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			tc.check(t, r)
		})
	}
}

// ohWantTurnError checks an errored-outcome response.
func ohWantTurnError(t *testing.T, r ohResult, code, bucket string, retryable bool) {
	t.Helper()
	er := r.msg.Response.Error
	if r.msg.Response.Status != "error" || er == nil || er.Code != code {
		t.Fatalf("want error %s, got %s", code, r.raw)
	}
	if er.Retryable == nil || *er.Retryable != retryable || er.Message == "" {
		t.Errorf("error = %s", r.raw)
	}
	var details map[string]string
	if err := json.Unmarshal(er.Details, &details); err != nil || details["error_bucket"] != bucket {
		t.Errorf("details = %s", er.Details)
	}
	d := r.directives(t)
	if len(d) != 1 || d[0].Type != ohRenderMessage || d[0].Payload["text"] != er.Message {
		t.Errorf("want one render_message with the error's reply, got %s", r.raw)
	}
	if x := r.ext(t); x.Outcome != "errored" {
		t.Errorf("extension outcome = %q", x.Outcome)
	}
}

// ohWantProtocolError checks a protocol-level error response.
func ohWantProtocolError(t *testing.T, r ohResult, code, field string) {
	t.Helper()
	er := r.msg.Response.Error
	if r.msg.Response.Status != "error" || er == nil || er.Code != code {
		t.Fatalf("want error %s, got %s", code, r.raw)
	}
	if er.Retryable == nil || *er.Retryable {
		t.Errorf("retryable = %v", er.Retryable)
	}
	if field != "" {
		var details map[string]string
		if err := json.Unmarshal(er.Details, &details); err != nil || details["field"] != field {
			t.Errorf("details = %s, want field %s", er.Details, field)
		}
	}
	if !cmp.Equal(r.msg.SupportedProtocolVersions, []string{ohVersion}) {
		t.Errorf("supported_protocol_versions = %v", r.msg.SupportedProtocolVersions)
	}
}

func TestOpenHarnessProtocolVersions(t *testing.T) {
	e := newOHEnv(t, nil)
	tests := []struct {
		version string // a JSON value, or "" for absent
		ok      bool
	}{
		{`"1.0.0"`, true},
		{`"1.3.7"`, true},
		{`"1.0.0-draft"`, true},
		{`"1.0.0+build.5"`, true},
		{`"2.0.0"`, false},
		{`"0.9.0"`, false},
		{`"1"`, false},
		{`"1.0"`, false},
		{`"v1.0.0"`, false},
		{`"latest"`, false},
		{`1`, false},
		{`null`, false},
		{``, false},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			pv := ""
			if tc.version != "" {
				pv = `"protocol_version": ` + tc.version + `,`
			}
			r := e.post(t, `{`+pv+` "request_id": "rv", "correlation_id": "cv", "request": {"context": {"user_intent": "hi"}}}`)
			if r.status != http.StatusOK {
				t.Fatalf("status %d", r.status)
			}
			if tc.ok {
				if r.msg.Response.Status != "success" || r.msg.ProtocolVersion != ohVersion {
					t.Fatalf("got %s", r.raw)
				}
				return
			}
			ohWantProtocolError(t, r, ohCodeVersionUnsupported, "")
			if r.msg.RequestID != "rv" || r.msg.CorrelationID != "cv" || r.header.Get("X-Correlation-ID") != "cv" {
				t.Errorf("ids not echoed: %s", r.raw)
			}
		})
	}
}

func TestOpenHarnessHTTPErrors(t *testing.T) {
	e := newOHEnv(t, func(c *Config) { c.MaxBodyBytes = 2048 })
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"not JSON", `{"protocol_version": "1.0.0",`, http.StatusBadRequest, ohCodeInvalidRequest},
		{"garbage", `hello`, http.StatusBadRequest, ohCodeInvalidRequest},
		{"two values", `{} {}`, http.StatusBadRequest, ohCodeInvalidRequest},
		{"an array", `[{"protocol_version": "1.0.0"}]`, http.StatusBadRequest, ohCodeInvalidRequest},
		{"null", `null`, http.StatusBadRequest, ohCodeInvalidRequest},
		{"empty", ``, http.StatusBadRequest, ohCodeInvalidRequest},
		{"oversized", ohBody("", fmt.Sprintf(`{"user_intent": %q}`, strings.Repeat("x", 4096))), http.StatusRequestEntityTooLarge, ohCodeBodyTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.turns(t)
			r := e.post(t, tc.body)
			if r.status != tc.status || r.errCode() != tc.code || r.msg.Response.Status != "error" {
				t.Fatalf("got %d %s", r.status, r.raw)
			}
			if got := e.turns(t); got != before {
				t.Errorf("a turn ran: %d → %d", before, got)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/v1/openharness", nil))
		if rec.Code != http.StatusMethodNotAllowed && rec.Code != http.StatusNotFound {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

func TestOpenHarnessCorrelation(t *testing.T) {
	e := newOHEnv(t, nil)
	t.Run("body", func(t *testing.T) {
		r := e.post(t, `{"protocol_version": "1.0.0", "correlation_id": "corr-1", "request": {"context": {"user_intent": "hi"}}}`)
		if r.msg.CorrelationID != "corr-1" || r.header.Get("X-Correlation-ID") != "corr-1" {
			t.Fatalf("got %s / %v", r.raw, r.header)
		}
	})
	t.Run("header only", func(t *testing.T) {
		r := e.post(t, ohBody("", `{"user_intent": "hi"}`), "X-Correlation-ID", "corr-h")
		if r.msg.CorrelationID != "corr-h" || r.header.Get("X-Correlation-ID") != "corr-h" {
			t.Fatalf("got %s / %v", r.raw, r.header)
		}
	})
	t.Run("none", func(t *testing.T) {
		r := e.post(t, ohBody("", `{"user_intent": "hi"}`))
		if r.msg.CorrelationID != "" || r.header.Get("X-Correlation-ID") != "" {
			t.Fatalf("got %s / %v", r.raw, r.header)
		}
	})
}

// ohContinue builds a continuation request.
func ohContinue(requestID, session, runID, token, intent string) string {
	s := ""
	if session != "" {
		s = fmt.Sprintf(`"session_id": %q,`, session)
	}
	return ohBody(requestID, fmt.Sprintf(`{%s "user_intent": %q, "continuation": {"run_id": %q, "continuation_token": %q}}`,
		s, intent, runID, token))
}

// ohDecide is a continuation that picks one of the request_approval
// directive's options by id (context.extensions["dev.armature"].option).
func ohDecide(requestID, session, runID, token, option string) string {
	s := ""
	if session != "" {
		s = fmt.Sprintf(`"session_id": %q,`, session)
	}
	cont := fmt.Sprintf(`"continuation_token": %q`, token)
	if runID != "" {
		cont = fmt.Sprintf(`"run_id": %q, %s`, runID, cont)
	}
	if token == "" {
		cont = fmt.Sprintf(`"run_id": %q`, runID)
	}
	return ohBody(requestID, fmt.Sprintf(`{%s "continuation": {%s}, "extensions": {"dev.armature": {"option": %q}}}`, s, cont, option))
}

func TestOpenHarnessApprovalFlow(t *testing.T) {
	tests := []struct {
		name   string
		reply  string // user_intent of the continuation
		extra  string // "option:<id>" sends that option's signal_payload
		result string // the tool_result content
	}{
		{name: "approve option", extra: "option:approve", result: "refunded $30.00 for order 7"},
		{name: "approve option payload", extra: "payload:approve", result: "refunded $30.00 for order 7"},
		{name: "deny with a comment", extra: `signal_payload:{"approval": {"approved": false, "comment": "too expensive"}}`,
			result: "The user denied this call. Reason: too expensive"},
		{name: "deny option", extra: "option:deny", result: "The user denied this call."},
		{name: "deny option payload", extra: "payload:deny", result: "The user denied this call."},
		{name: "by run_id alone", extra: "run:approve", result: "refunded $30.00 for order 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newOHEnv(t, nil)
			s := e.post(t, ohBody("q1", `{"session_id": "s-flow", "user_intent": "refund order 7"}`))
			x := s.ext(t)
			if x.Outcome != "suspended" {
				t.Fatalf("got %s", s.raw)
			}
			var body string
			if id, ok := strings.CutPrefix(tc.extra, "option:"); ok {
				body = ohDecide("q2", "s-flow", x.Continuation.RunID, x.Continuation.ContinuationToken, id)
			}
			if id, ok := strings.CutPrefix(tc.extra, "run:"); ok {
				body = ohDecide("q2", "s-flow", x.Continuation.RunID, "", id)
			}
			if p, ok := strings.CutPrefix(tc.extra, "signal_payload:"); ok {
				body = ohBody("q2", fmt.Sprintf(`{"session_id": "s-flow", "continuation": {"continuation_token": %q},
					"extensions": {"dev.armature": {"signal_payload": %s}}}`, x.Continuation.ContinuationToken, p))
			}
			if id, ok := strings.CutPrefix(tc.extra, "payload:"); ok {
				var payload any
				for _, o := range s.approval(t)["options"].([]any) {
					if o := o.(map[string]any); o["id"] == id {
						payload = o["signal_payload"]
					}
				}
				p, _ := json.Marshal(payload)
				body = ohBody("q2", fmt.Sprintf(`{"session_id": "s-flow", "continuation": {"continuation_token": %q},
					"extensions": {"dev.armature": {"signal_payload": %s}}}`, x.Continuation.ContinuationToken, p))
			}
			r := e.post(t, body)
			if r.msg.Response.Status != "success" || r.msg.RequestID != "q2" {
				t.Fatalf("got %s", r.raw)
			}
			if diff := cmp.Diff([]string{ohToolResult, ohRenderMessage}, r.types(t)); diff != "" {
				t.Fatalf("directive types (-want +got):\n%s", diff)
			}
			d := r.directives(t)
			if d[0].Payload["content"] != tc.result || d[0].Payload["name"] != "issue_refund" || d[0].Payload["call_id"] == "" {
				t.Errorf("tool_result = %v", d[0].Payload)
			}
			if !strings.Contains(d[1].Payload["text"].(string), tc.result) {
				t.Errorf("reply = %v", d[1].Payload)
			}
			rx := r.ext(t)
			if rx.Outcome != "completed" || !rx.Resumed || rx.InvocationID != x.InvocationID || rx.SessionID != "s-flow" {
				t.Errorf("extension = %+v", rx)
			}
			// One id per run on every surface: the suspended turn's run_id
			// (its continuation's too) and the resumed run's are run
			// records, the second a child of the first.
			if x.RunID == "" || x.Continuation.RunID != x.RunID || x.InvocationID != x.RunID || rx.RunID == "" || rx.RunID == x.RunID {
				t.Errorf("run ids: suspended %q (continuation %q, invocation %q), resumed %q", x.RunID, x.Continuation.RunID, x.InvocationID, rx.RunID)
			}
			var run struct {
				ID     string `json:"id"`
				Parent string `json:"parentRequestId"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal(e.get(t, "/v1/runs/"+rx.RunID), &run); err != nil {
				t.Fatal(err)
			}
			if run.ID != rx.RunID || run.Parent != x.RunID || run.Status != "completed" {
				t.Errorf("GET /v1/runs/%s = %+v", rx.RunID, run)
			}
			if err := json.Unmarshal(e.get(t, "/v1/runs/"+x.RunID), &run); err != nil || run.Status != "suspended" {
				t.Errorf("GET /v1/runs/%s = %+v, %v", x.RunID, run, err)
			}
		})
	}
}

func TestOpenHarnessContinuationOnce(t *testing.T) {
	e := newOHEnv(t, nil)
	s := e.post(t, ohBody("", `{"user_intent": "refund order 9"}`)) // minted session
	x := s.ext(t)
	cont := x.Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}

	t.Run("an unrecognized reply leaves the turn suspended", func(t *testing.T) {
		r := e.post(t, ohContinue("c0", "", cont.RunID, cont.ContinuationToken, "maybe later"))
		ohWantTurnError(t, r, "suspension_resume_payload_invalid", "user_correctable", false)
	})
	t.Run("a mismatched run id resumes nothing", func(t *testing.T) {
		r := e.post(t, ohDecide("c1", "", "some-other-run", cont.ContinuationToken, "approve"))
		ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
	})
	t.Run("a mismatched session resumes nothing", func(t *testing.T) {
		r := e.post(t, ohDecide("c1b", "other-session", cont.RunID, cont.ContinuationToken, "approve"))
		ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
	})
	var first ohResult
	t.Run("the token resumes", func(t *testing.T) {
		first = e.post(t, ohDecide("c2", x.SessionID, cont.RunID, cont.ContinuationToken, "approve"))
		if first.msg.Response.Status != "success" || first.ext(t).Outcome != "completed" {
			t.Fatalf("got %s", first.raw)
		}
	})
	t.Run("a repeat returns the recorded outcome", func(t *testing.T) {
		before := e.turns(t)
		r := e.post(t, ohDecide("c3", "", cont.RunID, cont.ContinuationToken, "deny"))
		if r.msg.RequestID != "c3" {
			t.Errorf("request_id = %q", r.msg.RequestID)
		}
		if diff := cmp.Diff(first.msg.Response, r.msg.Response); diff != "" {
			t.Errorf("response (-first +repeat):\n%s", diff)
		}
		if got := e.turns(t); got != before {
			t.Errorf("a turn ran: %d → %d", before, got)
		}
	})
	t.Run("history holds one resumed turn", func(t *testing.T) {
		var sess struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(e.get(t, "/v1/sessions/"+x.SessionID), &sess); err != nil {
			t.Fatal(err)
		}
		// user, tool call, approval request, tool result, answer
		if len(sess.Messages) != 5 {
			t.Errorf("history has %d messages: %v", len(sess.Messages), sess.Messages)
		}
	})
}

func TestOpenHarnessRetransmission(t *testing.T) {
	e := newOHEnv(t, nil)
	body := ohBody("dup-1", `{"session_id": "s-dup", "user_intent": "where is order 5?"}`)
	before := e.turns(t)
	first := e.post(t, body)
	second := e.post(t, body)
	if !bytes.Equal(first.raw, second.raw) {
		t.Errorf("the retransmission got another response:\n%s\n%s", first.raw, second.raw)
	}
	if got := e.turns(t); got != before+1 {
		t.Errorf("turns: %d → %d, want one turn", before, got)
	}

	t.Run("concurrent", func(t *testing.T) {
		body := ohBody("dup-2", `{"session_id": "s-dup", "user_intent": "where is order 6?"}`)
		before := e.turns(t)
		var wg sync.WaitGroup
		raws := make([][]byte, 8)
		for i := range raws {
			wg.Go(func() { raws[i] = e.post(t, body).raw })
		}
		wg.Wait()
		for _, r := range raws[1:] {
			if !bytes.Equal(raws[0], r) {
				t.Errorf("responses differ:\n%s\n%s", raws[0], r)
			}
		}
		if got := e.turns(t); got != before+1 {
			t.Errorf("turns: %d → %d, want one turn", before, got)
		}
	})
	t.Run("another session is another request", func(t *testing.T) {
		before := e.turns(t)
		r := e.post(t, ohBody("dup-1", `{"session_id": "s-dup-2", "user_intent": "where is order 5?"}`))
		if r.ext(t).SessionID != "s-dup-2" || e.turns(t) != before+1 {
			t.Errorf("got %s", r.raw)
		}
	})
	t.Run("a minted session is returned again", func(t *testing.T) {
		body := ohBody("dup-3", `{"user_intent": "hi"}`)
		a, b := e.post(t, body), e.post(t, body)
		if a.ext(t).SessionID != b.ext(t).SessionID {
			t.Errorf("sessions %q, %q", a.ext(t).SessionID, b.ext(t).SessionID)
		}
	})
	t.Run("history holds one turn", func(t *testing.T) {
		var sess struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(e.get(t, "/v1/sessions/s-dup"), &sess); err != nil {
			t.Fatal(err)
		}
		if len(sess.Messages) != 8 { // two turns of user, tool call, tool result, answer
			t.Errorf("history has %d messages", len(sess.Messages))
		}
	})
}

func TestOpenHarnessAuth(t *testing.T) {
	e := newOHEnv(t, func(c *Config) {
		c.Tokens = []Token{{Secret: ohSecretA, Tenant: "tenant-a"}, {Secret: ohSecretB, Tenant: "tenant-b"}}
	})
	body := ohBody("", `{"user_intent": "hi"}`)
	for _, tok := range []string{"", "wrong-token-0123456789"} {
		e.token = tok
		if r := e.post(t, body); r.status != http.StatusUnauthorized {
			t.Errorf("token %q: status %d", tok, r.status)
		}
	}

	e.token = ohSecretA
	s := e.post(t, ohBody("shared-id", `{"session_id": "s-iso", "user_intent": "refund order 3"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}

	e.token = ohSecretB
	t.Run("tenant B cannot continue tenant A's run", func(t *testing.T) {
		for _, session := range []string{"s-iso", ""} {
			before := e.turns(t)
			r := e.post(t, ohDecide("b-"+session, session, cont.RunID, cont.ContinuationToken, "approve"))
			ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
			if got := e.turns(t); got != before {
				t.Errorf("a turn ran: %d → %d", before, got)
			}
		}
	})
	t.Run("tenant B's request ids are its own", func(t *testing.T) {
		r := e.post(t, ohBody("shared-id", `{"session_id": "s-iso", "user_intent": "hello"}`))
		if x := r.ext(t); x.Outcome != "completed" {
			t.Fatalf("got %s", r.raw)
		}
	})
	e.token = ohSecretA
	t.Run("tenant A still continues", func(t *testing.T) {
		r := e.post(t, ohDecide("a-2", "s-iso", cont.RunID, cont.ContinuationToken, "approve"))
		if x := r.ext(t); x.Outcome != "completed" {
			t.Fatalf("got %s", r.raw)
		}
	})
}

// TestOpenHarnessGoldenExamples checks the reference examples: each
// validates against the schema, our types read and re-emit it without
// losing a field, and each request runs through the endpoint to a valid
// response.
func TestOpenHarnessGoldenExamples(t *testing.T) {
	dir := filepath.Join(ohRefDir(t), "examples")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	e := newOHEnv(t, nil)
	for _, f := range files {
		name, _ := filepath.Rel(dir, f)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			isRequest := strings.HasPrefix(filepath.Base(f), "request")
			def := "responseMessage"
			if isRequest {
				def = "requestMessage"
			}
			ohValidate(t, def, raw)
			var reemitted []byte
			if isRequest {
				req, fail := parseOHRequest(raw)
				if fail != nil {
					t.Fatalf("parse: %+v", fail)
				}
				reemitted, err = json.Marshal(req)
			} else {
				var resp ohResponse
				if err = json.Unmarshal(raw, &resp); err == nil {
					reemitted, err = json.Marshal(resp)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ohGeneric(t, raw), ohGeneric(t, reemitted)); diff != "" {
				t.Errorf("round trip lost fields (-example +re-emitted):\n%s", diff)
			}
			ohValidate(t, def, reemitted)
			if !isRequest {
				return
			}
			r := e.post(t, string(raw))
			var want struct {
				RequestID     string `json:"request_id"`
				CorrelationID string `json:"correlation_id"`
			}
			_ = json.Unmarshal(raw, &want)
			if r.msg.RequestID != want.RequestID || r.msg.CorrelationID != want.CorrelationID {
				t.Errorf("ids not echoed: %s", r.raw)
			}
			switch filepath.Base(filepath.Dir(f)) {
			case "minimal": // a plain turn
				if r.msg.Response.Status != "success" || r.ext(t).SessionID != "sess_demo" {
					t.Errorf("got %s", r.raw)
				}
			case "im-cli": // a continuation of a run this engine never issued
				ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
				var denied []string
				for _, d := range r.msg.CapabilityDenials {
					denied = append(denied, d.Capability)
				}
				if !slices.Contains(denied, "openharness.ui.rich_cards") {
					t.Errorf("denials = %+v", r.msg.CapabilityDenials)
				}
			}
		})
	}
}

func ohGeneric(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpenHarnessCacheBounded checks the memo's eviction and that an
// entry not kept is forgotten.
func TestOpenHarnessCacheBounded(t *testing.T) {
	m := newOHMemo(2, 1<<20)
	resp := &ohResponse{}
	for _, k := range []string{"a", "b", "c"} {
		ent, owner := m.claim(k)
		if !owner {
			t.Fatalf("%s: not the owner", k)
		}
		m.settle(k, ent, resp, true)
	}
	if _, owner := m.claim("a"); !owner {
		t.Error("the oldest entry was not evicted")
	}
	if ent, owner := m.claim("c"); owner || ent.wait(context.Background()) != resp {
		t.Error("the newest entry was lost")
	}
	ent, _ := m.claim("d")
	m.settle("d", ent, resp, false)
	if _, owner := m.claim("d"); !owner {
		t.Error("an entry not kept was remembered")
	}

	small := newOHMemo(100, 64) // bytes: one small response at most
	for _, k := range []string{"x", "y"} {
		ent, _ := small.claim(k)
		small.settle(k, ent, &ohResponse{ProtocolVersion: ohVersion, Response: ohResponsePayload{Status: "success"}}, true)
	}
	if _, owner := small.claim("x"); !owner {
		t.Error("the byte bound evicted nothing")
	}
	if small.bytes > 64 {
		t.Errorf("bytes = %d", small.bytes)
	}
}

func TestOpenHarnessApprovalReply(t *testing.T) {
	// The endpoint never decides an approval from prose: a reply is
	// {"user_reply": ...} for the graph, which the agent's approval
	// refuses (suspension_resume_payload_invalid); the approval stays
	// pending and the token valid.
	e := newOHEnv(t, nil)
	x := e.post(t, ohBody("r1", `{"session_id": "s-prose", "user_intent": "refund order 7"}`)).ext(t)
	cont := x.Continuation
	for i, reply := range []string{"approve", "Yes!", "ok, go ahead", "no", ""} {
		r := e.post(t, ohContinue(fmt.Sprint("p", i), "s-prose", cont.RunID, cont.ContinuationToken, reply))
		ohWantTurnError(t, r, "suspension_resume_payload_invalid", "user_correctable", false)
	}
	for _, tc := range []struct{ name, ext, field string }{
		{"unknown option", `{"option": "maybe"}`, ""},
		{"empty option", `{"option": ""}`, "request.context.extensions.dev.armature.option"},
		{"option and payload", `{"option": "approve", "signal_payload": {"approval": {"approved": true}}}`, "request.context.extensions.dev.armature"},
		{"option not a string", `{"option": 1}`, "request.context.extensions.dev.armature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, ohBody("o-"+tc.name, fmt.Sprintf(`{"session_id": "s-prose", "continuation": {"continuation_token": %q},
				"extensions": {"dev.armature": %s}}`, cont.ContinuationToken, tc.ext)))
			if tc.field != "" {
				ohWantProtocolError(t, r, "invalid_request", tc.field)
				return
			}
			ohWantTurnError(t, r, "suspension_resume_payload_invalid", "user_correctable", false)
		})
	}
	r := e.post(t, ohDecide("p-ok", "s-prose", cont.RunID, cont.ContinuationToken, "approve"))
	if r.ext(t).Outcome != "completed" {
		t.Fatalf("the approval did not stay pending: %s", r.raw)
	}
}

func FuzzParseOHRequest(f *testing.F) {
	f.Add([]byte(ohBody("r", `{"session_id": "s", "user_intent": "hi"}`)))
	f.Add([]byte(`{"protocol_version": "1.0.0", "request": {"context": {"continuation": {"continuation_token": "oh1.e30"}, "attachments": [{"size_bytes": -1}]}}}`))
	f.Add([]byte(`{"protocol_version": "2.0.0"}`))
	f.Add([]byte(`{"protocol_version": "1.0.0", "capabilities": {"openharness.streaming": true}, "request": {"context": {"environment_state": {"privacy_tier": "x"}}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"protocol_version": 1}`))
	files, _ := filepath.Glob(filepath.Join(ohRefPath(), "examples", "*", "request*.json"))
	for _, file := range files {
		if raw, err := os.ReadFile(file); err == nil {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, fail := parseOHRequest(body)
		if fail != nil {
			if fail.status == http.StatusOK && req == nil {
				t.Fatalf("a protocol error without the request: %+v", fail)
			}
			if fail.code == "" || fail.message == "" {
				t.Fatalf("failure without code or message: %+v", fail)
			}
			return
		}
		if req.Request == nil {
			t.Fatal("accepted without request")
		}
		if c := req.Request.Context; c != nil && c.Continuation != nil {
			parseOHToken(c.Continuation.ContinuationToken)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, fail := parseOHRequest(again)
		if fail != nil {
			t.Fatalf("the re-emitted request fails: %+v\n%s", fail, again)
		}
		if diff := cmp.Diff(req, req2); diff != "" {
			t.Fatalf("re-parse differs (-first +second):\n%s", diff)
		}
	})
}

func TestOpenHarnessCorrelationOnRun(t *testing.T) {
	e := newOHEnv(t, nil)
	r := e.post(t, `{"protocol_version": "1.0.0", "correlation_id": "trace-77", "request": {"context": {"session_id": "s-trace", "user_intent": "hi"}}}`)
	if r.msg.Response.Status != "success" {
		t.Fatalf("got %s", r.raw)
	}
	var runs struct {
		Runs []struct {
			CorrelationID string `json:"correlationId"`
			Status        string `json:"status"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(e.get(t, "/v1/sessions/s-trace/runs"), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) != 1 || runs.Runs[0].CorrelationID != "trace-77" {
		t.Fatalf("runs = %+v", runs.Runs)
	}
}

// TestOpenHarnessWrapperErrors: every answer of the endpoint is an
// OpenHarness envelope a Shell can parse, also the failures answered
// before the endpoint reads the request (no or a wrong token, a body
// that is not JSON by its media type, a wrong method), with the HTTP
// status of the other routes. Before, these were the REST API's
// {"error": {...}}, which fails the response schema.
func TestOpenHarnessWrapperErrors(t *testing.T) {
	e := newOHEnv(t, func(c *Config) { c.Tokens = []Token{{Tenant: "acme", Secret: "s3cret-token-0123456789"}} })
	body := `{"protocol_version": "1.0.0", "request": {"context": {"user_intent": "hi"}}}`
	for _, tc := range []struct {
		name, method, token, ctype string
		status                     int
		code                       string
	}{
		{"no token", http.MethodPost, "", "application/json", http.StatusUnauthorized, CodeUnauthorized},
		{"wrong token", http.MethodPost, "nope", "application/json", http.StatusUnauthorized, CodeUnauthorized},
		{"not JSON", http.MethodPost, "s3cret-token-0123456789", "text/plain", http.StatusUnsupportedMediaType, ""},
		{"wrong method", http.MethodGet, "s3cret-token-0123456789", "", http.StatusMethodNotAllowed, CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://localhost/v1/openharness", strings.NewReader(body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			ohValidate(t, "responseMessage", rec.Body.Bytes())
			var msg struct {
				Response struct {
					Status string `json:"status"`
					Error  struct {
						Code string `json:"code"`
					} `json:"error"`
				} `json:"response"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.Response.Status != "error" ||
				(tc.code != "" && msg.Response.Error.Code != tc.code) {
				t.Fatalf("answer %s, want an error envelope with code %q", rec.Body, tc.code)
			}
		})
	}
}

// TestOpenHarnessCorrelationRefused: a correlation id the run store
// would refuse (control characters, invalid UTF-8) is an invalid request
// and runs nothing. Before, the turn ran and was stored with no run
// record (the recorder refused the run, and the turn went on without
// one). An X-Correlation-ID header that is not printable ASCII is
// ignored: the turn runs and is recorded, the header is not echoed.
func TestOpenHarnessCorrelationRefused(t *testing.T) {
	e := newOHEnv(t, nil)
	for _, cid := range []string{`trace\n1`, `nul\u0000`, `tab\t`} { // JSON escapes
		before := e.turns(t)
		r := e.post(t, `{"protocol_version": "1.0.0", "correlation_id": "`+cid+`", "request": {"context": {"session_id": "s-cc", "user_intent": "refund order 7"}}}`)
		ohWantProtocolError(t, r, "invalid_request", "correlation_id")
		if got := e.turns(t); got != before {
			t.Fatalf("correlation id %q: a turn ran (%d → %d)", cid, before, got)
		}
	}
	r := e.post(t, `{"protocol_version": "1.0.0", "request": {"context": {"session_id": "s-ch", "user_intent": "hi"}}}`,
		"X-Correlation-ID", "bad\tvalue")
	if r.msg.Response.Status != "success" || r.header.Get("X-Correlation-ID") != "" {
		t.Fatalf("a turn with an unusable X-Correlation-ID: %s (echoed %q)", r.raw, r.header.Get("X-Correlation-ID"))
	}
	var runs struct {
		Runs []struct {
			CorrelationID string `json:"correlationId"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(e.get(t, "/v1/sessions/s-ch/runs"), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) != 1 || runs.Runs[0].CorrelationID != "" {
		t.Fatalf("the turn's runs: %+v, want one, without the header's id", runs.Runs)
	}
}

func TestOpenHarnessRetransmittedContinuation(t *testing.T) {
	e := newOHEnv(t, nil)
	s := e.post(t, ohBody("", `{"session_id": "s-rc", "user_intent": "refund order 4"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}
	body := ohDecide("rc-1", "s-rc", cont.RunID, cont.ContinuationToken, "approve")
	first := e.post(t, body)
	before := e.turns(t)
	second := e.post(t, body)
	if !bytes.Equal(first.raw, second.raw) || first.ext(t).Outcome != "completed" {
		t.Errorf("the retransmission got another response:\n%s\n%s", first.raw, second.raw)
	}
	if got := e.turns(t); got != before {
		t.Errorf("a turn ran: %d → %d", before, got)
	}
}

// TestOpenHarnessRecordedEncoding checks the response the memo measured
// and the owner writes as is: the bytes are the response's encoding plus
// json.Encoder's newline, engine_latency_ms is in it for a new turn and a
// resumed one (set before either memo publishes the response), and a
// retransmission gets the same payload.
func TestOpenHarnessRecordedEncoding(t *testing.T) {
	e := newOHEnv(t, nil)
	check := func(t *testing.T, r ohResult) {
		t.Helper()
		if r.status != http.StatusOK || r.msg.Response.EngineLatencyMS == nil {
			t.Fatalf("status %d, no engine_latency_ms: %s", r.status, r.raw)
		}
		want, err := json.Marshal(r.msg)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := json.Compact(&got, r.raw); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) || !bytes.HasSuffix(r.raw, []byte("}\n")) {
			t.Errorf("written %q, want the encoding %s and a newline", r.raw, want)
		}
	}
	same := func(t *testing.T, a, b ohResult) {
		t.Helper()
		if b.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retransmission is not marked replayed: %v", b.header)
		}
		ja, _ := json.Marshal(a.msg.Response)
		jb, _ := json.Marshal(b.msg.Response)
		if string(ja) != string(jb) {
			t.Errorf("retransmission's response %s, the original's %s", jb, ja)
		}
	}
	first := e.post(t, ohBody("enc-1", `{"session_id": "s-enc", "user_intent": "hello"}`))
	check(t, first)
	again := e.post(t, ohBody("enc-1", `{"session_id": "s-enc", "user_intent": "hello"}`))
	check(t, again)
	same(t, first, again)

	s := e.post(t, ohBody("enc-2", `{"session_id": "s-enc", "user_intent": "refund order 7"}`))
	x := s.ext(t)
	if x.Outcome != "suspended" || x.Continuation == nil {
		t.Fatalf("got %s", s.raw)
	}
	body := ohDecide("enc-3", "s-enc", x.Continuation.RunID, x.Continuation.ContinuationToken, "approve")
	resumed := e.post(t, body)
	check(t, resumed)
	if rx := resumed.ext(t); rx.Outcome != "completed" {
		t.Fatalf("resumed: %s", resumed.raw)
	}
	replay := e.post(t, body)
	check(t, replay)
	same(t, resumed, replay)
}
