package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// directToolGatewayTool is a gateway tool named name that runs call.
func directToolGatewayTool(name string, call func(ctx context.Context, args json.RawMessage) (string, error)) agent.Tool {
	return agent.Tool{Definition: llm.Tool{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object"}`)}, Call: call}
}

// directToolServer serves the demo agent with gateway tools, every tool
// callable directly by the default tenant.
func directToolServer(t *testing.T, tools ...agent.Tool) (*server.Server, *httptest.Server) {
	t.Helper()
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	srv, err := server.New(server.Config{Sessions: store, Agents: []*server.Agent{
		{ID: "demo", Chat: servertest.Harness(t, store, a), Model: demo.ModelName, Gateway: append(demo.Tools(), tools...)}},
		DirectTools: map[string][]string{server.DefaultTenant: {"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return srv, ts
}

// directToolPost posts body as JSON to path and returns the status and
// the response body.
func directToolPost(ts *httptest.Server, path, body string) (int, []byte, error) {
	req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer r.Body.Close()
	raw, err := io.ReadAll(r.Body)
	return r.StatusCode, raw, err
}

// directToolRuns lists the default tenant's runs of a session.
func directToolRuns(t *testing.T, srv *server.Server, session string) []runtime.Run {
	t.Helper()
	resp, err := srv.Runs(context.Background(), runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Runs
}

// TestDirectToolCancelEndsRunCancelled checks that POST
// /v1/runs/{id}/cancel of a running direct tool call answers
// {"cancelled": true}, stops the tool (its context ends with
// runtime.ErrCancelled) and ends the run as cancelled, with
// runtime.request.cancelled as its last event, as every other run
// cancelled by request does (Recorder.Cancel: "the turn ends as
// cancelled"). Recording it as completed would hide that the call was
// cut short.
func TestDirectToolCancelEndsRunCancelled(t *testing.T) {
	entered := make(chan struct{})
	srv, ts := directToolServer(t, directToolGatewayTool("block", func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(entered)
		<-ctx.Done()
		return "", context.Cause(ctx)
	}))
	type answer struct {
		status int
		raw    []byte
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		st, raw, err := directToolPost(ts, "/v1/agents/demo/tools/block", `{"arguments":{},"session_id":"dt-cancel"}`)
		done <- answer{st, raw, err}
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool was not called within 5s")
	}
	runs := directToolRuns(t, srv, "dt-cancel")
	if len(runs) != 1 {
		t.Fatalf("runs of the session while the tool runs: got %+v; want 1", runs)
	}
	st, raw, err := directToolPost(ts, "/v1/runs/"+runs[0].ID+"/cancel", "")
	if err != nil || st != http.StatusAccepted || !strings.Contains(string(raw), `"cancelled":true`) {
		t.Fatalf("cancel: got %d %s, error %v; want %d with \"cancelled\":true", st, raw, err, http.StatusAccepted)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the direct call did not return within 5s of its cancel")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	run, err := srv.Run(context.Background(), server.DefaultTenant, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := srv.Events(context.Background(), runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: run.ID})
	last := ""
	if len(evs) > 0 {
		last = evs[len(evs)-1].Type
	}
	if run.Status != runtime.StatusCancelled || last != runtime.EventRequestCancelled || !strings.Contains(string(evs[len(evs)-1].Data), `"cause":"requested"`) {
		t.Errorf("a cancelled direct tool call's run: got status %q, last event %q (answer %d %s); want %q, %s with cause requested",
			run.Status, last, a.status, a.raw, runtime.StatusCancelled, runtime.EventRequestCancelled)
	}
}

// TestDirectToolPanicAnswersAndEndsRun checks that a direct call of a
// gateway tool that panics still answers 200, with the failure in its
// error field, and that its run ends (runtime.tool.direct.completed with
// the error, then the run's end). In a turn the agent recovers the same
// panic (agent.call: "error: the tool failed: ..."); unrecovered, it
// would drop the client's connection and leave the run started among the
// recorder's live turns until the next start's reconcile.
func TestDirectToolPanicAnswersAndEndsRun(t *testing.T) {
	srv, ts := directToolServer(t, directToolGatewayTool("boom", func(context.Context, json.RawMessage) (string, error) {
		panic("the tool's bug")
	}))
	st, raw, err := directToolPost(ts, "/v1/agents/demo/tools/boom", `{"arguments":{},"session_id":"dt-panic"}`)
	if err != nil || st != http.StatusOK {
		t.Errorf("a direct call of a panicking tool: got status %d, body %s, error %v; want %d with an answer naming the failure", st, raw, err, http.StatusOK)
	}
	var runs []runtime.Run
	deadline := time.Now().Add(2 * time.Second)
	for {
		runs = directToolRuns(t, srv, "dt-panic")
		if len(runs) == 1 && runs[0].Status != runtime.StatusStarted || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(runs) != 1 || runs[0].Status == runtime.StatusStarted {
		t.Errorf("the run of a direct call whose tool panicked: got %+v; want 1 run, ended (failed or completed with the error)", runs)
	}
}

// TestDirectToolBoundedLikeAgentCalls checks that a direct call runs the
// gateway tool with a deadline and cuts its result, as the agent bounds
// every call of the same tool in a turn (agent.Config.ToolTimeout,
// default 2m; MaxToolResultBytes, default 256 KiB: armature serve's
// tool_timeout / max_tool_result_bytes). Unbounded, a hung tool called
// directly would hold its request, its run and a Stop's grace forever,
// and a huge result would go whole into the run's event and output.
func TestDirectToolBoundedLikeAgentCalls(t *testing.T) {
	var hadDeadline bool
	big := strings.Repeat("x", agent.DefaultMaxToolResultBytes+1024)
	_, ts := directToolServer(t, directToolGatewayTool("probe", func(ctx context.Context, _ json.RawMessage) (string, error) {
		_, hadDeadline = ctx.Deadline()
		return big, nil
	}))
	st, raw, err := directToolPost(ts, "/v1/agents/demo/tools/probe", `{"arguments":{},"session_id":"dt-bounds"}`)
	if err != nil || st != http.StatusOK {
		t.Fatalf("direct call: got %d, error %v; want %d", st, err, http.StatusOK)
	}
	var resp struct{ Output string }
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if !hadDeadline {
		t.Errorf("a direct tool call got no deadline; want one, as the agent bounds the same call by its tool timeout (default %v)", agent.DefaultToolTimeout)
	}
	if len(resp.Output) > agent.DefaultMaxToolResultBytes+200 {
		t.Errorf("a direct tool call's result: got %d bytes; want it cut to about %d bytes, as the agent cuts the same result", len(resp.Output), agent.DefaultMaxToolResultBytes)
	}
}

// TestDeleteDuringDirectToolPurgesRun checks that DELETE
// /v1/sessions/{id}, sent while a direct tool call on that session runs,
// answers 204 and purges the call's run (its arguments and output are in
// its events), as it purges a settled turn that ends just after it or a
// suspension's resolution run. The call started before the delete, so it
// belongs to the deleted conversation and must not stay listed under it.
func TestDeleteDuringDirectToolPurgesRun(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv, ts := directToolServer(t, directToolGatewayTool("slow", func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(entered)
		<-release
		return "secret customer data", nil
	}))
	done := make(chan error, 1)
	go func() {
		_, _, err := directToolPost(ts, "/v1/agents/demo/tools/slow", `{"arguments":{"card":"4111111111111111"},"session_id":"dt-del"}`)
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool was not called within 5s")
	}
	// The tool returns shortly after the delete was sent (a delete may
	// wait for it, as it waits for a settled turn's end).
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	req, _ := http.NewRequest("DELETE", ts.URL+"/v1/sessions/dt-del", nil)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: got %d, want %d", r.StatusCode, http.StatusNoContent)
	}
	if runs := directToolRuns(t, srv, "dt-del"); len(runs) != 0 {
		evs, _ := srv.Events(context.Background(), runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: runs[0].ID})
		var kept []string
		for _, ev := range evs {
			kept = append(kept, ev.Type+" "+string(ev.Data))
		}
		t.Errorf("the deleted session: got %d run(s), status %q, events %q; want none", len(runs), runs[0].Status, kept)
	}
}

// TestDirectToolRefusedAfterStop checks that once the runtime is
// stopped (RuntimeLifecycle.Stop: "stops accepting turns"), a direct tool
// request is refused with 503 unavailable, without running the tool or
// recording a run, as a turn on any surface is refused: a direct call
// is a side effect like a turn's tool call, and must not slip past a
// shutdown that the turn routes honour.
func TestDirectToolRefusedAfterStop(t *testing.T) {
	var calls int
	srv, ts := directToolServer(t, directToolGatewayTool("count", func(context.Context, json.RawMessage) (string, error) {
		calls++
		return "counted", nil
	}))
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, raw, err := directToolPost(ts, "/v1/agents/demo/tools/count", `{"arguments":{},"session_id":"dt-stopped"}`)
	if err != nil {
		t.Fatal(err)
	}
	if st != http.StatusServiceUnavailable || calls != 0 || len(directToolRuns(t, srv, "dt-stopped")) != 0 {
		t.Errorf("a direct tool request after Stop: got %d %s, the tool ran %d times, runs %d; want 503 unavailable, nothing run or recorded",
			st, raw, calls, len(directToolRuns(t, srv, "dt-stopped")))
	}
}

// TestTurnRefusedAfterStop checks that after Stop (RuntimeLifecycle:
// "stops accepting turns, lets those in flight end within ctx"; Submit
// then answers ErrStopped) the server's HTTP surfaces refuse turns too: a
// message posted to srv.Handler() answers 503 unavailable, as Serve's
// shutdown does, and no run is recorded. An embedded server that serves
// Handler() on its own http.Server and calls Stop to shut down must not
// keep taking turns on connections still open.
func TestTurnRefusedAfterStop(t *testing.T) {
	srv, ts := directToolServer(t)
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, raw, err := directToolPost(ts, "/v1/sessions/after-stop/messages", `{"content":"where is order 7?"}`)
	if err != nil {
		t.Fatal(err)
	}
	if runs := directToolRuns(t, srv, "after-stop"); st != http.StatusServiceUnavailable || len(runs) != 0 {
		t.Errorf("a message after Stop: got %d %s, %d run(s) recorded; want 503 unavailable and no turn", st, raw, len(runs))
	}
}
