package openai_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/llm/retrieval/openai"
)

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1,2]}],"usage":{"prompt_tokens":3}}`), 1)
	f.Add([]byte(`{"data":[{"index":0,"embedding":"AACAPwAAAEA="}],"id":""}`), 1)
	f.Add([]byte(`{"data":[{"index":1,"embedding":[1, null]}]}`), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		resp, err := openai.Decode(data, n, "m")
		if err == nil && (len(resp.Vectors) != n || (n > 0 && len(resp.Vectors[0]) != resp.Dimensions)) {
			t.Fatalf("decoded %d vectors of %d for %d inputs", len(resp.Vectors), resp.Dimensions, n)
		}
	})
}

// BenchmarkDecode1000 decodes a 1 000-vector, 768-dimension embedding
// response (about 7 MB of JSON).
func BenchmarkDecode1000(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"object":"list","model":"m","data":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"object":"embedding","index":%d,"embedding":[`, i)
		for j := range 768 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "%.8f", float64(i*j%997)/997-0.5)
		}
		sb.WriteString("]}")
	}
	sb.WriteString(`],"usage":{"prompt_tokens":5000,"total_tokens":5000}}`)
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openai.Decode(data, 1000, "m"); err != nil {
			b.Fatal(err)
		}
	}
}
