package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/spectest"
	"github.com/armature-go/armature/llm/openai"
)

// openaiAttacks is the Chat Completions wire for the spectest attacks.
func openaiAttacks(t *testing.T) spectest.WireAttacks {
	raw, err := os.ReadFile(filepath.Join("testdata", "stream.sse"))
	if err != nil {
		t.Fatal(err)
	}
	return spectest.WireAttacks{
		New: func(url string, timeout time.Duration) (llm.Provider, error) {
			return openai.New(openai.Config{BaseURL: url, APIKey: "k", Model: "gpt-test", Timeout: timeout})
		},
		Request: func(stream bool) *llm.Request {
			return &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Stream: stream}
		},
		Stream:     string(raw),
		Complete:   `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}]}`,
		FirstEvent: `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n",
		Invalid:    []string{`{"id":"c","choices":[]}`},
	}
}

// TestStreamAttacks: see spectest.CheckStreamAttacks.
func TestStreamAttacks(t *testing.T) { spectest.CheckStreamAttacks(t, openaiAttacks(t)) }

// TestCompleteAttacks: see spectest.CheckCompleteAttacks.
func TestCompleteAttacks(t *testing.T) { spectest.CheckCompleteAttacks(t, openaiAttacks(t)) }

// TestGarbageRetryAfter: a 429 whose Retry-After is no wait at all
// (words, an exponent, a sign) is provider_rate_limit without a wait.
func TestGarbageRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "soon; 1e9, -4")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`))
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Stream: true})
	var pe *llm.ProviderError
	if errcat.Of(err) != errcat.ProviderRateLimit || !errors.As(err, &pe) || pe.RetryAfter != 0 {
		t.Errorf("%v, want provider_rate_limit without a wait", err)
	}
}
