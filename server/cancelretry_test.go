package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
)

// A non-streamed request on the OpenAI endpoints whose run is cancelled
// (POST /v1/runs/{id}/cancel) answers invocation_cancelled with
// X-Should-Retry: false and no Retry-After, so that the official SDKs,
// which retry a 503 on their own, do not run again what someone stopped
// (with the SDK's Idempotency-Key, the retry ran the cancelled turn
// again). A turn the server's shutdown cancelled stays retryable: another
// replica, or this one restarted, may run it.
func TestCancelledRequestIsNotRetried(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: stallModel{}})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	srv, err := server.New(server.Config{
		Agents:   []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a), Model: demo.ModelName}},
		Sessions: store,
		Tokens:   []server.Token{{Secret: oaiToken, Tenant: "acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	// send starts a non-streamed request on path and returns its answer
	// once the run it started is ended by end (given the run's id).
	send := func(path, body, session string, end func(runID string)) (*http.Response, []byte) {
		t.Helper()
		type answer struct {
			resp *http.Response
			raw  json.RawMessage
		}
		answered := make(chan answer, 1)
		go func() {
			var raw json.RawMessage
			resp := call(t, ts, "POST", path, body, map[string]string{"X-Armature-Session-Id": session}, &raw)
			answered <- answer{resp, raw}
		}()
		var runs struct {
			Runs []struct{ ID string } `json:"runs"`
		}
		for deadline := time.Now().Add(5 * time.Second); len(runs.Runs) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no run", path)
			}
			call(t, ts, "GET", "/v1/sessions/"+session+"/runs", "", nil, &runs)
		}
		end(runs.Runs[0].ID)
		a := <-answered
		return a.resp, a.raw
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body := `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`
		if path == "/v1/responses" {
			body = `{"model":"demo","input":"hello"}`
		}
		session := "cancel-retry-" + strings.ReplaceAll(strings.Trim(path, "/"), "/", "-")
		resp, raw := send(path, body, session, func(id string) { call(t, ts, "POST", "/v1/runs/"+id+"/cancel", `{}`, nil, nil) })
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(raw), `"invocation_cancelled"`) {
			t.Errorf("%s cancelled: %d %s", path, resp.StatusCode, raw)
		}
		if got := resp.Header.Get(server.ShouldRetryHeader); got != "false" {
			t.Errorf("%s cancelled: X-Should-Retry %q, want false (the SDKs would send the request again)", path, got)
		}
		if got := resp.Header.Get("Retry-After"); got != "" {
			t.Errorf("%s cancelled: Retry-After %q, want none", path, got)
		}
	}

	// The server stops, out of grace: the turn it cancels may be retried.
	resp, raw := send("/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`, "cancel-retry-shutdown", func(string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Stop(ctx)
	})
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(raw), `"invocation_cancelled"`) {
		t.Errorf("shutdown: %d %s", resp.StatusCode, raw)
	}
	if got := resp.Header.Get(server.ShouldRetryHeader); got == "false" {
		t.Errorf("shutdown: X-Should-Retry false: the SDKs would not retry a turn another server could run")
	}
	if got := resp.Header.Get("Retry-After"); got == "" {
		t.Errorf("shutdown: no Retry-After")
	}
}
