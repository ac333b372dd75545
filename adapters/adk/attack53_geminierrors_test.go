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

// TestAttack53GeminiErrorsKeepTheirCategory: with ADK-Go's own Gemini
// client (adk: {model: {provider: gemini, ...}}, the README's headline
// setup) a failed model call reaches the runtime without a category: a
// 401 (a wrong key), a 404 (an unknown model), a 400 and a 429 (rate
// limit) all end the turn as node_exception, retryable_transient ("Try
// again in a moment"; through the binary the OpenAI endpoint answers 503
// with Retry-After: 1 for each, and never 429 rate_limit_error with the
// upstream's Retry-After). The bridged workspace model keeps its
// category (adaptertest.CheckBridge), as a native agent's does.
// Expected: the Gemini API's status maps to the provider categories:
// 401/403 provider_authentication, 404 provider_invalid_model, 400
// provider_invalid_request, 429 provider_rate_limit.
func TestAttack53GeminiErrorsKeepTheirCategory(t *testing.T) {
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
				t.Fatal("the turn succeeded")
			}
			if got := errcat.Of(err); got != cat {
				t.Fatalf("a Gemini %d ended the turn with category %q (%v), want %q", status, got, err, cat)
			}
		})
	}
}
