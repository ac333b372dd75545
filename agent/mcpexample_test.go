package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// An MCP server's tools as agent tools, through a client that connects
// again when the server closed the connection. (A stdio server is an
// mcp.CommandTransport with a new exec.Cmd each time, its Env set to
// what it needs.) The tools go in agent.Config.Tools.
func ExampleDialMCP() {
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Upper-cases text"},
		func(ctx context.Context, req *mcp.CallToolRequest, a struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()

	ctx := context.Background()
	c, err := agent.DialMCP(ctx, func() mcp.Transport {
		return &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := tools[0].Call(ctx, json.RawMessage(`{"text":"hello"}`))
	fmt.Println(tools[0].Definition.Name, out, err)
	// Output: shout HELLO <nil>
}
