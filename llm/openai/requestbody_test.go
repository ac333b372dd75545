package openai_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// TestRequestBody: RequestBody gives the bytes Complete sends (and, with
// req.Stream, those Stream sends), and refuses what they refuse before
// sending: extras naming a managed field with another value, in either
// mode (stream is managed in both).
func TestRequestBody(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, string(b))
		mu.Unlock()
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: testKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		req := &llm.Request{Messages: []llm.Message{llm.UserText("hello")}, Stream: stream,
			Config: llm.Config{Extras: map[string]any{"parallel_tool_calls": false, "reasoning_effort": "low"}}}
		want, err := p.RequestBody(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := llm.Complete(t.Context(), p, req); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := sent[len(sent)-1]
		mu.Unlock()
		if got != string(want) {
			t.Fatalf("stream=%v: sent %s\nRequestBody %s", stream, got, want)
		}
		req.Config.Extras = map[string]any{"stream": !stream}
		if _, err := p.RequestBody(req); !errors.Is(err, llm.ErrManagedField) {
			t.Fatalf("stream=%v: a conflicting stream extra: %v", stream, err)
		}
	}
}
