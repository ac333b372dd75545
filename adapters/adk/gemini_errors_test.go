package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
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
			t.Setenv("TEST_GEMINI_KEY", "test-key")
			ctx := context.Background()
			section := `{"model":{"provider":"gemini","name":"gemini-test","base_url":` + quote(srv.URL) + `,"api_key_env":"TEST_GEMINI_KEY"}}`
			ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(section)}
			a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = a.(interface{ Close() error }).Close() }()
			drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
			_, err = a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
			if err == nil {
				t.Fatalf("the turn succeeded, want it to fail on the Gemini %d", status)
			}
			if got := errcat.Of(err); got != cat {
				t.Fatalf("a Gemini %d ended the turn with category %q (%v), want %q", status, got, err, cat)
			}
		})
	}
}
