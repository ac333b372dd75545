package tei_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/tei"
)

func Example() {
	// A stand-in for a TEI reranker instance (its results unsorted).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"index":0,"score":0.1},{"index":1,"score":0.9}]`))
	}))
	defer srv.Close()

	rr, err := tei.NewReranker(tei.Config{BaseURL: srv.URL, Model: "bge-reranker"})
	if err != nil {
		fmt.Println(err)
		return
	}
	docs := []string{"Berlin is in Germany.", "Paris is the capital of France."}
	resp, err := rr.Rerank(context.Background(), retrieval.RerankRequest{Query: "capital of France", Documents: docs})
	if err != nil {
		fmt.Println(err)
		return
	}
	best := resp.Results[0]
	fmt.Println(docs[best.Index], best.RelevanceScore, resp.Usage == nil)
	// Output: Paris is the capital of France. 0.9 true
}
