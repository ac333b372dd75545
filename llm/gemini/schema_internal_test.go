package gemini

import (
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/spectest"
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

// FuzzStreamEvents feeds arbitrary events to the stream assembler: it
// never panics, and an assembly it accepts maps like an atomic body.
func FuzzStreamEvents(f *testing.F) {
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b"}]}}]}`),
		[]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}]}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`), []byte(`{"error":{"code":500}}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		st := &streamState{callID: indexCallID, parts: []map[string]json.RawMessage{}}
		for _, ev := range [][]byte{a, b} {
			if _, err := st.event(ev); err != nil {
				return
			}
		}
		if resp, err := st.response(); err == nil && resp == nil {
			t.Fatal("no response and no error")
		}
	})
}

// The system prompt in Request.System and the asides of a stored history
// encode as the transcript does.
func TestSeparateSystemAndAsides(t *testing.T) {
	p, err := New(Config{Model: "gemini-2.5-flash", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	spectest.CheckSeparateSystem(t, llm.Config{}, p.requestBody)
}
