package tei

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
		`[[1,2],[3,4]]`, `[[0.5]]`, `[]`, `null`, `[[1,null]]`, `[["AACAPw=="]]`, `["AACAPwAAAEA="]`, `[[1e999]]`,
	}, func(data []byte, n int, fast bool) (*retrieval.EmbeddingResponse, error) {
		return decodeEmbed(data, n, "m", fast)
	})
}
