package openai_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// TestRetryWaitsForRetryAfter: a 429 with Retry-After: 2, through the
// OpenAI mapping and llm.Complete's retry loop (RetryPolicy{MaxAttempts:
// 3}, the README's example): the second attempt comes no earlier than
// the wait the API asked for (the longer of it and the backoff), as the
// official SDKs do. Before, the loop waited only its own jittered
// backoff, and the retries landed inside the rate-limit window.
func TestRetryWaitsForRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 2s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("Hi")},
		Retry: &llm.RetryPolicy{MaxAttempts: 3}}); err != nil {
		t.Fatal(err)
	}
	if len(at) != 2 {
		t.Fatalf("%d attempts", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < 1900*time.Millisecond {
		t.Errorf("retried %v after a 429 with Retry-After: 2", gap.Round(time.Millisecond))
	}
}
