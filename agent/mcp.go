package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/llm"
)

// ConnectMCP starts an MCP client session over transport: an
// mcp.CommandTransport runs a stdio server as a child process, an
// mcp.StreamableClientTransport talks to a streamable HTTP server. Close
// the session when the agent no longer needs its tools.
func ConnectMCP(ctx context.Context, transport mcp.Transport) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "armature", Version: "0"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("agent: connecting to the MCP server: %w", err)
	}
	return cs, nil
}

// MCPTools returns the tools an MCP server offers as agent tools: the
// server's name, description and input schema are what the model sees,
// and a call goes to the server (tools/call). The result's text content
// is the tool's result; a result the server marks as an error becomes a
// tool error, which the agent reports to the model.
func MCPTools(ctx context.Context, cs *mcp.ClientSession) ([]Tool, error) {
	var tools []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("agent: listing MCP tools: %w", err)
		}
		schema := t.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		params, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("agent: MCP tool %s: input schema: %w", t.Name, err)
		}
		def := llm.Tool{Name: t.Name, Description: t.Description, Parameters: params}
		if err := def.Validate(); err != nil {
			return nil, fmt.Errorf("agent: MCP tool %s: %w", t.Name, err)
		}
		name := t.Name
		tools = append(tools, Tool{
			Definition: def,
			Call: func(ctx context.Context, args json.RawMessage) (string, error) {
				var a any = json.RawMessage(`{}`)
				if len(args) > 0 && string(args) != "null" {
					a = args
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: a})
				if err != nil {
					return "", fmt.Errorf("agent: MCP tool %s: %w", name, err)
				}
				text := mcpText(res)
				if res.IsError {
					return "", errors.New(text)
				}
				return text, nil
			},
		})
	}
	return tools, nil
}

// mcpText renders a tool result: its text content, or its structured
// content as JSON when it has no text.
func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(tc.Text)
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			return string(raw)
		}
	}
	return b.String()
}
