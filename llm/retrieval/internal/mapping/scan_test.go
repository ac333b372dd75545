package mapping

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// TestScannerVector: the fast vector reader against the encoding/json
// path it replaces, on hand-picked inputs (the fuzz seeds).
func TestScannerVector(t *testing.T) {
	tests := []struct {
		in   string
		want []float64 // nil: leaves the fast path
	}{
		{in: `[]`, want: []float64{}},
		{in: ` [ 1 , -2.5e3 ,0.0123456789, -0 ] `, want: []float64{1, -2500, 0.0123456789, math.Copysign(0, -1)}},
		{in: `[0.1234567890123456789, 1e22, 1e23, 123456789012345678901234567890]`,
			want: []float64{0.1234567890123456789, 1e22, 1e23, 123456789012345678901234567890}},
		{in: `"AACAPwAAAEA="`, want: []float64{1, 2}},
		{in: `[1e999]`},
		{in: `[01]`},
		{in: `[1.]`},
		{in: `[.5]`},
		{in: `[+1]`},
		{in: `[1,]`},
		{in: `[1 2]`},
		{in: `[null]`},
		{in: `["1"]`},
		{in: `"AACAPw\u003d\u003d"`},
		{in: `"AACAP"`},
		{in: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got []float64
			s := NewScanner([]byte(tt.in))
			ok := s.Vector(&got) && s.End()
			if ok != (tt.want != nil) {
				t.Fatalf("ok %v, want %v (got %v)", ok, tt.want != nil, got)
			}
			for i := range tt.want {
				if math.Float64bits(got[i]) != math.Float64bits(tt.want[i]) {
					t.Errorf("[%d] = %v, want %v", i, got[i], tt.want[i])
				}
			}
			checkVector(t, []byte(tt.in))
		})
	}
}

// checkVector asserts the fast reader agrees with the slow path on in:
// when it accepts in, in is valid JSON and Vector (after encoding/json)
// gives the same values, bit for bit.
func checkVector(t *testing.T, in []byte) {
	t.Helper()
	var got []float64
	s := NewScanner(in)
	if !s.Vector(&got) || !s.End() {
		return
	}
	if !json.Valid(in) {
		t.Fatalf("the scanner accepted invalid JSON %q", in)
	}
	want, err := Vector(in)
	if err != nil {
		t.Fatalf("the scanner accepted %q, which Vector rejects: %v", in, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%q: %d values, want %d", in, len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%q: [%d] = %v, want %v", in, i, got[i], want[i])
		}
	}
}

// FuzzScannerVector compares the fast vector reader with the
// encoding/json path on random inputs.
func FuzzScannerVector(f *testing.F) {
	for _, s := range []string{`[]`, `[1,-2.5e3,0.0123456789]`, `[1e23]`, `"AACAPwAAAEA="`, `[0.000001e-30]`, `[-0.0]`, `[1E+2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkVector(t, in) })
}

// FuzzScannerNumber: a number the scanner reads is a JSON number whose
// value is strconv.ParseFloat's, bit for bit.
func FuzzScannerNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.5", "0.0123456789", "9007199254740993", "1e22", "1e23", "123.456e-7", "1.7976931348623157e308", "4.9e-324"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := NewScanner([]byte(in))
		got, ok := s.number()
		if !ok || s.i != len(in) {
			return
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("the scanner read %q, not a JSON number", in)
		}
		want, err := strconv.ParseFloat(in, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: %v, want %v (%v)", in, got, want, err)
		}
	})
}

// FuzzScannerRaw: the scanner accepts a document only when
// encoding/json does, and keeps its bytes.
func FuzzScannerRaw(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"c":"\u00e9\n"}`, `[true,false,-1e5]`, `"x"`, `{"a":1,}`, `[1,,2]`, `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewScanner(in)
		raw, ok := s.Raw()
		if ok && s.End() && !json.Valid(in) {
			t.Fatalf("the scanner accepted invalid JSON %q", in)
		}
		if ok && !json.Valid(raw) {
			t.Fatalf("raw %q of %q is not valid", raw, in)
		}
	})
}
