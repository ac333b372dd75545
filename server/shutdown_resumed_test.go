package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// hangAfterTool is the demo model, except that its answer to a
// tool result hangs until the turn is cancelled (a slow upstream).
type hangAfterTool struct{ demo.Model }

func answersTool(req *llm.Request) bool {
	n := len(req.Messages)
	return n > 0 && req.Messages[n-1].Role == llm.RoleTool
}

func (m hangAfterTool) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if !answersTool(req) {
		return m.Model.Complete(ctx, req)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (m hangAfterTool) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	if !answersTool(req) {
		return m.Model.Stream(ctx, req)
	}
	return func(yield func(*llm.Chunk, error) bool) {
		<-ctx.Done()
		yield(nil, ctx.Err())
	}
}

// An approval sent through the Responses API resumes its turn, the
// approved refund runs, and the server's graceful shutdown then cancels
// the turn (the reply after the refund was still coming). The answer is
// 503 invocation_cancelled, final: X-Should-Retry: false and no
// Retry-After, and its message names the resumed turn's response. A
// retryable 503 had the openai SDK send the approval again after the
// restart, to be refused 409 for its own approval that ran.
func TestShutdownAfterApprovalTookEffectIsFinal(t *testing.T) {
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
		req.Header.Set("X-Stainless-Retry-Count", "0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	_, b := post(`{"model":"demo","input":"please refund order 7"}`)
	var first struct {
		ID     string `json:"id"`
		Output []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"output"`
		X struct {
			SessionID string `json:"session_id"`
		} `json:"x_armature"`
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
	if approval == "" {
		t.Fatalf("no approval request: %s", b)
	}
	go func() {
		time.Sleep(500 * time.Millisecond) // the refund has run; the reply after it hangs
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = srv.Stop(ctx)
	}()
	resp, b := post(fmt.Sprintf(`{"model":"demo","previous_response_id":%q,"input":[{"type":"mcp_approval_response","approval_request_id":%q,"approve":true}]}`, first.ID, approval))
	hr, err := http.Get(ts.URL + "/v1/sessions/" + first.X.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	hist, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	if !strings.Contains(string(hist), "refunded $30.00") {
		t.Fatalf("the refund did not run (%d %s): %s", resp.StatusCode, b, hist)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(server.ShouldRetryHeader) != "false" || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("the approved refund ran, yet the answer %d (Retry-After %q, X-Should-Retry %q) has the SDK send the approval again, which can only be refused 409: %s",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(server.ShouldRetryHeader), b)
	}
	var e struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.Error.Code != "invocation_cancelled" || e.Error.Type != "server_error" ||
		!strings.Contains(e.Error.Message, "cancelled") || !strings.Contains(e.Error.Message, "(response ") {
		t.Fatalf("the answer: %s", b)
	}
}
