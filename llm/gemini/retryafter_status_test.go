package gemini_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

func statusGemini(t *testing.T, status int, header map[string]string, ctype, body string) *gemini.Provider {
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
	p, err := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-2.5-flash", CallNonce: func() string { return "n" }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUnavailableRetryAfter: the Retry-After header (and the RetryInfo
// detail) is read into ProviderError.RetryAfter whatever the status, so
// an overloaded 503 UNAVAILABLE (provider_unavailable) asks llm.Complete's
// retry loop for its wait as a 429 does. Before, both were read for rate
// limits only: users saw RetryAfter 0 and retries came back at once into
// the overload.
func TestUnavailableRetryAfter(t *testing.T) {
	p := statusGemini(t, 503, map[string]string{"Retry-After": "20"}, "application/json",
		`{"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}`)
	req := geminiStreamRequest(nil)
	req.Stream = false
	_, err := p.Complete(context.Background(), req)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || !errors.Is(err, errcat.ProviderUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if pe.RetryAfter == 0 {
		t.Errorf("503 Retry-After: 20 gave RetryAfter 0")
	}
}
