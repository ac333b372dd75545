package adk

import (
	"testing"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"
)

// TestSchemaCache: a declaration's schema pointer is encoded once and its
// encoding reused; schemas that are not pointers (a map) are encoded each
// time, and the cache stays bounded.
func TestSchemaCache(t *testing.T) {
	c := &schemaCache{}
	ptr := &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"order": {Type: genai.TypeString}}}
	req := func(params any) *model.LLMRequest {
		return &model.LLMRequest{Contents: []*genai.Content{genai.NewContentFromText("hi", genai.RoleUser)},
			Config: &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
				{Name: "lookup", ParametersJsonSchema: params}}}}}}
	}
	a, err := toLLMRequest(req(ptr), c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := toLLMRequest(req(ptr), c)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Tools[0].Parameters) != string(b.Tools[0].Parameters) || &a.Tools[0].Parameters[0] != &b.Tools[0].Parameters[0] {
		t.Errorf("the same schema was encoded twice: %s, %s", a.Tools[0].Parameters, b.Tools[0].Parameters)
	}
	m := map[string]any{"type": "object"}
	for range 2 {
		r, err := toLLMRequest(req(m), c)
		if err != nil || string(r.Tools[0].Parameters) != `{"type":"object"}` {
			t.Fatalf("a map schema: %s, %v", r.Tools[0].Parameters, err)
		}
	}
	for range 3 * schemaCacheMax {
		if _, err := c.encode(&genai.Schema{Type: genai.TypeString}); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > schemaCacheMax {
		t.Errorf("the cache holds %d schemas, over its bound %d", len(c.m), schemaCacheMax)
	}
}
