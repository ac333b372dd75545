package gemini_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

// TestToolSchemaField: a schema the parameters field takes goes there
// verbatim (§8.3.1); one it would reject ("Unknown name
// additionalProperties", as every struct-derived tool schema has) goes
// verbatim as parametersJsonSchema. Never both, never altered.
func TestToolSchemaField(t *testing.T) {
	tests := []struct {
		name, schema string
		field        string
	}{
		{"plain", `{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`, "parameters"},
		{"nested subset", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},"n":{"anyOf":[{"type":"integer"},{"type":"string","nullable":true}]}}}`, "parameters"},
		{"additionalProperties", `{"type":"object","properties":{"order":{"type":"string"}},"required":["order"],"additionalProperties":false}`, "parametersJsonSchema"},
		{"nested additionalProperties", `{"type":"object","properties":{"o":{"type":"object","additionalProperties":false}}}`, "parametersJsonSchema"},
		{"$schema and $defs", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"x":{"type":"string"}}}`, "parametersJsonSchema"},
		{"type list", `{"type":"object","properties":{"v":{"type":["string","null"]}}}`, "parametersJsonSchema"},
		{"const", `{"type":"object","properties":{"k":{"const":"x"}}}`, "parametersJsonSchema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(raw, &body); err != nil {
					t.Error(err)
				}
				io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}`)
			}))
			defer srv.Close()
			p, err := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-test"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(t.Context(), &llm.Request{Messages: []llm.Message{llm.UserText("hello")},
				Tools: []llm.Tool{{Name: "f", Description: "d", Parameters: json.RawMessage(tc.schema)}}})
			if err != nil {
				t.Fatal(err)
			}
			decl := body["tools"].([]any)[0].(map[string]any)["functionDeclarations"].([]any)[0].(map[string]any)
			got, ok := decl[tc.field]
			if !ok {
				t.Fatalf("declaration %v has no %s", decl, tc.field)
			}
			other := map[string]string{"parameters": "parametersJsonSchema", "parametersJsonSchema": "parameters"}[tc.field]
			if _, both := decl[other]; both {
				t.Fatalf("declaration %v has both fields", decl)
			}
			var want any
			json.Unmarshal([]byte(tc.schema), &want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s = %v, want the schema verbatim %v", tc.field, got, want)
			}
		})
	}
}

// TestCallIDsUniqueAcrossResponses: the Gemini API restarts its ID-less
// calls in every response; the ids this provider gives them differ from
// one response to the next, so a conversation never holds two equal
// tool call ids (another provider would reject its history).
func TestCallIDsUniqueAcrossResponses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}},{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}]}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		nonce func() string
	}{
		{"random", nil},
		{"injected", func() func() string {
			var n atomic.Int32
			return func() string { return fmt.Sprintf("n%d", n.Add(1)) }
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-test", CallNonce: tc.nonce})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			var hist []llm.Message
			for range 3 {
				resp, err := p.Complete(t.Context(), &llm.Request{Messages: []llm.Message{llm.UserText("go")},
					Tools: []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range resp.Message.ToolCalls {
					if seen[c.ID] || !strings.HasPrefix(c.ID, gemini.ClientCallIDPrefix) {
						t.Fatalf("call id %q repeats or lacks the prefix (seen %v)", c.ID, seen)
					}
					seen[c.ID] = true
				}
				hist = append(hist, resp.Message)
			}
			if err := llm.CheckHistory(nil, hist); err != nil {
				t.Fatal(err)
			}
			if tc.nonce != nil && !seen[gemini.ClientCallIDPrefix+"n2-1"] {
				t.Fatalf("injected nonces not used: %v", seen)
			}
		})
	}
}
