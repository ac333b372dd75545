package adk_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/errcat"
)

// TestGeminiErrorsKeepTheirCategory: with ADK-Go's own Gemini client
// (adk: {model: {provider: gemini, ...}}), a failed model call ends the
// turn with the provider category of the Gemini API's status: 401/403
// provider_authentication, 404 provider_invalid_model, 400
// provider_invalid_request, 429 provider_rate_limit, as the bridged
// workspace model and a native agent report them. Without a category the
// runtime would report node_exception, retryable_transient, telling
// clients to retry a wrong key or an unknown model, and a rate limit
// would lose its meaning (and its Retry-After) on the OpenAI endpoint.
func TestGeminiErrorsKeepTheirCategory(t *testing.T) {
	want := map[int]errcat.Category{
		http.StatusUnauthorized:    errcat.ProviderAuthentication,
		http.StatusNotFound:        errcat.ProviderInvalidModel,
		http.StatusBadRequest:      errcat.ProviderInvalidRequest,
		http.StatusTooManyRequests: errcat.ProviderRateLimit,
	}
	for status, cat := range want {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "9")
				w.WriteHeader(status)
				_, _ = fmt.Fprintf(w, `{"error":{"code":%d,"message":"refused","status":"X"}}`, status)
			}))
			defer srv.Close()
			_, err := geminiTurn(t, srv.URL, "test-key", "")
			if err == nil {
				t.Fatalf("the turn succeeded, want it to fail on the Gemini %d", status)
			}
			if got := errcat.Of(err); got != cat {
				t.Fatalf("a Gemini %d ended the turn with category %q (%v), want %q", status, got, err, cat)
			}
		})
	}
}
