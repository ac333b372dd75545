package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

type weatherArgs struct {
	City  string `json:"city" jsonschema:"the city to look up"`
	Units string `json:"units,omitempty"`
}

func weatherTool(t *testing.T) agent.Tool {
	t.Helper()
	tool, err := agent.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, a weatherArgs) (string, error) {
			if a.City == "Atlantis" {
				return "", errors.New("no such city")
			}
			return fmt.Sprintf("Sunny in %s (%s)", a.City, a.Units), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestNewToolSchemaAndValidation(t *testing.T) {
	tool := weatherTool(t)
	var schema map[string]any
	if err := json.Unmarshal(tool.Definition.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["type"] != "object" || fmt.Sprint(schema["required"]) != "[city]" {
		t.Fatalf("schema = %s", tool.Definition.Parameters)
	}
	props := schema["properties"].(map[string]any)
	if props["city"].(map[string]any)["description"] != "the city to look up" {
		t.Fatalf("city property = %v", props["city"])
	}
	ctx := context.Background()
	for _, tc := range []struct {
		args    string
		want    string
		argsErr bool
		toolErr bool
	}{
		{args: `{"city":"Paris","units":"C"}`, want: "Sunny in Paris (C)"},
		{args: `{"units":"C"}`, argsErr: true},              // required field missing
		{args: `{"city":3}`, argsErr: true},                 // wrong type
		{args: `{"city":"Paris","extra":1}`, argsErr: true}, // additional property
		{args: `not json`, argsErr: true},
		{args: `{"city":"Atlantis"}`, toolErr: true},
	} {
		got, err := tool.Call(ctx, json.RawMessage(tc.args))
		var ae *agent.ArgumentsError
		switch {
		case tc.argsErr:
			if !errors.As(err, &ae) || ae.Tool != "get_weather" {
				t.Errorf("%s: err = %v, want an ArgumentsError", tc.args, err)
			}
		case tc.toolErr:
			if err == nil || errors.As(err, &ae) {
				t.Errorf("%s: err = %v, want the tool's own error", tc.args, err)
			}
		default:
			if err != nil || got != tc.want {
				t.Errorf("%s: got %q, %v; want %q", tc.args, got, err, tc.want)
			}
		}
	}
}

func TestNewToolRejectsNonObjectArguments(t *testing.T) {
	if _, err := agent.NewTool("bad", "", func(ctx context.Context, s string) (string, error) { return s, nil }); !errors.Is(err, agent.ErrInvalidTool) {
		t.Fatalf("err = %v, want ErrInvalidTool", err)
	}
	if _, err := agent.NewTool[weatherArgs]("", "", nil); !errors.Is(err, agent.ErrInvalidTool) {
		t.Fatalf("err = %v, want ErrInvalidTool", err)
	}
}

// The test binary doubles as a stdio MCP server when this variable is set.
const mcpServerEnv = "ARMATURE_AGENT_TEST_MCP_SERVER"

type echoArgs struct {
	Text string `json:"text"`
}

func newMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-tools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Upper-cases text"},
		func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			if a.Text == "" {
				return nil, nil, errors.New("nothing to shout")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
		})
	return s
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(mcpServerEnv); mode != "" {
		s := newMCPServer()
		if mode == "crashy" {
			// A server whose "exit" tool ends its process mid-call.
			mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Exits"},
				func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
					os.Exit(3)
					return nil, nil, nil
				})
		}
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stdioMCP starts the test binary as a stdio MCP server.
func stdioMCP(t *testing.T) *mcp.ClientSession {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), mcpServerEnv+"=1")
	cs, err := agent.ConnectMCP(context.Background(), &mcp.CommandTransport{Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestMCPToolsOverStdioAndHTTP(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil))
	defer srv.Close()
	httpSession, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	defer httpSession.Close()
	for name, cs := range map[string]*mcp.ClientSession{"stdio": stdioMCP(t), "http": httpSession} {
		t.Run(name, func(t *testing.T) {
			tools, err := agent.MCPTools(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) != 1 || tools[0].Definition.Name != "shout" || tools[0].Definition.Description != "Upper-cases text" {
				t.Fatalf("tools = %+v", tools)
			}
			got, err := tools[0].Call(ctx, json.RawMessage(`{"text":"hello"}`))
			if err != nil || got != "HELLO" {
				t.Fatalf("call = %q, %v", got, err)
			}
			if _, err := tools[0].Call(ctx, json.RawMessage(`{"text":""}`)); err == nil || !strings.Contains(err.Error(), "nothing to shout") {
				t.Fatalf("error call = %v", err)
			}
		})
	}
}
