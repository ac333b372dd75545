package adk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

func a57do(t *testing.T, method, url string, body any) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// TestServerCancelWhileApprovedCallRuns: over armature serve's
// stack (server.NewAdapterAgent, SQLite store, ADK-Go SQLite sessions),
// an approval resumes the turn, the approved refund starts, and
// POST /v1/runs/{id}/cancel arrives while it runs; the refund then
// completes. The run's events record the approval and the refund's
// start, yet the session tells the model "Not run: the request was
// cancelled before it was approved."
func TestServerCancelWhileApprovedCallRuns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "armature.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(ctx)
	m := &orderScript{}
	tl := &slowRefund{started: make(chan struct{}, 1), release: make(chan struct{})}
	section := `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(dir, "adk.db")) + `}}`
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Model: "m", Provider: m, Tools: []agent.Tool{tl.tool()}, Config: json.RawMessage(section)}
	ws := &adapter.Workspace{Agents: []*adapter.Agent{ag}}
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: ws, Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	defer a.(*adk.Adapter).Close()
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: ws, Sessions: store,
		Records: store.Checkpoints(), Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{served}, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	code, out := a57do(t, "POST", ts.URL+"/v1/sessions/s1/messages", map[string]any{"content": "refund one 7"})
	sig, _ := out["signal"].(map[string]any)
	if code != 200 || sig == nil {
		t.Fatalf("send: %d %v", code, out)
	}
	done := make(chan map[string]any, 1)
	go func() {
		_, o := a57do(t, "POST", ts.URL+"/v1/sessions/s1/signals", map[string]any{"signal_id": sig["signal_id"], "payload": map[string]any{"approval": map[string]any{"approved": true}}})
		done <- o
	}()
	<-tl.started
	// the running child run
	var runID string
	for i := 0; i < 50 && runID == ""; i++ {
		_, runs := a57do(t, "GET", ts.URL+"/v1/sessions/s1/runs", nil)
		list, _ := runs["runs"].([]any)
		for _, r := range list {
			r := r.(map[string]any)
			if r["status"] == "started" {
				runID = r["id"].(string)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if runID == "" {
		t.Fatal("no running run")
	}
	code, cout := a57do(t, "POST", ts.URL+"/v1/runs/"+runID+"/cancel", map[string]any{})
	t.Logf("cancel: %d %v", code, cout)
	time.Sleep(100 * time.Millisecond)
	close(tl.release) // the refund went through
	t.Logf("signal answer: %v", <-done)
	time.Sleep(200 * time.Millisecond)
	_, ev := a57do(t, "GET", ts.URL+"/v1/runs/"+runID+"/events", nil)
	evb, _ := json.Marshal(ev)
	t.Logf("run events: %s", evb)
	_, sess := a57do(t, "GET", ts.URL+"/v1/sessions/s1", nil)
	sb, _ := json.Marshal(sess["messages"])
	t.Logf("session: %s", sb)
	code, again := a57do(t, "POST", ts.URL+"/v1/sessions/s1/signals", map[string]any{"signal_id": sig["signal_id"], "payload": map[string]any{"approval": map[string]any{"approved": true}}})
	t.Logf("the same approval again (the answer said retryable): %d %v", code, again)
	a57do(t, "POST", ts.URL+"/v1/sessions/s1/messages", map[string]any{"content": "did my refund go through?"})
	_, sess = a57do(t, "GET", ts.URL+"/v1/sessions/s1", nil)
	sb, _ = json.Marshal(sess["messages"])
	reqs := m.requests()
	var shape []string
	for _, msg := range reqs[len(reqs)-1] {
		shape = append(shape, string(msg.Role)+":"+msg.Text())
	}
	t.Logf("the model's request for the next message: %q", shape)
	if tl.count() != 1 {
		t.Fatalf("refund ran %d times", tl.count())
	}
	if strings.Contains(string(sb), "cancelled before it was approved") || !strings.Contains(string(sb), "refunded order 7") {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = srv.Stop(sctx)
		_ = rec.Close(sctx)
		t.Fatalf("the refund was approved and ran (run events: approval resolved, tool start), but the session says: %s", sb)
	}
}
