package cohere_test

import (
	"testing"

	"github.com/armature-go/armature/llm/retrieval/cohere"
)

func FuzzDecodeEmbed(f *testing.F) {
	f.Add([]byte(`{"id":"e","embeddings":{"float":[[1,2]]},"meta":{"billed_units":{"input_tokens":-1}}}`), 1)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		resp, err := cohere.DecodeEmbed(data, n, "m")
		if err == nil && (len(resp.Vectors) != n || (resp.Usage != nil && resp.Usage.InputTokens < 0)) {
			t.Fatalf("bad response %+v", resp)
		}
	})
}

func FuzzDecodeRerank(f *testing.F) {
	f.Add([]byte(`{"id":"r","results":[{"index":1,"relevance_score":0.9}],"meta":{"billed_units":{"search_units":1}}}`), 2, 0)
	f.Fuzz(func(t *testing.T, data []byte, n, topK int) {
		if n < 0 || n > 64 || topK < 0 {
			return
		}
		resp, err := cohere.DecodeRerank(data, n, topK, "m")
		if err != nil {
			return
		}
		for _, r := range resp.Results {
			if r.Document != nil {
				t.Fatal("cohere never echoes documents")
			}
		}
	})
}
