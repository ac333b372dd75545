package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// Schemas as real servers write them, without $schema: Pydantic v1
// ("definitions" + "#/definitions/..."), a 2020-12 one with $defs, and
// ones the exact validator refuses to compile (a required name given
// twice, a draft-07 array of items): arguments are still checked before
// they reach the server, the last by jsonschema-go, as before the exact
// check.
func TestMCPSchemasTheExactValidatorRefuses(t *testing.T) {
	schemas := map[string]string{
		"pyd1":   `{"type":"object","properties":{"v":{"$ref":"#/definitions/N"}},"required":["v"],"definitions":{"N":{"type":"integer"}}}`,
		"defs":   `{"type":"object","properties":{"v":{"$ref":"#/$defs/N"}},"required":["v"],"$defs":{"N":{"type":"integer"}}}`,
		"dupreq": `{"type":"object","properties":{"v":{"type":"integer"}},"required":["v","v"]}`,
		"items7": `{"type":"object","properties":{"v":{"type":"array","items":[{"type":"integer"}]}},"required":["v"]}`,
		"deps":   `{"type":"object","properties":{"v":{"type":"integer"}},"required":["v"],"dependencies":{"v":["w"]}}`,
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "d", Version: "1"}, nil)
	calls := map[string]int{}
	for name, sc := range schemas {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(sc)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls[name]++
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := agent.ConnectMCP(ctx, ct)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := agent.MCPTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		for _, args := range []string{`{"v":"not an integer"}`, `{"v":["x"]}`, `{"v":1}`} {
			_, err := tl.Call(ctx, json.RawMessage(args))
			var ae *agent.ArgumentsError
			refused := errors.As(err, &ae)
			t.Logf("%s %s: checked-refused=%v err=%v", tl.Definition.Name, args, refused, err)
			name := tl.Definition.Name
			switch {
			case args == `{"v":"not an integer"}` && (name == "dupreq" || name == "items7") && !refused:
				t.Errorf("tool %s: %s reached the server unchecked (the previous validator refused it)", name, args)
			}
		}
	}
}
