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
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// Two end users of one app (one tenant token, stateless first requests,
// no session header) send the same first message with the official SDK;
// user A's first attempt fails transiently (503), user B's identical
// request runs, then A's SDK retries (X-Stainless-Retry-Count: 1). A's
// retry cannot be told from a retry of B's request, so it runs a turn
// of its own, in a session of its own: joining B's would hand A B's
// answer and session, and A's next turn B's messages.
func TestSDKRetryOfASharedFirstMessageRunsItsOwnTurn(t *testing.T) {
	p := llmtest.New(
		llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "complete", StatusCode: 503, Message: "overloaded"}),
		llmtest.Reply("Hello! How can I help with your account?"),
		llmtest.Reply("Noted."),
		llmtest.Reply("You asked what you just said."),
	)
	a, err := agent.New(agent.Config{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	send := func(body, session, attempt string) (int, string, string) {
		req, err := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+oaiToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.RetryCountHeader, attempt)
		if session != "" {
			req.Header.Set(server.SessionHeader, session)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(server.SessionHeader), string(raw)
	}
	first := `{"model":"demo","messages":[{"role":"user","content":"Hi, I need help with my account."}]}`
	if code, _, raw := send(first, "", "0"); code != http.StatusServiceUnavailable { // user A, attempt 0
		t.Fatalf("setup: A's first attempt: %d %s", code, raw)
	}
	codeB, sessB, rawB := send(first, "", "0") // user B, a request of its own
	codeA, sessA, rawA := send(first, "", "1") // user A's automatic retry
	if codeA != 200 || codeB != 200 {
		t.Fatalf("setup: A %d %s, B %d %s", codeA, rawA, codeB, rawB)
	}
	send(`{"model":"demo","messages":[{"role":"user","content":"My card number is 4111 1111 1111 1111."}]}`, sessB, "0")
	send(`{"model":"demo","messages":[{"role":"user","content":"What did I just say?"}]}`, sessA, "0")
	reqs := p.Requests()
	seen, _ := json.Marshal(reqs[len(reqs)-1].Messages)
	if sessA == sessB || strings.Contains(string(seen), "4111") {
		t.Errorf("user A's SDK retry was given user B's session (A %s, B %s); A's next model call was sent B's messages: %s", sessA, sessB, seen)
	}
}

// The same on two replicas: A's retry goes to a replica that took
// neither first attempt, which finds two first attempts of its print in
// the run records; it runs a turn of its own rather than joining B's.
func TestSDKRetryOfASharedFirstMessageOnAnotherReplica(t *testing.T) {
	p := llmtest.New(
		llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "complete", StatusCode: 503, Message: "overloaded"}),
		llmtest.Reply("Hello! How can I help with your account?"),
		llmtest.Reply("Hello again."),
	)
	a, err := agent.New(agent.Config{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	var urls []string
	for range 2 {
		srv, _ := serveOn(t, store, a, "demo")
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL)
	}
	send := func(base, attempt string) (int, string) {
		body := `{"model":"demo","messages":[{"role":"user","content":"Hi, I need help with my account."}]}`
		req, err := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.RetryCountHeader, attempt)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(server.SessionHeader)
	}
	if code, _ := send(urls[0], "0"); code != http.StatusServiceUnavailable {
		t.Fatalf("setup: A's first attempt: %d", code)
	}
	codeB, sessB := send(urls[0], "0")
	// The replica's run records are written behind the turns: make
	// sure both first attempts' are there.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		runs, err := store.Runs().ListRuns(context.Background(), runtime.ListRunsRequest{Tenant: server.DefaultTenant})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Runs) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs recorded: %d", len(runs.Runs))
		}
	}
	codeA, sessA := send(urls[1], "1")
	if codeA != 200 || codeB != 200 || sessA == "" || sessA == sessB {
		t.Fatalf("A's retry on another replica: %d in session %q; B: %d in %q: want two sessions", codeA, sessA, codeB, sessB)
	}
}

// One conversation (a session header) sends the same message twice:
// the first completes on one replica, the second, a new request, runs
// on another, and its SDK retry comes back to the first replica. The
// retry joins the later first attempt, found in the run records,
// rather than answering the earlier turn this replica remembers (or
// running the turn a third time).
func TestSDKRetryJoinsTheLaterFirstAttemptOnAnotherReplica(t *testing.T) {
	p := llmtest.New(llmtest.Reply("first answer"), llmtest.Reply("second answer"), llmtest.Reply("third answer"))
	a, err := agent.New(agent.Config{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	var urls []string
	for range 2 {
		srv, _ := serveOn(t, store, a, "demo")
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL)
	}
	send := func(base, attempt string) string {
		body := `{"model":"demo","messages":[{"role":"user","content":"again?"}]}`
		req, err := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.RetryCountHeader, attempt)
		req.Header.Set(server.SessionHeader, "conv-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil || len(out.Choices) == 0 {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		return out.Choices[0].Message.Content
	}
	if got := send(urls[0], "0"); got != "first answer" {
		t.Fatalf("setup: %q", got)
	}
	time.Sleep(10 * time.Millisecond) // the later attempt starts later
	if got := send(urls[1], "0"); got != "second answer" {
		t.Fatalf("setup: %q", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		runs, err := store.Runs().ListRuns(context.Background(), runtime.ListRunsRequest{Tenant: server.DefaultTenant})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Runs) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs recorded: %d", len(runs.Runs))
		}
	}
	if got := send(urls[0], "1"); got != "second answer" || p.Calls() != 2 {
		t.Fatalf("the retry on the first replica: %q after %d model calls; want the later attempt's answer, 2 calls", got, p.Calls())
	}
}
