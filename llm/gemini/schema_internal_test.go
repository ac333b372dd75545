package gemini

import (
	"encoding/json"
	"testing"
)

// FuzzOpenAPISubset: the check never panics, and a schema it lets into
// parameters has only Schema-object keywords at its top level and a
// single type name.
func FuzzOpenAPISubset(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"type":"object","additionalProperties":false}`,
		`{"anyOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"items":{"items":{"type":["a"]}}}`,
		`[]`, `null`, `"x"`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !openAPISubset(raw) {
			return
		}
		var top map[string]any
		if err := json.Unmarshal(raw, &top); err != nil {
			t.Fatalf("accepted a non-object: %s", raw)
		}
		for k, v := range top {
			if !schemaKeywords[k] {
				t.Fatalf("accepted keyword %q", k)
			}
			if k == "type" {
				if _, ok := v.(string); !ok {
					t.Fatalf("accepted type %v", v)
				}
			}
		}
	})
}
