package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// AgentID is the id of the script's agent (the OpenAI model name).
const AgentID = "agent"

// Config is the backend the script runs against.
type Config struct {
	// Backend is the adapter's name: the workspace agent's backend field.
	Backend string
	// Factory builds the adapter; nil for adapter.Native means
	// adapter.NativeFactory.
	Factory adapter.Factory
	// Section is the agent's backend-native section (JSON), handed to the
	// factory as adapter.Agent.Config.
	Section json.RawMessage
	// Workflow, when set, makes the agent a graph workflow of that id
	// (server.Agent.Workflow; default: the adapter's own, when it is an
	// adapter.Workflow): the script then also checks the
	// runtime.workflow.* events.
	Workflow string
}

// Run is the end-to-end script every backend passes: it serves one agent
// of cfg's backend (the scripted Model, the Tools gateway) over an SQLite
// store, and runs, over REST, OpenHarness and the OpenAI-compatible
// endpoint:
//
//  1. a plain turn on each surface, and a conversation a client of the
//     OpenAI endpoint sends whole (the model gets all of it);
//  2. a tool turn (lookup_order) on REST and the OpenAI endpoint, whose
//     run records agent.tool.* events carrying the backend's adapter name;
//  3. an approval (issue_refund) started on OpenHarness and, after a
//     restart of the server on the same store, approved over REST;
//  4. an approval started on the OpenAI endpoint and approved through an
//     OpenHarness continuation;
//  5. cancellation of a running turn (POST /v1/runs/{id}/cancel while the
//     model blocks) and of a suspended one, whose signal then resumes
//     nothing while the session goes on; a pending approval superseded by
//     a new message;
//  6. a session deleted and started again under its id: the model
//     receives nothing of the deleted conversation (an upstream that
//     keeps sessions of its own deletes its own, adapter.SessionDeleter);
//  7. a direct tool request, recorded with runtime.tool.direct.* events;
//  8. on the Responses API: a turn continued by previous_response_id
//     (the model gets the conversation), a streamed tool turn, an
//     approval started on REST and denied with an mcp_approval_response
//     (a second decision is 409), and one started on a stream;
//  9. after a second restart, the run records: statuses, parent links;
//     the approval of step 8 approved over Responses, and a streamed
//     response cancelled while its model call runs (response.failed,
//     then GET answers it cancelled).
//
// It fails t on the first deviation.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.Backend == "" {
		cfg.Backend = adapter.Native
	}
	if cfg.Factory == nil && cfg.Backend == adapter.Native {
		cfg.Factory = adapter.NativeFactory
	}
	if cfg.Factory == nil {
		t.Fatalf("adaptertest: no factory for backend %q", cfg.Backend)
	}
	path := filepath.Join(t.TempDir(), "armature.db")
	s := start(t, cfg, path)
	defer func() { s.stop(t) }()

	t.Run("plain turn over REST", func(t *testing.T) {
		var out restOutcome
		s.do(t, "POST", "/v1/sessions", map[string]any{"session_id": "plain"}, nil, nil)
		if code := s.do(t, "POST", "/v1/sessions/plain/messages", map[string]any{"content": "hello"}, nil, &out); code != 200 ||
			out.Outcome != "completed" || !strings.Contains(out.text(), "hello") {
			t.Fatalf("REST plain turn: %d %+v", code, out)
		}
		s.checkAdapterEvents(t, out.RunID, "")
	})
	t.Run("plain turn over OpenHarness", func(t *testing.T) {
		oh := s.openHarness(t, "r-plain", map[string]any{"session_id": "plain-oh", "user_intent": "hello there"})
		if oh.Response.Status != "success" || !strings.Contains(oh.texts(), "hello there") {
			t.Fatalf("OpenHarness plain turn: %+v", oh)
		}
	})
	t.Run("plain turn over OpenAI", func(t *testing.T) {
		c := s.completion(t, "plain-oai", "hi OpenAI", false)
		if !strings.Contains(c.content(), "hi OpenAI") {
			t.Fatalf("OpenAI plain turn: %+v", c)
		}
	})
	t.Run("a conversation sent whole to the OpenAI endpoint", func(t *testing.T) {
		// A client of the OpenAI API sends the whole conversation each
		// time: the model gets all of it, tool call and result included,
		// whatever the backend keeps of its own.
		var c oaiCompletion
		msgs := []any{
			map[string]any{"role": "user", "content": "where is order 3?"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_hist", "type": "function",
				"function": map[string]any{"name": "lookup_order", "arguments": `{"order":"3"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_hist", "content": "order 3: shipped"},
			map[string]any{"role": "assistant", "content": "Order 3 has shipped."},
			map[string]any{"role": "user", "content": "thanks, that is all"},
		}
		if code := s.do(t, "POST", "/v1/chat/completions", map[string]any{"model": AgentID, "messages": msgs}, nil, &c); code != 200 {
			t.Fatalf("OpenAI conversation: %d %+v", code, c)
		}
		var got []string
		for _, m := range s.model.LastTranscript() {
			switch {
			case m.Role == llm.RoleSystem:
			case len(m.ToolCalls) > 0:
				got = append(got, "call "+m.ToolCalls[0].Name+" "+m.ToolCalls[0].ID)
			case m.Role == llm.RoleTool:
				got = append(got, "result "+m.ToolCallID+": "+m.Text())
			default:
				got = append(got, string(m.Role)+": "+m.Text())
			}
		}
		want := []string{"user: where is order 3?", "call lookup_order call_hist", "result call_hist: order 3: shipped",
			"assistant: Order 3 has shipped.", "user: thanks, that is all"}
		if !slices.Equal(got, want) {
			t.Fatalf("the model was sent %q, want the conversation %q", got, want)
		}
	})
	t.Run("images sent to the OpenAI endpoint", func(t *testing.T) {
		// An image by URL (with its detail) and one inline (a data:
		// URL), in history and in the new message, reach the model as
		// image blocks whatever the backend.
		const png = "data:image/png;base64,iVBORw0KGgo="
		msgs := []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "what is this?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png", "detail": "low"}}}},
			map[string]any{"role": "assistant", "content": "A cat."},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "and this?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": png}}}},
		}
		var c oaiCompletion
		if code := s.do(t, "POST", "/v1/chat/completions", map[string]any{"model": AgentID, "messages": msgs}, nil, &c); code != 200 {
			t.Fatalf("OpenAI images: %d %+v", code, c)
		}
		var got []string
		for _, m := range s.model.LastTranscript() {
			if m.Role != llm.RoleUser {
				continue
			}
			for _, b := range m.Content.Blocks() {
				switch {
				case b.Type == llm.BlockText:
					got = append(got, b.Text)
				case b.Source.Type == llm.SourceInline:
					got = append(got, "data:"+b.MediaType+";base64,"+b.Source.Base64Data)
				default:
					got = append(got, strings.TrimSpace(b.Source.URL+" "+string(b.Detail)))
				}
			}
		}
		want := []string{"what is this?", "https://example.com/a.png low", "and this?", png}
		if !slices.Equal(got, want) {
			t.Fatalf("the model was sent the user blocks %q, want %q", got, want)
		}
	})
	t.Run("tool turn over REST", func(t *testing.T) {
		out := s.lookup(t, "tools", "12")
		s.checkAdapterEvents(t, out.RunID, runtime.PhaseToolResult)
	})
	t.Run("tool turn over OpenAI, streamed", func(t *testing.T) {
		raw := s.completionStream(t, "tools-oai", "where is order 7?")
		for _, want := range []string{"event: " + server.ToolProgressEvent, "order 7: shipped", "data: [DONE]"} {
			if !strings.Contains(raw, want) {
				t.Fatalf("OpenAI stream lacks %q:\n%s", want, raw)
			}
		}
	})

	// An approval started on OpenHarness, approved over REST after a
	// restart.
	var signal string
	t.Run("approval started on OpenHarness", func(t *testing.T) {
		oh := s.openHarness(t, "r-refund", map[string]any{"session_id": "refund", "user_intent": "refund order 12"})
		signal = oh.signal()
		if oh.Response.Status != "success" || signal == "" {
			t.Fatalf("OpenHarness refund: no request_approval directive: %+v", oh)
		}
	})
	s.stop(t)
	s = start(t, cfg, path)
	t.Run("approved over REST after a restart", func(t *testing.T) {
		if signal == "" {
			t.Skip("no approval to give")
		}
		var out restOutcome
		code := s.do(t, "POST", "/v1/sessions/refund/signals", map[string]any{"signal_id": signal,
			"payload": map[string]any{"approval": map[string]any{"approved": true}}}, nil, &out)
		if code != 200 || out.Outcome != "completed" || !strings.Contains(out.text(), "refunded $30.00 for order 12") {
			t.Fatalf("REST approval: %d %+v", code, out)
		}
		run := s.run(t, out.RunID)
		if run.ParentID == "" || run.Status != runtime.StatusCompleted {
			t.Fatalf("resumed run: %+v", run)
		}
		s.checkAdapterEvents(t, out.RunID, runtime.PhaseToolResult)
		// The approved call starts, then answers, in the resumed run (an
		// inspector shows the call with its arguments).
		types := s.eventTypes(t, out.RunID)
		if i, j := strings.Index(types, ":"+runtime.PhaseToolStart), strings.Index(types, ":"+runtime.PhaseToolResult); i < 0 || j < i {
			t.Fatalf("the resumed run reports the approved call's result without its start: %s", types)
		}
		// agent.tool.start means the tool runs, as a native agent's: the
		// approved call starts once, in the resumed run; the suspended
		// run, where it awaited approval, shows no start of it.
		if n := strings.Count(types, ":"+runtime.PhaseToolStart); n != 1 {
			t.Errorf("the resumed run reports %d tool starts for one approved call: %s", n, types)
		}
		if paused := s.eventTypes(t, run.ParentID); strings.Contains(paused, ":"+runtime.PhaseToolStart) {
			t.Errorf("the suspended run reports a tool start for the call awaiting approval: %s", paused)
		}
	})
	t.Run("approval started on OpenAI, approved on OpenHarness", func(t *testing.T) {
		c := s.completion(t, "refund-oai", "please refund order 5", false)
		if c.XArmature.Outcome != "suspended" || c.XArmature.Suspended == nil || c.XArmature.RunID == "" {
			t.Fatalf("OpenAI refund: %+v", c)
		}
		oh := s.openHarness(t, "r-approve", map[string]any{"session_id": "refund-oai",
			"continuation": map[string]any{"run_id": c.XArmature.RunID},
			"extensions":   map[string]any{"dev.armature": map[string]any{"option": "approve"}}})
		if oh.Response.Status != "success" || !strings.Contains(oh.texts(), "refunded $30.00 for order 5") {
			t.Fatalf("OpenHarness approval: %+v", oh)
		}
	})
	t.Run("cancel a running turn", func(t *testing.T) {
		type result struct {
			code int
			out  restOutcome
		}
		done := make(chan result, 1)
		go func() {
			var r result
			r.code = s.doErr("POST", "/v1/sessions/slow/messages", map[string]any{"content": "answer " + SlowWord}, &r.out)
			done <- r
		}()
		select {
		case <-s.model.Blocked():
		case r := <-done:
			t.Fatalf("the slow turn ended before it blocked: %d %+v", r.code, r.out)
		}
		id := s.startedRun(t, "slow")
		var c struct {
			Cancelled bool `json:"cancelled"`
		}
		if code := s.do(t, "POST", "/v1/runs/"+id+"/cancel", nil, nil, &c); code != http.StatusAccepted || !c.Cancelled {
			t.Fatalf("cancel: %d %+v", code, c)
		}
		r := <-done
		if r.out.Outcome != "errored" || r.out.Error.Category != "invocation_cancelled" {
			t.Fatalf("cancelled turn: %d %+v", r.code, r.out)
		}
		if run := s.run(t, id); run.Status != runtime.StatusCancelled {
			t.Fatalf("cancelled run: %+v", run)
		}
	})
	t.Run("cancel a suspended turn", func(t *testing.T) {
		var out restOutcome
		s.do(t, "POST", "/v1/sessions/refund-cancel/messages", map[string]any{"content": "refund order 3"}, nil, &out)
		if out.Outcome != "suspended" || out.Signal.SignalID == "" {
			t.Fatalf("refund: %+v", out)
		}
		var c struct {
			Cancelled bool `json:"cancelled"`
		}
		if code := s.do(t, "POST", "/v1/runs/"+out.RunID+"/cancel", nil, nil, &c); code != http.StatusAccepted || !c.Cancelled {
			t.Fatalf("cancel: %d %+v", code, c)
		}
		var late restOutcome
		code := s.doErr("POST", "/v1/sessions/refund-cancel/signals", map[string]any{"signal_id": out.Signal.SignalID,
			"payload": map[string]any{"approval": map[string]any{"approved": true}}}, &late)
		if code != http.StatusNotFound {
			t.Fatalf("a cancelled approval resumed: %d %+v", code, late)
		}
		// The session goes on: the next message is a new turn.
		s.lookup(t, "refund-cancel", "3")
	})
	t.Run("a new message supersedes a pending approval", func(t *testing.T) {
		var out restOutcome
		s.do(t, "POST", "/v1/sessions/superseded/messages", map[string]any{"content": "refund order 8"}, nil, &out)
		if out.Outcome != "suspended" || out.Signal.SignalID == "" {
			t.Fatalf("refund: %+v", out)
		}
		s.lookup(t, "superseded", "8") // the superseding turn
		var late restOutcome
		if code := s.doErr("POST", "/v1/sessions/superseded/signals", map[string]any{"signal_id": out.Signal.SignalID,
			"payload": map[string]any{"approval": map[string]any{"approved": true}}}, &late); code != http.StatusNotFound {
			t.Fatalf("a superseded approval resumed: %d %+v", code, late)
		}
	})
	t.Run("a deleted session starts empty, upstream included", func(t *testing.T) {
		var out restOutcome
		if code := s.do(t, "POST", "/v1/sessions/forget/messages", map[string]any{"content": "my card is 4242"}, nil, &out); code != 200 || out.Outcome != "completed" {
			t.Fatalf("first turn: %d %+v", code, out)
		}
		if code := s.do(t, "DELETE", "/v1/sessions/forget", nil, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete: %d", code)
		}
		if code := s.do(t, "POST", "/v1/sessions/forget/messages", map[string]any{"content": "hello again"}, nil, &out); code != 200 || out.Outcome != "completed" {
			t.Fatalf("the turn after the delete: %d %+v", code, out)
		}
		var sent []llm.Message
		for _, m := range s.model.LastTranscript() {
			if m.Role != llm.RoleSystem {
				sent = append(sent, m)
			}
		}
		if len(sent) != 1 || sent[0].Text() != "hello again" {
			t.Fatalf("the model received %d messages after the delete, want the new one alone: %+v", len(sent), sent)
		}
	})
	t.Run("direct tool request", func(t *testing.T) {
		var out struct {
			RunID  string `json:"run_id"`
			Output string `json:"output"`
		}
		code := s.do(t, "POST", "/v1/agents/"+AgentID+"/tools/lookup_order", map[string]any{"arguments": map[string]any{"order": "9"}}, nil, &out)
		if code != 200 || !strings.Contains(out.Output, "order 9: shipped") {
			t.Fatalf("direct tool: %d %+v", code, out)
		}
		types := s.eventTypes(t, out.RunID)
		if !strings.Contains(types, runtime.EventToolDirectStarted) || !strings.Contains(types, runtime.EventToolDirectCompleted) {
			t.Fatalf("direct tool events: %s", types)
		}
		// The tenant may call lookup_order only.
		if code := s.doErr("POST", "/v1/agents/"+AgentID+"/tools/issue_refund", map[string]any{"arguments": map[string]any{"order": "9"}}, &out); code != http.StatusForbidden {
			t.Fatalf("an unauthorized direct tool request: %d", code)
		}
	})
	pending := responses(t, s)
	s.stop(t)
	s = start(t, cfg, path)
	t.Run("run records after a restart", func(t *testing.T) {
		for sess, want := range map[string]string{"refund": "completed suspended", "refund-oai": "completed suspended",
			"slow": "cancelled", "refund-cancel": "completed cancelled suspended", "tools": "completed", "superseded": "cancelled completed suspended"} {
			var runs struct {
				Runs []runtime.Run `json:"runs"`
			}
			s.do(t, "GET", "/v1/sessions/"+sess+"/runs", nil, nil, &runs)
			var got []string
			for _, r := range runs.Runs {
				got = append(got, string(r.Status))
			}
			if strings.Join(got, " ") != want {
				t.Errorf("session %s: runs %v, want %s", sess, got, want)
			}
		}
	})
	responsesAfterRestart(t, s, pending)
}

// instance is one server of the script over the store file.
type instance struct {
	cfg   Config
	srv   *server.Server
	ts    *httptest.Server
	rec   *runtime.Recorder
	store *sqlite.Store
	model *Model
	stop  func(t *testing.T)
}

// start serves cfg's agent over the store at path.
func start(t *testing.T, cfg Config, path string) *instance {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel()
	ag := &adapter.Agent{ID: AgentID, Backend: cfg.Backend, Model: "scripted", System: "You are the test agent.", Provider: m,
		Tools: Tools(), Config: cfg.Section}
	ws := &adapter.Workspace{Agents: []*adapter.Agent{ag}}
	reg := &adapter.Registry{}
	if err := reg.Register(cfg.Backend, cfg.Factory); err != nil {
		t.Fatal(err)
	}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: ws, Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: ws, Sessions: store,
		Records: store.Checkpoints(), Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workflow != "" {
		served.Workflow = cfg.Workflow
	}
	cfg.Workflow = served.Workflow
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{served},
		Sessions: store, Runs: rec, DirectTools: map[string][]string{server.DefaultTenant: {"lookup_order"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.RecoverRuns(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	in := &instance{cfg: cfg, srv: srv, ts: ts, rec: rec, store: store, model: m}
	stopped := false
	in.stop = func(t *testing.T) {
		if stopped {
			return
		}
		stopped = true
		ts.Close()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := srv.Stop(sctx); err != nil {
			t.Error(err)
		}
		if err := rec.Close(sctx); err != nil {
			t.Error(err)
		}
		if err := store.Close(sctx); err != nil {
			t.Error(err)
		}
	}
	return in
}

// do sends a JSON request and decodes a JSON answer into out (when
// set); it fails t on a transport error or a 5xx.
func (in *instance) do(t *testing.T, method, path string, body any, header map[string]string, out any) int {
	t.Helper()
	code, raw, err := in.send(method, path, body, header)
	if err != nil || code >= 500 {
		t.Fatalf("%s %s: %d %v\n%s", method, path, code, err, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	return code
}

// doErr is do for another goroutine: no t, any answer decoded.
func (in *instance) doErr(method, path string, body any, out any) int {
	code, raw, err := in.send(method, path, body, nil)
	if err != nil {
		return -1
	}
	_ = json.Unmarshal(raw, out)
	return code
}

func (in *instance) send(method, path string, body any, header map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, in.ts.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// lookup sends "where is order <order>?" over REST on session and fails
// t unless the turn completes with the order's lookup; it returns the
// turn's outcome.
func (in *instance) lookup(t *testing.T, session, order string) restOutcome {
	t.Helper()
	var out restOutcome
	if code := in.do(t, "POST", "/v1/sessions/"+session+"/messages", map[string]any{"content": "where is order " + order + "?"}, nil, &out); code != 200 ||
		out.Outcome != "completed" || !strings.Contains(out.text(), "order "+order+": shipped") {
		t.Fatalf("the REST turn looking up order %s in %s: %d %+v", order, session, code, out)
	}
	return out
}

// restOutcome is the REST rendering of a turn's outcome.
type restOutcome struct {
	Outcome string `json:"outcome"`
	RunID   string `json:"run_id"`
	Replies []struct {
		Content json.RawMessage `json:"content"`
	} `json:"replies"`
	Signal struct {
		SignalID string `json:"signal_id"`
	} `json:"signal"`
	Error struct {
		Category string `json:"category"`
	} `json:"error"`
}

func (o restOutcome) text() string {
	var b strings.Builder
	for _, r := range o.Replies {
		b.Write(r.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// ohAnswer is an OpenHarness response.
type ohAnswer struct {
	Response struct {
		Status           string `json:"status"`
		ActionDirectives []struct {
			ActionType string          `json:"action_type"`
			Payload    json.RawMessage `json:"payload"`
		} `json:"action_directives"`
	} `json:"response"`
}

func (o ohAnswer) texts() string {
	var b strings.Builder
	for _, d := range o.Response.ActionDirectives {
		b.Write(d.Payload)
		b.WriteByte('\n')
	}
	return b.String()
}

func (o ohAnswer) signal() string {
	for _, d := range o.Response.ActionDirectives {
		if d.ActionType == "request_approval" {
			var p struct {
				SignalID string `json:"signal_id"`
			}
			_ = json.Unmarshal(d.Payload, &p)
			return p.SignalID
		}
	}
	return ""
}

func (in *instance) openHarness(t *testing.T, requestID string, ctx map[string]any) ohAnswer {
	t.Helper()
	var oh ohAnswer
	if code := in.do(t, "POST", "/v1/openharness", map[string]any{"protocol_version": "1.0.0", "request_id": requestID,
		"request": map[string]any{"context": ctx}}, nil, &oh); code != 200 {
		t.Fatalf("OpenHarness %s: %d %+v", requestID, code, oh)
	}
	return oh
}

// oaiCompletion is an OpenAI chat completion with Armature's extension.
type oaiCompletion struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	XArmature struct {
		RunID     string `json:"run_id"`
		Outcome   string `json:"outcome"`
		Suspended *struct {
			SignalID string `json:"signal_id"`
		} `json:"suspended"`
	} `json:"x_armature"`
}

func (c oaiCompletion) content() string {
	if len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Message.Content
}

func (in *instance) completion(t *testing.T, session, text string, stream bool) oaiCompletion {
	t.Helper()
	var c oaiCompletion
	if code := in.do(t, "POST", "/v1/chat/completions", map[string]any{"model": AgentID, "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": text}}}, map[string]string{"X-Armature-Session-Id": session}, &c); code != 200 {
		t.Fatalf("OpenAI %q: %d %+v", text, code, c)
	}
	return c
}

func (in *instance) completionStream(t *testing.T, session, text string) string {
	t.Helper()
	code, raw, err := in.send("POST", "/v1/chat/completions", map[string]any{"model": AgentID, "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": text}}}, map[string]string{"X-Armature-Session-Id": session})
	if err != nil || code != 200 {
		t.Fatalf("OpenAI stream %q: %d %v\n%s", text, code, err, raw)
	}
	return string(raw)
}

func (in *instance) run(t *testing.T, id string) runtime.Run {
	t.Helper()
	var r runtime.Run
	if code := in.do(t, "GET", "/v1/runs/"+id, nil, nil, &r); code != 200 {
		t.Fatalf("run %s: %d", id, code)
	}
	return r
}

// startedRun returns the id of the session's run in status started.
func (in *instance) startedRun(t *testing.T, session string) string {
	t.Helper()
	var runs struct {
		Runs []runtime.Run `json:"runs"`
	}
	in.do(t, "GET", "/v1/sessions/"+session+"/runs", nil, nil, &runs)
	for _, r := range runs.Runs {
		if r.Status == runtime.StatusStarted {
			return r.ID
		}
	}
	t.Fatalf("session %s has no started run: %+v", session, runs.Runs)
	return ""
}

func (in *instance) events(t *testing.T, runID string) []runtime.Event {
	t.Helper()
	var evs struct {
		Events []runtime.Event `json:"events"`
	}
	if code := in.do(t, "GET", "/v1/runs/"+runID+"/events", nil, nil, &evs); code != 200 {
		t.Fatalf("events of %s: %d", runID, code)
	}
	return evs.Events
}

// eventTypes lists a run's event types (with agent.* phases).
func (in *instance) eventTypes(t *testing.T, runID string) string {
	t.Helper()
	return typesOf(in.events(t, runID))
}

// typesOf lists events' types (with agent.* phases).
func typesOf(evs []runtime.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Type)
		var d struct {
			Event struct {
				Phase string `json:"phase"`
			} `json:"event"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Event.Phase != "" {
			b.WriteString(":" + d.Event.Phase)
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// checkAdapterEvents checks a run's agent.* events: each carries the
// backend's adapter name, the first is agent.handoff, and phase, when
// set, is among them; with a workflow, the run brackets it with
// runtime.workflow.started and completed.
func (in *instance) checkAdapterEvents(t *testing.T, runID, phase string) {
	t.Helper()
	evs := in.events(t, runID)
	var phases []string
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
		if e.Type != runtime.EventAdapterEvent {
			continue
		}
		var d struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		p, _ := d.Event["phase"].(string)
		phases = append(phases, p)
		if got, _ := d.Event["adapter"].(string); got != in.cfg.Backend {
			t.Errorf("run %s: %s event's adapter is %q, want %q", runID, p, got, in.cfg.Backend)
		}
	}
	if len(phases) == 0 || (phases[0] != runtime.PhaseHandoff && types[1] != runtime.EventApprovalResolved) {
		t.Errorf("run %s: phases %v", runID, phases)
	}
	if phase != "" && !strings.Contains(strings.Join(phases, " "), phase) {
		t.Errorf("run %s: no %s among %v", runID, phase, phases)
	}
	var arts []string
	for _, e := range evs {
		if e.Type == runtime.EventArtifactCreated {
			var d struct {
				Artifact runtime.Artifact `json:"artifact"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Artifact.ID == "" {
				t.Errorf("run %s: artifact event %s: %v", runID, e.Data, err)
			}
			arts = append(arts, d.Artifact.ID)
		}
	}
	if len(arts) > 0 {
		var out struct {
			Artifacts []runtime.Artifact `json:"artifacts"`
		}
		_ = json.Unmarshal(in.run(t, runID).Output, &out)
		var got []string
		for _, a := range out.Artifacts {
			got = append(got, a.ID)
		}
		if strings.Join(got, " ") != strings.Join(arts, " ") {
			t.Errorf("run %s: output artifacts %v, events %v", runID, got, arts)
		}
		t.Logf("run %s: artifacts %v", runID, got)
	}
	if in.cfg.Workflow != "" {
		joined := strings.Join(types, " ")
		if !strings.Contains(joined, runtime.EventWorkflowStarted) || !strings.Contains(joined, runtime.EventWorkflowCompleted) {
			t.Errorf("run %s: no workflow events in %s", runID, joined)
		}
	}
}
