package openai

import (
	"testing"

	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/internal/mapping/mappingtest"
)

// FuzzDecodeFast compares Decode's scanner path with the encoding/json
// path on random bodies: the same response, or the same error.
func FuzzDecodeFast(f *testing.F) {
	mappingtest.FuzzDecode(f, []string{
		`{"data":[{"index":0,"embedding":[1,2]}],"usage":{"prompt_tokens":3},"model":"x","id":"r1"}`,
		`{"data":[{"index":0,"embedding":"AACAPwAAAEA="}],"id":""}`,
		`{"data":[{"index":1,"embedding":[1, null]}]}`,
		`{"Data":[{"index":0,"embedding":[1]}]}`,
		`{"data":[{"index":0,"embedding":[1]}],"data":[{"index":0}]}`,
		`{"data":[{"index":0,"embedding":[1e999]}],"usage":null,"model":null}`,
		`{"data":[{"index":0,"embedding":[0.5],"object":"embedding"},{"index":0,"embedding":[1]}]} `,
		`{"data":null}`, `[]`, `{"data":[]}`, `{"model":5,"data":[]}`,
	}, func(data []byte, n int, fast bool) (*retrieval.EmbeddingResponse, error) {
		return decode(data, n, "m", fast)
	})
}
