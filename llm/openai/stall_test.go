package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// TestStalledBody: an upstream that sends its headers (and a first
// chunk) and then nothing fails the call at the provider's timeout as
// provider_unavailable, streamed or not, as a stall before the headers
// does; a caller's cancellation stays a cancellation.
func TestStalledBody(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}` + "\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "m", Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}
	var streamErr error
	for _, err := range p.Stream(context.Background(), req) {
		if err != nil {
			streamErr = err
		}
	}
	_, completeErr := p.Complete(context.Background(), req)
	for name, err := range map[string]error{"stream": streamErr, "complete": completeErr} {
		if errcat.Of(err) != errcat.ProviderUnavailable {
			t.Errorf("%s: %v (category %q), want provider_unavailable", name, err, errcat.Of(err))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := p.Complete(ctx, req); !errors.Is(err, context.Canceled) || errcat.Of(err) != "" {
		t.Errorf("a cancelled call: %v (category %q), want the cancellation", err, errcat.Of(err))
	}
}
