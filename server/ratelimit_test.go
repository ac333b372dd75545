package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// TestUpstreamRateLimit: a model's 429 reaches OpenAI-compatible clients
// as 429 rate_limit_error with the upstream's Retry-After (plain and
// streamed), and OpenHarness as provider_rate_limit, retryable.
func TestUpstreamRateLimit(t *testing.T) {
	limited := func() error {
		return &llm.ProviderError{Cat: errcat.ProviderRateLimit, Provider: "openai", Op: "complete", StatusCode: 429,
			Message: "Rate limit reached", RetryAfter: 7 * time.Second}
	}
	p := llmtest.New(llmtest.Fail(limited()), llmtest.Fail(limited()), llmtest.Fail(limited()))
	a, err := agent.New(agent.Config{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a)
	post := func(path, body string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, stream := range []string{"false", "true"} {
		resp, body := post("/v1/chat/completions", `{"model":"demo","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
		var e struct {
			Error struct{ Type, Code string } `json:"error"`
		}
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" ||
			e.Error.Type != "rate_limit_error" || e.Error.Code != "provider_rate_limit" {
			t.Errorf("stream %s: %d Retry-After %q %s, want 429 with Retry-After 7 and rate_limit_error", stream, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	_, body := post("/v1/openharness", `{"protocol_version":"1.0.0","request_id":"rl-1","request":{"context":{"user_intent":"hi"}}}`)
	t.Logf("OpenHarness: %s", body)
	if !strings.Contains(string(body), `"provider_rate_limit"`) || !strings.Contains(string(body), `"retryable_transient"`) {
		t.Errorf("OpenHarness answer %s, want provider_rate_limit, retryable", body)
	}
}
