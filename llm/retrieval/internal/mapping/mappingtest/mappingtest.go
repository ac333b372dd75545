// Package mappingtest holds the test helpers of the retrieval wire
// mappings: the differential check of an embedding decoder's fast
// (scanner) path against its encoding/json path.
package mappingtest

import (
	"math"
	"reflect"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm/retrieval"
)

// SameDecode fails t unless the two decodings of one body agree: both
// fail with the same message and category, or both succeed with equal
// responses and bit-identical vectors.
func SameDecode(t testing.TB, fast *retrieval.EmbeddingResponse, ferr error, slow *retrieval.EmbeddingResponse, serr error) {
	t.Helper()
	if (ferr == nil) != (serr == nil) {
		t.Fatalf("fast error %v, slow error %v", ferr, serr)
	}
	if ferr != nil {
		if ferr.Error() != serr.Error() || errcat.Of(ferr) != errcat.Of(serr) {
			t.Fatalf("fast error %v (%s), slow error %v (%s)", ferr, errcat.Of(ferr), serr, errcat.Of(serr))
		}
		return
	}
	fv, sv := fast.Vectors, slow.Vectors
	f, s := *fast, *slow
	f.Vectors, s.Vectors = nil, nil
	if !reflect.DeepEqual(f, s) {
		t.Fatalf("fast %+v, slow %+v", f, s)
	}
	if len(fv) != len(sv) {
		t.Fatalf("%d vectors, want %d", len(fv), len(sv))
	}
	for i := range sv {
		if len(fv[i]) != len(sv[i]) {
			t.Fatalf("vector %d: %d values, want %d", i, len(fv[i]), len(sv[i]))
		}
		for j := range sv[i] {
			if math.Float64bits(fv[i][j]) != math.Float64bits(sv[i][j]) {
				t.Fatalf("vector %d[%d] = %v, want %v", i, j, fv[i][j], sv[i][j])
			}
		}
	}
}

// FuzzDecode is the differential fuzz target of an embedding decoder:
// decode(data, n, fast) with and without the scanner must agree
// ([SameDecode]) on every body, for n in [0, 64].
func FuzzDecode(f *testing.F, seeds []string, decode func(data []byte, n int, fast bool) (*retrieval.EmbeddingResponse, error)) {
	for _, s := range seeds {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		fast, ferr := decode(data, n, true)
		slow, serr := decode(data, n, false)
		SameDecode(t, fast, ferr, slow, serr)
	})
}
