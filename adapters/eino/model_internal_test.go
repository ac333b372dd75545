package eino

import (
	"context"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/internal/demo"
)

// TestParamsCache: a tool's parameters are encoded once and the encoding
// reused by every call, through models WithTools derives; the cache stays
// bounded.
func TestParamsCache(t *testing.T) {
	params := schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"order": {Type: schema.String, Required: true}})
	tools := []*schema.ToolInfo{{Name: "lookup", Desc: "d", ParamsOneOf: params}, {Name: "none"}}
	m, err := NewProviderModel(demo.Model{}).WithTools(tools)
	if err != nil {
		t.Fatal(err)
	}
	pm := m.(*providerModel)
	in := []*schema.Message{schema.UserMessage("hi")}
	a, err := pm.request(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pm.request(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Tools[0].Parameters) != string(b.Tools[0].Parameters) || &a.Tools[0].Parameters[0] != &b.Tools[0].Parameters[0] {
		t.Errorf("the same parameters were encoded twice: %s, %s", a.Tools[0].Parameters, b.Tools[0].Parameters)
	}
	if string(a.Tools[1].Parameters) != `{"type":"object"}` {
		t.Errorf("a tool without parameters: %s", a.Tools[1].Parameters)
	}
	for range 3 * paramsCacheMax {
		if _, err := pm.params.encode(schema.NewParamsOneOfByParams(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if len(pm.params.m) > paramsCacheMax {
		t.Errorf("the cache holds %d encodings, over its bound %d", len(pm.params.m), paramsCacheMax)
	}
}
