package adk_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm/gemini"
)

// TestGeminiBadKeyIsAuthentication: the Gemini API answers a wrong API
// key with 400 INVALID_ARGUMENT and an ErrorInfo reason API_KEY_INVALID,
// which Armature's own Gemini mapping (gemini.ParseError) makes
// provider_authentication. A failure of ADK-Go's Gemini client gets the
// same category (modelError passes the error's envelope to that mapping),
// not one decided by the HTTP status alone (provider_invalid_request).
func TestGeminiBadKeyIsAuthentication(t *testing.T) {
	body := `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	native := gemini.ParseError(400, nil, []byte(body)).Cat
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	_, err := geminiTurn(t, srv.URL, "wrong-key", "")
	if got := errcat.Of(err); got != native || got != errcat.ProviderAuthentication {
		t.Fatalf("a wrong Gemini key through ADK-Go's client: category %q (%v); the native mapping gives %q", got, err, native)
	}
}
