package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/openai"
)

func Example() {
	// A stand-in for an OpenAI-compatible embeddings server.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","model":"m","data":[{"index":1,"embedding":[0,1]},{"index":0,"embedding":[1,0]}],"usage":{"prompt_tokens":4,"total_tokens":4}}`))
	}))
	defer srv.Close()

	emb, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := emb.Embed(context.Background(), []string{"east", "north"}, retrieval.EmbeddingConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Vectors, resp.Dimensions, resp.Usage.InputTokens)
	// Output: [[1 0] [0 1]] 2 4
}
