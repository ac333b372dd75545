package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// An agent with a call-level retry policy (agent.Config.Retry) whose
// model call fails transiently mid-stream (a dropped connection after
// some text): a stream: true client of /v1/chat/completions was sent
// that text, so the call is not retried (a retry's answer appended to
// it would be neither answer): the turn fails, the stream ends with its
// error, and the session stores no answer the client was not shown.
func TestStreamedModelCallIsNotRetriedAfterItsText(t *testing.T) {
	dropped := llmtest.Step{Chunks: []*llm.Chunk{{Content: "The refund policy is thir"}},
		Err: &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "stream", Message: "connection reset"}}
	p := llmtest.New(dropped, llmtest.Reply("Refunds are accepted within 30 days."))
	a, err := agent.New(agent.Config{Provider: p,
		Retry: &llm.RetryPolicy{MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	req, err := http.NewRequest("POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"what is the refund policy?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Armature-Session-Id", "r1")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var streamed strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &ch) == nil && len(ch.Choices) > 0 {
			streamed.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	var sess struct {
		Messages []llm.Message `json:"messages"`
	}
	call(t, ts, "GET", "/v1/sessions/r1", "", nil, &sess)
	stored := ""
	if n := len(sess.Messages); n > 0 {
		stored = sess.Messages[n-1].Text()
	}
	if p.Calls() != 1 {
		t.Fatalf("%d model calls, want 1 (no retry once text was streamed)", p.Calls())
	}
	if !strings.HasPrefix(streamed.String(), "The refund policy is thir") || strings.Contains(streamed.String(), "Refunds are") {
		t.Errorf("the streamed content is %q, want the failed attempt's text alone", streamed.String())
	}
	if stored != "" && stored != "what is the refund policy?" {
		t.Errorf("the session stores %q, an answer the client was not streamed", stored)
	}
}

// The same on /v1/responses with stream: true: the
// response.output_text.delta events carry the failed attempt's text,
// and no response.output_text.done (nor a completed response)
// contradicts them with a retry's.
func TestStreamedModelCallIsNotRetriedAfterItsTextResponses(t *testing.T) {
	dropped := llmtest.Step{Chunks: []*llm.Chunk{{Content: "The refund policy is thir"}},
		Err: &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "stream", Message: "connection reset"}}
	p := llmtest.New(dropped, llmtest.Reply("Refunds are accepted within 30 days."))
	a, err := agent.New(agent.Config{Provider: p,
		Retry: &llm.RetryPolicy{MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	req, err := http.NewRequest("POST", ts.URL+"/v1/responses",
		strings.NewReader(`{"model":"demo","stream":true,"input":"what is the refund policy?"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var deltas strings.Builder
	done := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
			Text  string `json:"text"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.output_text.done":
			done = ev.Text
		}
	}
	if done != "" && deltas.String() != done {
		t.Errorf("response.output_text.delta events add up to %q, but response.output_text.done says %q", deltas.String(), done)
	}
	if p.Calls() != 1 {
		t.Errorf("%d model calls, want 1 (no retry once text was streamed)", p.Calls())
	}
}
