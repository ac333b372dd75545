package agent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// namedMCP is an MCP server whose tools have the names MCP servers give
// them ("github.create_issue"); calls records the name of each call the
// server received.
func namedMCP(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	s := mcp.NewServer(&mcp.Implementation{Name: "named", Version: "1"}, nil)
	handler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		calls = append(calls, req.Params.Name)
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done by " + req.Params.Name}}}, nil
	}
	issue := map[string]any{
		"type":       "object",
		"properties": map[string]any{"title": map[string]any{"type": "string", "minLength": 1}, "labels": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
		"required":   []any{"title"},
	}
	s.AddTool(&mcp.Tool{Name: "github.create_issue", InputSchema: issue}, handler)
	s.AddTool(&mcp.Tool{Name: "github_create_issue", InputSchema: map[string]any{"type": "object"}}, handler)
	s.AddTool(&mcp.Tool{Name: "fs.read", InputSchema: map[string]any{"type": "object"}}, handler)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(calls) }
}

// Tools with dotted names are offered under names a model API takes and
// called under their own; a call's arguments are checked against the
// tool's input schema before they reach the server.
func TestMCPToolsDottedNamesAndArguments(t *testing.T) {
	ctx := context.Background()
	srv, calls := namedMCP(t)
	cs, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := agent.MCPTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]agent.Tool{}
	for _, tl := range tools {
		byName[tl.Definition.Name] = tl
	}
	if len(byName) != 3 {
		t.Fatalf("offered %v, want three tools", tools)
	}
	create := byName["github_create_issue_a03beba8"]
	if create.Call == nil {
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		t.Fatalf("offered %q: want github.create_issue offered with a hash suffix (github_create_issue is another tool's)", names)
	}
	if out, err := byName["fs_read"].Call(ctx, nil); err != nil || out != "done by fs.read" {
		t.Fatalf("fs_read = %q, %v", out, err)
	}
	if out, err := byName["github_create_issue"].Call(ctx, []byte(`{"anything":1}`)); err != nil || out != "done by github_create_issue" {
		t.Fatalf("github_create_issue = %q, %v", out, err)
	}
	for _, bad := range []string{`{}`, `{"title":5}`, `{"title":""}`, `{"title":"x","labels":[1]}`, `[1]`, `{"title":`} {
		_, err := create.Call(ctx, []byte(bad))
		var ae *agent.ArgumentsError
		if !errors.As(err, &ae) || ae.Tool != create.Definition.Name {
			t.Errorf("arguments %s: err = %v, want an *ArgumentsError naming the offered tool", bad, err)
		}
	}
	if out, err := create.Call(ctx, []byte(`{"title":"broken","labels":["bug"]}`)); err != nil || out != "done by github.create_issue" {
		t.Fatalf("github.create_issue = %q, %v", out, err)
	}
	if got := calls(); !slices.Equal(got, []string{"fs.read", "github_create_issue", "github.create_issue"}) {
		t.Fatalf("the server received %q: arguments that do not fit the schema must not reach it", got)
	}
}
