package gemini_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

// TestRequestBody: RequestBody gives the bytes Complete sends, extras
// under generationConfig, and refuses what Complete refuses before
// sending: an extra naming a managed field with another value.
func TestRequestBody(t *testing.T) {
	var (
		mu   sync.Mutex
		sent string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = string(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`)
	}))
	t.Cleanup(srv.Close)
	p, err := gemini.New(gemini.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: []llm.Message{llm.UserText("hello")},
		Config: llm.Config{MaxTokens: new(10), Extras: map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": 128}}}}
	want, err := p.RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sent != string(want) {
		t.Fatalf("sent %s\nRequestBody %s", sent, want)
	}
	req.Config.Extras = map[string]any{"maxOutputTokens": 20}
	if _, err := p.RequestBody(req); !errors.Is(err, llm.ErrManagedField) {
		t.Fatalf("a conflicting extra: %v", err)
	}
}
