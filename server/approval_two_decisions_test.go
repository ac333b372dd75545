package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
)

// TestShutdownDoesNotTellAWaitingDecisionItTookEffect: client A approves
// a refund through the Responses API; the refund runs and the reply
// after it hangs (A holds the session). Client B denies the same
// request meanwhile: B's denial waits for the session. The server's
// graceful shutdown then cancels both. B's denial never resumed
// anything (A's approval did, and the refund ran), yet takenUp finds the
// paused record gone (A's resume retired it) and answers B final with
// "...after your decision was taken up. The decision cannot be given
// again": the client that denied is told its denial took effect.
//
// The order of A's retirement of the record and B's look at it is a race:
// the test tries 8 times and fails on the first wrong answer (it
// showed on about one attempt in four here).
func TestShutdownDoesNotTellAWaitingDecisionItTookEffect(t *testing.T) {
	for i := 0; i < 8; i++ {
		if bad := twoDecisions(t); bad != "" {
			t.Fatalf("attempt %d: B's denial resumed nothing (A's approval ran the refund), yet B is told, final (X-Should-Retry: false): %s", i+1, bad)
		}
	}
}

func twoDecisions(t *testing.T) string {
	a, err := agent.New(agent.Config{Provider: hangAfterTool{}, System: "demo", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a)}}, Sessions: store})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	post := func(body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	_, b := post(`{"model":"demo","input":"please refund order 7"}`)
	var first struct {
		ID     string                      `json:"id"`
		Output []struct{ Type, ID string } `json:"output"`
	}
	if err := json.Unmarshal(b, &first); err != nil {
		t.Fatal(err)
	}
	approval := ""
	for _, o := range first.Output {
		if o.Type == "mcp_approval_request" {
			approval = o.ID
		}
	}
	decide := func(approve bool) string {
		return fmt.Sprintf(`{"model":"demo","previous_response_id":%q,"input":[{"type":"mcp_approval_response","approval_request_id":%q,"approve":%v}]}`, first.ID, approval, approve)
	}
	var wg sync.WaitGroup
	var aResp, bResp *http.Response
	var aBody, bBody []byte
	wg.Add(2)
	go func() { defer wg.Done(); aResp, aBody = post(decide(true)) }()
	time.Sleep(300 * time.Millisecond) // A's refund has run; its reply hangs
	go func() { defer wg.Done(); bResp, bBody = post(decide(false)) }()
	time.Sleep(500 * time.Millisecond) // B waits for the session
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_ = srv.Stop(ctx)
	cancel()
	wg.Wait()
	if aResp == nil || bResp == nil {
		t.Fatal("no answers")
	}
	t.Logf("A (approve): %d X-Should-Retry %q %s", aResp.StatusCode, aResp.Header.Get(server.ShouldRetryHeader), aBody)
	t.Logf("B (deny):    %d X-Should-Retry %q %s", bResp.StatusCode, bResp.Header.Get(server.ShouldRetryHeader), bBody)
	if strings.Contains(string(bBody), "decision was taken up") || strings.Contains(string(bBody), "decision took effect") {
		return string(bBody)
	}
	return ""
}
