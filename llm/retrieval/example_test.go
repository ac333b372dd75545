package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/openai"
)

func Example() {
	// A rate-limited server: the error carries the §7 category and the
	// Retry-After the provider asked for; the provider does not retry.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"slow down"}}`))
	}))
	defer srv.Close()

	emb, _ := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", APIKey: "sk-secret"})
	var events []retrieval.EmbeddingEvent
	p := retrieval.ObserveEmbeddings(emb, func(_ context.Context, e retrieval.EmbeddingEvent) { events = append(events, e) })
	_, err := p.Embed(context.Background(), []string{"x"}, retrieval.EmbeddingConfig{Dimensions: 8})

	var pe *llm.ProviderError
	fmt.Println(errors.Is(err, errcat.ProviderRateLimit), errors.As(err, &pe) && pe.Retryable(), pe.RetryAfter)
	fmt.Println(len(events), events[0].RequestParams)
	// Output:
	// true true 2s
	// 1 map[dimensions:8]
}
