package graph

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeStructural keeps every JSON integer exact in the structural form
// migrations see (migrate/doc.go): int when it fits, then int64/uint64,
// then the json.Number itself; only non-integer literals become float64.
// Re-encoding the result gives back the same number.
func TestDecodeStructuralKeepsIntegersExact(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{`1`, 1},
		{`-9007199254740993`, -9007199254740993},
		{`9223372036854775807`, math.MaxInt64},
		{`18446744073709551615`, uint64(math.MaxUint64)},
		{`18446744073709551616`, json.Number("18446744073709551616")},
		{`-9223372036854775809`, json.Number("-9223372036854775809")},
		{`1.5`, 1.5},
		{`1e+300`, 1e300},
		{`[1,18446744073709551615]`, []any{1, uint64(math.MaxUint64)}},
		{`{"a":{"b":18446744073709551615}}`, map[string]any{"a": map[string]any{"b": uint64(math.MaxUint64)}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := decodeStructural([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decodeStructural(%s) (-want +got):\n%s", tt.in, diff)
			}
			again, err := normalize(got, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("normalize is not idempotent (-first +second):\n%s", diff)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.in {
				t.Errorf("re-encoded as %s, want %s", b, tt.in)
			}
		})
	}
	if _, err := decodeStructural([]byte(`1e400`)); err == nil {
		t.Error("decodeStructural(1e400) = nil error, want invalid number")
	}
}
