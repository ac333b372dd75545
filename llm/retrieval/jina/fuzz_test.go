package jina_test

import (
	"testing"

	"github.com/armature-go/armature/llm/retrieval/jina"
)

func FuzzDecodeEmbed(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1,2]}],"usage":{"total_tokens":3}}`), 1)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		if resp, err := jina.DecodeEmbed(data, n, "m"); err == nil && len(resp.Vectors) != n {
			t.Fatalf("%d vectors for %d inputs", len(resp.Vectors), n)
		}
	})
}

func FuzzDecodeRerank(f *testing.F) {
	f.Add([]byte(`{"results":[{"index":0,"relevance_score":0.2,"document":{"text":"a"}},{"index":1,"relevance_score":0.7,"document":{"image":"x"}}]}`), 2, 0)
	f.Add([]byte(`{"results":[{"index":0,"relevance_score":0.2,"document":7}]}`), 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, n, topK int) {
		if n < 0 || n > 64 || topK < 0 {
			return
		}
		resp, err := jina.DecodeRerank(data, n, topK, "m")
		if err == nil && topK > 0 && len(resp.Results) > topK {
			t.Fatalf("%d results for top_k %d", len(resp.Results), topK)
		}
	})
}
