package adaptertest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/armature-go/armature/llm"
)

// AnthropicEndpoint serves an Anthropic Messages endpoint that answers
// every request with the assistant text "hi", for t's duration. It
// returns its base URL (anthropic.Config.BaseURL) and a function that
// returns the request bodies received so far, decoded: what a bridged
// model really sent, through Armature's own Anthropic client.
func AnthropicEndpoint(t testing.TB) (url string, requests func() []map[string]any) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],` +
			`"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got...)
	}
}

// ProviderFunc is an llm.Provider that calls itself with each request
// and answers "ok": a model bridge's test sees the request the bridge
// built.
type ProviderFunc func(*llm.Request)

// Ready implements llm.Provider.
func (f ProviderFunc) Ready(context.Context) error { return nil }

// Complete implements llm.Provider.
func (f ProviderFunc) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	f(req)
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}
