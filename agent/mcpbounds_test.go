package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

// hostileMCP is an MCP server over streamable HTTP whose tools misbehave
// as a hostile or broken server's would: "huge" answers n bytes, "hang"
// never answers (until its request ends), and two tools have names a
// model API refuses.
func hostileMCP(t *testing.T, huge int, jsonResponse bool) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "huge", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("é", huge/2)}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "hang", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(&mcp.Tool{Name: "x\u202eevil\nname", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	s.AddTool(&mcp.Tool{Name: strings.Repeat("n", 65), InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
	t.Cleanup(srv.Close)
	return srv
}

// An MCP tool whose name the MCP specification does not allow is left
// out, the others offered (a 65-character name cut to one a model API
// takes), and the error says which were skipped and why.
func TestMCPToolsSkipsUnofferableTools(t *testing.T) {
	ctx := context.Background()
	srv := hostileMCP(t, 10, true)
	cs, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := agent.MCPTools(ctx, cs)
	var sk *agent.SkippedMCPToolsError
	if !errors.As(err, &sk) || len(sk.Skipped) != 1 || sk.Skipped["x\u202eevil\nname"] == "" {
		t.Fatalf("err = %v, want the tool with control characters in its name skipped", err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Definition.Name)
	}
	if strings.Join(names, ",") != "hang,huge,"+strings.Repeat("n", 55)+"_99070731" {
		t.Fatalf("tools %q, want hang, huge and the long name cut", names)
	}
}

// A streamable HTTP MCP server's response is read up to
// MaxMCPResponseBytes, as a JSON body and as a server-sent event: a
// longer one fails the call rather than fill the memory.
func TestMCPResponseBounded(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		name := map[bool]string{true: "json", false: "sse"}[jsonResponse]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			srv := hostileMCP(t, agent.MaxMCPResponseBytes+1<<20, jsonResponse)
			cs, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools, _ := agent.MCPTools(ctx, cs)
			huge := tools[1]
			out, err := huge.Call(ctx, nil)
			if err == nil {
				t.Fatalf("a %d-byte result read whole (%d bytes)", agent.MaxMCPResponseBytes+1<<20, len(out))
			}
		})
	}
}

// An MCP endpoint's key (in its query or path) never shows in an error:
// neither at connect nor in a tool call's error, which the model, the
// history and the run's events get.
func TestMCPErrorsNameNoEndpointKey(t *testing.T) {
	ctx := context.Background()
	const secret = "sk-url-SECRET-777"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	_, err = agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp/" + secret + "?token=" + secret, MaxRetries: -1})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("connect error %v: want one that does not name the key", err)
	}

	// A server that goes away after the tools were listed.
	srv := hostileMCP(t, 10, true)
	cs, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/?token=" + secret, DisableStandaloneSSE: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, _ := agent.MCPTools(ctx, cs)
	srv.CloseClientConnections()
	srv.Close()
	_, err = tools[1].Call(ctx, nil)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("call error %v: want one that does not name the key", err)
	}
}

