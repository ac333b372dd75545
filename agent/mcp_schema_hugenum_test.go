package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// The argument numbers are bounded (maxArgumentNumberChars/Exponent);
// the schema's numbers, which a server sends, are not.
func TestMCPSchemaHugeNumber(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "d", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"v":{"type":"array","items":{"multipleOf":1e-999999}}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, _ := s.Connect(ctx, st, nil)
	defer ss.Close()
	cs, err := agent.ConnectMCP(ctx, ct)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start := time.Now()
	tools, err := agent.MCPTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listing took %v", time.Since(start))
	for _, n := range []int{1, 10} {
		args := `{"v":[` + strings.TrimSuffix(strings.Repeat("1.3,", n), ",") + `]}`
		start = time.Now()
		_, err = tools[0].Call(ctx, json.RawMessage(args))
		t.Logf("%d numbers: %v, err %v", n, time.Since(start), err)
	}
}
