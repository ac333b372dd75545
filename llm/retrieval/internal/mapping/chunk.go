package mapping

import (
	"context"
	"encoding/json"

	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/llm/retrieval"
)

// Chunks splits n items into consecutive [lo, hi) ranges of at most size
// items (size <= 0: one range).
func Chunks(n, size int) [][2]int {
	if size <= 0 || n <= size {
		return [][2]int{{0, n}}
	}
	out := make([][2]int, 0, (n+size-1)/size)
	for lo := 0; lo < n; lo += size {
		out = append(out, [2]int{lo, min(lo+size, n)})
	}
	return out
}

// EmbedChunked is the §8 batch chunk-and-stitch of an embedding call
// whose provider caps the inputs per request at size: one request per
// consecutive chunk, in order (one sends a chunk with otherwise identical
// parameters and returns its response with the vectors checked against
// the chunk), stopping at the first failure. The stitched response
// concatenates the vectors, sums the usage (nil when any chunk reported
// none), takes the first chunk's response id and model, and its Raw is
// the JSON array of the per-chunk responses. A call within the cap is
// one request whose response is returned as is.
func (d Decoder) EmbedChunked(ctx context.Context, op string, input []string, size int,
	one func(ctx context.Context, chunk []string) (*retrieval.EmbeddingResponse, error)) (*retrieval.EmbeddingResponse, error) {
	ranges := Chunks(len(input), size)
	if len(ranges) == 1 {
		resp, err := one(ctx, input)
		if err != nil {
			return nil, err
		}
		return resp, d.Embedding(op, resp, len(input))
	}
	out := &retrieval.EmbeddingResponse{Vectors: make([][]float64, 0, len(input)), Usage: &retrieval.EmbeddingUsage{}}
	raws := make([]json.RawMessage, 0, len(ranges))
	for i, r := range ranges {
		resp, err := one(ctx, input[r[0]:r[1]])
		if err != nil {
			return nil, err
		}
		if len(resp.Vectors) != r[1]-r[0] {
			return nil, d.Invalid(op, "chunk %d: %d vectors for %d inputs", i, len(resp.Vectors), r[1]-r[0])
		}
		if i == 0 {
			out.Model, out.ResponseID = resp.Model, resp.ResponseID
		}
		out.Vectors = append(out.Vectors, resp.Vectors...)
		if resp.Usage == nil || out.Usage == nil {
			out.Usage = nil
		} else {
			out.Usage.InputTokens += resp.Usage.InputTokens
		}
		raws = append(raws, resp.Raw)
	}
	out.Raw = RawList(raws)
	return out, d.Embedding(op, out, len(input))
}

// RawList joins verbatim JSON documents into a JSON array, byte for
// byte: the raw of a chunked call.
func RawList(raws []json.RawMessage) json.RawMessage { return jsonstr.Array(raws) }
