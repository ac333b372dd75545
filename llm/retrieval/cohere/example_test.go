package cohere_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/cohere"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"e1","embeddings":{"float":[[0.5,0.5]]},"texts":["hi"],"meta":{"billed_units":{"input_tokens":1}}}`))
	}))
	defer srv.Close()

	emb, err := cohere.NewEmbedder(cohere.Config{BaseURL: srv.URL, APIKey: "key", Model: "embed-v4.0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := emb.Embed(context.Background(), []string{"hi"}, retrieval.EmbeddingConfig{InputType: retrieval.InputQuery})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Vectors[0], resp.Model, resp.ResponseID, resp.Usage.InputTokens)
	// Output: [0.5 0.5] embed-v4.0 e1 1
}
