package cohere

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
		`{"id":"c1","embeddings":{"float":[[1,2]]},"meta":{"billed_units":{"input_tokens":4}}}`,
		`{"embeddings":{"float":[[1]],"int8":[[1]]},"meta":{"billed_units":null}}`,
		`{"embeddings":{"float":null}}`, `{"embeddings":null}`, `{"embeddings":{}}`,
		`{"embeddings":{"Float":[[1]]},"meta":null}`, `{"embeddings":{"float":[]}}`,
	}, func(data []byte, n int, fast bool) (*retrieval.EmbeddingResponse, error) {
		return decodeEmbed(data, n, "m", fast)
	})
}
