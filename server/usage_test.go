package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// TestUsageAndFinishReason: the usage and finish reason the model
// reported reach the OpenAI-compatible answer (usage, finish_reason
// length, the include_usage chunk), OpenHarness's extension and the run
// record, summed over the turn's model calls.
func TestUsageAndFinishReason(t *testing.T) {
	step := func(text string, in, out int, finish llm.FinishReason) llmtest.Step {
		s := llmtest.Reply(text)
		s.Response.Usage = llm.Usage{PromptTokens: new(in), CompletionTokens: new(out), TotalTokens: new(in + out), CachedTokens: new(3)}
		s.Response.FinishReason = finish
		return s
	}
	tool := llmtest.CallTools(llm.ToolCall{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)})
	tool.Response.Usage = llm.Usage{PromptTokens: new(10), CompletionTokens: new(5), TotalTokens: new(15)}
	p := llmtest.New(
		tool, step("cut short", 20, 100, llm.FinishLength), // turn 1: two calls
		step("streamed", 7, 2, llm.FinishStop),    // turn 2
		step("oh", 4, 1, llm.FinishContentFilter), // turn 3
	)
	lookup, err := agent.NewTool("lookup_order", "Look up an order.", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "shipped", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Provider: p, Tools: []agent.Tool{lookup}})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a)
	post := func(path, body string) []byte {
		t.Helper()
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	var c struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
			Details     struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	json.Unmarshal(post("/v1/chat/completions", `{"model":"demo","metadata":{"session_id":"u1"},"messages":[{"role":"user","content":"where is order 7?"}]}`), &c)
	if c.Choices[0].FinishReason != "length" || c.Usage.TotalTokens != 135 || c.Usage.Details.CachedTokens != 3 {
		t.Fatalf("completion: finish %q, usage %+v; want length and 135 tokens over two calls", c.Choices[0].FinishReason, c.Usage)
	}
	stream := string(post("/v1/chat/completions", `{"model":"demo","stream":true,"stream_options":{"include_usage":true},"metadata":{"session_id":"u2"},"messages":[{"role":"user","content":"hi"}]}`))
	if !strings.Contains(stream, `"total_tokens":9`) || !strings.Contains(stream, `"finish_reason":"stop"`) {
		t.Fatalf("stream lacks the usage chunk or finish reason:\n%s", stream)
	}
	oh := string(post("/v1/openharness", `{"protocol_version":"1.0.0","request_id":"u3","request":{"context":{"session_id":"u3","user_intent":"hi"}}}`))
	if !strings.Contains(oh, `"finish_reason":"content_filter"`) || !strings.Contains(oh, `"total_tokens":5`) {
		t.Fatalf("OpenHarness extension lacks usage:\n%s", oh)
	}
	resp, err := http.Get(ts.URL + "/v1/sessions/u1/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	runs, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(runs), `"total_tokens":135`) || !strings.Contains(string(runs), `"finish_reason":"length"`) {
		t.Fatalf("run record lacks usage:\n%s", runs)
	}
}

// TestSuspendedRunUsage: a turn that suspends for an approval records
// the usage of its model calls in its run record, as a completed turn
// does (it was billed, and the record showed none).
func TestSuspendedRunUsage(t *testing.T) {
	call := llmtest.CallTools(llm.ToolCall{ID: "call_1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7"}`)})
	call.Response.Usage = llm.Usage{PromptTokens: new(12), CompletionTokens: new(4), TotalTokens: new(16)}
	refund, err := agent.NewTool("issue_refund", "Refund an order.", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refund.NeedsApproval = true
	a, err := agent.New(agent.Config{Provider: llmtest.New(call), Tools: []agent.Tool{refund}})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a)
	resp, err := http.Post(ts.URL+"/v1/sessions/s/messages", "application/json", strings.NewReader(`{"content":"refund 7"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"outcome":"suspended"`) {
		t.Fatalf("refund: %s", body)
	}
	resp, err = http.Get(ts.URL + "/v1/sessions/s/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	runs, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(runs), `"status":"suspended"`) || !strings.Contains(string(runs), `"total_tokens":16`) {
		t.Fatalf("the suspended run's record lacks its usage:\n%s", runs)
	}
}