// A redirect to another origin is not followed: credentials the client
// adds would go to a server the endpoint did not name.
func TestMCPRedirectToAnotherOriginRefused(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	_, err := agent.ConnectMCP(context.Background(), &mcp.StreamableClientTransport{Endpoint: redirector.URL, MaxRetries: -1})
	if err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("connect error %v, want a refused redirect", err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
}

// The agent bounds a tool call's time and its result's size: a hung MCP
// tool's call ends after ToolTimeout with an error the model is told,
// and the turn completes; a huge result is cut (at a character
// boundary) with a note, before the model or the history gets it.
func TestAgentBoundsToolCalls(t *testing.T) {
	ctx := context.Background()
	srv := hostileMCP(t, 100_000, false)
	cs, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, _ := agent.MCPTools(ctx, cs)
	tests := []struct {
		name   string
		call   llm.ToolCall
		mutate func(*agent.Config)
		check  func(t *testing.T, result string)
	}{
		{"hung tool", call("c1", "hang", `{}`), func(c *agent.Config) { c.ToolTimeout = 100 * time.Millisecond }, func(t *testing.T, result string) {
			if !strings.HasPrefix(result, "error: the tool did not answer within 100ms and was stopped; what it did before is not known") {
				t.Fatalf("result %q", result)
			}
		}},
		{"huge result", call("c1", "huge", `{}`), func(c *agent.Config) { c.MaxToolResultBytes = 1001 }, func(t *testing.T, result string) {
			body, note, ok := strings.Cut(result, "\n[cut: ")
			if !ok || len(body) != 1000 || !utf8.ValidString(body) || !strings.Contains(note, "100000 bytes") {
				t.Fatalf("result %d bytes: %.60q … %q", len(result), result, note)
			}
		}},
		{"default bound", call("c1", "huge", `{}`), nil, func(t *testing.T, result string) {
			if result != strings.Repeat("é", 50_000) {
				t.Fatalf("a %d-byte result under the default bound changed: %d bytes", 100_000, len(result))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := llmtest.New(llmtest.CallTools(tc.call), llmtest.Reply("ok"))
			cfg := agent.Config{Provider: p, Tools: tools}
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			h := agentChat(t, cfg, session.NewMemoryStore(session.MemoryConfig{}))
			out, err := h.Send(ctx, "s1", llm.UserText("go"))
			if err != nil {
				t.Fatal(err)
			}
			c, ok := out.(*chat.Completed)
			if !ok || len(c.Replies) != 3 {
				t.Fatalf("outcome %T %+v", out, out)
			}
			tc.check(t, c.Replies[1].Text())
			// The model was sent the same bounded result.
			reqs := p.Requests()
			sent := reqs[len(reqs)-1].Transcript()
			if got := sent[len(sent)-1].Text(); got != c.Replies[1].Text() {
				t.Fatalf("the model was sent %d bytes, the history keeps %d", len(got), len(c.Replies[1].Text()))
			}
		})
	}
}

// An MCPClient connects again when its stdio server's child exited (a
// crash mid-call): the call under way fails, the next goes to a new
// child; with a session of ConnectMCP every later call would fail.
func TestMCPClientReconnects(t *testing.T) {
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var spawned atomic.Int32
	c, err := agent.DialMCP(ctx, func() mcp.Transport {
		spawned.Add(1)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), mcpServerEnv+"=crashy")
		return &mcp.CommandTransport{Command: cmd}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]agent.Tool{}
	for _, tl := range tools {
		byName[tl.Definition.Name] = tl
	}
	shout := func() (string, error) { return byName["shout"].Call(ctx, []byte(`{"text":"hi"}`)) }
	for round := range 2 {
		if _, err := byName["exit"].Call(ctx, []byte(`{"text":"x"}`)); err == nil {
			t.Fatalf("round %d: the call whose server exited succeeded", round)
		}
		got, err := shout()
		if err != nil || got != "HI" {
			t.Fatalf("round %d: the call after the server exited: %q, %v", round, got, err)
		}
	}
	if n := spawned.Load(); n != 3 {
		t.Fatalf("%d children spawned, want 3 (the first and one per exit)", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := shout(); !errors.Is(err, agent.ErrMCPClosed) {
		t.Fatalf("a call after Close: %v, want ErrMCPClosed", err)
	}
}

// A call waits for another call's reconnect only as long as its own
// context lasts (a reconnected server that never answers initialize),
// and Close does not wait for it.
func TestMCPClientReconnectWithinContext(t *testing.T) {
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	c, err := agent.DialMCP(ctx, func() mcp.Transport {
		if n.Add(1) == 1 {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), mcpServerEnv+"=crashy")
			return &mcp.CommandTransport{Command: cmd}
		}
		return &mcp.CommandTransport{Command: exec.Command("sleep", "30")} // never answers initialize
	})
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := c.Tools(ctx)
	byName := map[string]agent.Tool{}
	for _, tl := range tools {
		byName[tl.Definition.Name] = tl
	}
	_, _ = byName["exit"].Call(ctx, []byte(`{"text":"x"}`))
	reconnecting := make(chan struct{})
	go func() {
		defer close(reconnecting)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, _ = byName["shout"].Call(cctx, []byte(`{"text":"hi"}`)) // reconnects, hangs in initialize
	}()
	time.Sleep(200 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := byName["shout"].Call(cctx, []byte(`{"text":"hi"}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call: %v, want its deadline", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a call with a 100ms context waited %v for another call's reconnect", took)
	}
	start = time.Now()
	_ = c.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close waited %v for a reconnect", took)
	}
	<-reconnecting
}

// Tool.Bounded bounds a tool another framework runs as the agent bounds
// its own: a call past the timeout fails saying so, a long result or
// error text is cut, and the error still unwraps to the tool's.
func TestToolBounded(t *testing.T) {
	ctx := context.Background()
	errLong := errors.New(strings.Repeat("x", 100))
	tool := agent.Tool{Call: func(ctx context.Context, args json.RawMessage) (string, error) {
		switch string(args) {
		case "hang":
			<-ctx.Done()
			return "", ctx.Err()
		case "long":
			return strings.Repeat("y", 100), nil
		default:
			return "", errLong
		}
	}}
	b := tool.Bounded(50*time.Millisecond, 10)
	if _, err := b.Call(ctx, []byte("hang")); err == nil || !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Fatalf("hung call: %v", err)
	}
	if out, err := b.Call(ctx, []byte("long")); err != nil || !strings.HasPrefix(out, "yyyyyyyyyy\n[cut: ") {
		t.Fatalf("long result: %q, %v", out, err)
	}
	if _, err := b.Call(ctx, []byte("err")); err == nil || !strings.HasPrefix(err.Error(), "xxxxxxxxxx\n[cut: ") || !errors.Is(err, errLong) {
		t.Fatalf("long error: %v", err)
	}
	if d := tool.Bounded(0, 0); d.Call == nil {
		t.Fatal("Bounded with the defaults has no Call")
	}
}
