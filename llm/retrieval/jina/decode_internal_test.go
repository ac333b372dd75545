package jina

import (
	"testing"

	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/internal/mapping/mappingtest"
)

// FuzzDecodeEmbedFast compares DecodeEmbed's scanner path with the
// encoding/json path on random bodies: the same response, or the same
// error.
func FuzzDecodeEmbedFast(f *testing.F) {
	mappingtest.FuzzDecode(f, []string{
		`{"model":"j","data":[{"index":0,"embedding":[1,2]}],"usage":{"total_tokens":3}}`,
		`{"data":[{"index":0,"embedding":[1]}],"usage":{"prompt_tokens":null,"total_tokens":3}}`,
		`{"data":[{"index":0,"embedding":"AACAPwAAAEA="}],"usage":null}`,
		`{"DATA":[{"index":0,"embedding":[1]}]}`, `{"data":null}`, `{}`,
	}, func(data []byte, n int, fast bool) (*retrieval.EmbeddingResponse, error) {
		return decodeEmbed(data, n, "m", fast)
	})
}
