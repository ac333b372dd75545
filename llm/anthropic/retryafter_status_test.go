package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
)

func statusProvider(t *testing.T, status int, header map[string]string, ctype, body string) *anthropic.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-test-0123456789", Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOverloadedRetryAfter: a retry-after header is read into
// ProviderError.RetryAfter whatever the status, so an overloaded 529
// or 503 (provider_unavailable) asks llm.Complete's retry loop for its
// wait as a 429 does. Before, retry-after was read on a 429 only: users
// saw RetryAfter 0 on an overload, and retries came back early into it.
func TestOverloadedRetryAfter(t *testing.T) {
	for _, status := range []int{529, 503} {
		p := statusProvider(t, status, map[string]string{"retry-after": "30", "request-id": "req_011"}, "application/json",
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011"}`)
		req := streamRequest(nil)
		req.Stream = false
		_, err := p.Complete(context.Background(), req)
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || !errors.Is(err, errcat.ProviderUnavailable) {
			t.Fatalf("%d: err = %v", status, err)
		}
		if pe.RetryAfter == 0 {
			t.Errorf("HTTP %d with retry-after: 30 gave RetryAfter 0", status)
		}
	}
}
