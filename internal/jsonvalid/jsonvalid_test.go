package jsonvalid_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/jsonvalid"
)

var cases = []string{
	``, ` `, `null`, ` true `, `false`, `nul`, `nullx`, `truefalse`, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`,
	`1e07`, `-12.50e+3`, `+1`, `1 2`, `""`, `"`, `"\"`, `"\\"`, `"\u00e9"`, `"\u00g9"`, `"\u12"`, `"\x"`, `"\/\b\f\n\r\t"`,
	"\"a\tb\"", "\"\x1f\"", "\"\x7f\xff\xfe\"", `"é"`, `{}`, `[]`, `{ }`, `[ ]`, `{"a":1}`, `{"a" : [1, {"b": null}], "c": "d"}`,
	`{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `[1 2]`, `[[[]]]`, `[[[]]`, `[]]`, `{}}`,
	`{"a":1]`, `[1}`, "\n\r\t [1]\n", `[true,false,null,0,"x",{},[]]`, `{"":""}`, `[-]`, `[1e5,-0.0,2E-1]`, "[\"a\x00\"]",
}

func TestValid(t *testing.T) {
	for _, c := range cases {
		if got, want := jsonvalid.Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
	// encoding/json's nesting limit: 10000 levels are valid, 10001 not.
	for _, depth := range []int{9999, 10000, 10001, 20000} {
		for _, open := range []string{"[", `{"k":`} {
			closeWith := map[string]string{"[": "]", `{"k":`: "}"}[open]
			for _, inner := range []string{"[]", "1", "{}"} {
				c := strings.Repeat(open, depth-1) + inner + strings.Repeat(closeWith, depth-1)
				if got, want := jsonvalid.Valid([]byte(c)), json.Valid([]byte(c)); got != want {
					t.Errorf("%d levels of %s around %s: Valid = %v, encoding/json says %v", depth, open, inner, got, want)
				}
			}
		}
	}
}

// FuzzValid holds Valid to encoding/json.Valid.
func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := jsonvalid.Valid(data), json.Valid(data); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	msg := []byte(`{"replies":[{"role":"assistant","tool_calls":[{"id":"call-1","name":"lookup_order","arguments":{"order":"7"}}]},` +
		`{"role":"tool","tool_call_id":"call-1","content":"{\"status\":\"shipped\"}"},{"role":"assistant","content":"Order 7 shipped yesterday. \u00e9"}]}`)
	b.Run("jsonvalid", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			jsonvalid.Valid(msg)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			json.Valid(msg)
		}
	})
}
