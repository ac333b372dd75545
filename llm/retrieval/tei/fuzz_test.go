package tei_test

import (
	"testing"

	"github.com/armature-go/armature/llm/retrieval/tei"
)

func FuzzDecodeEmbed(f *testing.F) {
	f.Add([]byte(`[[1,2],[3,4]]`), 2)
	f.Add([]byte(`[[1],[2,3]]`), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		if resp, err := tei.DecodeEmbed(data, n, "m"); err == nil && len(resp.Vectors) != n {
			t.Fatalf("%d vectors for %d inputs", len(resp.Vectors), n)
		}
	})
}

func FuzzDecodeRerank(f *testing.F) {
	f.Add([]byte(`[{"index":1,"score":0.5,"text":"b"},{"index":0,"score":0.9}]`), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		resp, err := tei.DecodeRerank(data, n, "m")
		if err != nil {
			return
		}
		for i, r := range resp.Results {
			if r.Index < 0 || r.Index >= n || (i > 0 && resp.Results[i-1].RelevanceScore < r.RelevanceScore) {
				t.Fatalf("invalid results %+v", resp.Results)
			}
		}
	})
}
