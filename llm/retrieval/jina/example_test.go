package jina_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/jina"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"model":"jina-reranker","usage":{"total_tokens":12},"results":[{"index":1,"relevance_score":0.8,"document":{"text":"b"}},{"index":0,"relevance_score":0.3,"document":{"text":"a"}}]}`))
	}))
	defer srv.Close()

	rr, err := jina.NewReranker(jina.Config{BaseURL: srv.URL, APIKey: "key", Model: "jina-reranker"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := rr.Rerank(context.Background(), retrieval.RerankRequest{Query: "q", Documents: []string{"a", "b"},
		Config: retrieval.RerankConfig{ReturnDocuments: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Results[0].Index, *resp.Results[0].Document, *resp.Usage.InputTokens)
	// Output: 1 b 12
}
