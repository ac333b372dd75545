package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// A tool result's content other than text reaches the model as a note
// saying what came back (an image, a resource link, an embedded
// resource, whose text is passed on), not as an empty result; a result
// marked as an error with no text still says it failed.
func TestMCPResultNonTextContent(t *testing.T) {
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "content", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	size := int64(2048)
	results := map[string]*mcp.CallToolResult{
		"image": {Content: []mcp.Content{
			&mcp.TextContent{Text: "Here is the image:"},
			&mcp.ImageContent{Data: []byte("\x89PNG...."), MIMEType: "image/png"},
		}},
		"audio":         {Content: []mcp.Content{&mcp.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav"}}},
		"link":          {Content: []mcp.Content{&mcp.ResourceLink{URI: "demo://r/1", Name: "Resource 1", MIMEType: "text/plain", Size: &size, Description: "the first"}}},
		"text_resource": {Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "demo://r/2", MIMEType: "text/plain", Text: "resource body"}}}},
		"blob_resource": {Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///x.gz", MIMEType: "application/gzip", Blob: []byte{1, 2, 3}}}}},
		"structured":    {Content: []mcp.Content{}, StructuredContent: map[string]any{"temperature": 21}},
		"image_error":   {IsError: true, Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
		"empty_error":   {IsError: true},
	}
	for name, res := range results {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return res, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()
	tools, done := connectTools(t, ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true})
	defer done()
	want := map[string]string{
		"image":         "Here is the image:\n[image: image/png, 8 bytes, not shown]",
		"audio":         "[audio: audio/wav, 4 bytes, not played]",
		"link":          "[resource link: Resource 1 <demo://r/1>, text/plain, 2048 bytes: the first]",
		"text_resource": "[resource <demo://r/2>, text/plain]\nresource body",
		"blob_resource": "[resource <file:///x.gz>: application/gzip, 3 bytes, not shown]",
		"structured":    `{"temperature":21}`,
		"image_error":   "error: [image: image/png, 1 bytes, not shown]",
		"empty_error":   "error: the MCP tool reported an error and gave no message",
	}
	for _, tl := range tools {
		out, err := tl.Call(ctx, nil)
		if err != nil {
			out = "error: " + err.Error()
		}
		if w := want[tl.Definition.Name]; out != w {
			t.Errorf("%s: %q, want %q", tl.Definition.Name, out, w)
		}
	}
}

// restartable is a streamable HTTP MCP endpoint whose server can be
// restarted: the new one knows none of the old one's sessions and
// answers a request naming one with a 404 (the Go SDK's, the
// specification's answer) or, like the TypeScript servers built on
// express (@modelcontextprotocol/server-everything), with a 400, with
// or without the request's id in its JSON-RPC error.
type restartable struct {
	answer string // "404", "400", "400 with id"

	mu    sync.Mutex
	h     http.Handler
	known map[string]bool
}

func (r *restartable) restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := newMCPServer()
	r.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	r.known = map[string]bool{}
}

func (r *restartable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	h, known := r.h, r.known
	sid := req.Header.Get("Mcp-Session-Id")
	stale := sid != "" && !known[sid]
	r.mu.Unlock()
	if stale && r.answer != "404" {
		body, _ := io.ReadAll(req.Body)
		var in struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &in)
		out := map[string]any{"jsonrpc": "2.0", "error": map[string]any{"code": -32000, "message": "Bad Request: No valid session ID provided"}}
		if r.answer == "400 with id" && in.ID != nil {
			out["id"] = in.ID
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	h.ServeHTTP(w, req)
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		r.mu.Lock()
		if r.h == h {
			r.known[id] = true
		}
		r.mu.Unlock()
	}
}

// An MCPClient over streamable HTTP connects again after its server
// was restarted (which forgot the session): the call the restart
// answers (a 404 for the session, as the Go SDK's server answers, or a
// 400, the TypeScript servers' answer) fails saying the connection was
// lost, and the next one connects again. It is not made again: a 404
// for the session can also end a call the server took (see
// TestMCPSessionMissingAfterCallNotRetried). Before, the session was
// kept and calls failed on it: one more (or, with a 400 whose JSON-RPC
// error has the request's id, every one after it).
func TestMCPClientReconnectsAfterHTTPRestart(t *testing.T) {
	for _, answer := range []string{"404", "400", "400 with id"} {
		t.Run(answer, func(t *testing.T) {
			ctx := context.Background()
			ep := &restartable{answer: answer}
			ep.restart()
			srv := httptest.NewServer(ep)
			defer srv.Close()
			var dials atomic.Int32
			tools, done := dialTools(t, ctx, func() mcp.Transport {
				dials.Add(1)
				return &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1}
			})
			defer done()
			shout := func() (string, error) { return tools[0].Call(ctx, json.RawMessage(`{"text":"hi"}`)) }
			if out, err := shout(); err != nil || out != "HI" {
				t.Fatalf("before the restart: %q, %v", out, err)
			}
			ep.restart()
			out, err := shout()
			if err == nil || !errors.Is(err, mcp.ErrConnectionClosed) || !strings.Contains(err.Error(), "connection to the MCP server was lost") {
				t.Fatalf("the call after a restart answering %s: %q, %v; want an error saying the connection was lost", answer, out, err)
			}
			for i := range 2 {
				if out, err := shout(); err != nil || out != "HI" {
					t.Fatalf("call %d after the restart: %q, %v", i+2, out, err)
				}
			}
			if n := dials.Load(); n != 2 {
				t.Fatalf("%d connections, want 2", n)
			}
		})
	}
}

// A call whose request would be over MaxMCPRequestBytes fails with an
// *ArgumentsError before it is sent: the server would refuse it (the Go
// SDK's streamable HTTP server with a 413), which took the session down,
// so that every later call of every tool failed.
func TestMCPRequestBounded(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil))
	defer srv.Close()
	tools, done := connectTools(t, ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1})
	defer done()
	shout := tools[0]
	// "<" is 6 bytes on the wire (\u003c): 1 MiB of it is over the bound.
	for _, text := range []string{strings.Repeat("a", agent.MaxMCPRequestBytes), strings.Repeat("<", 1<<20)} {
		args, _ := json.Marshal(map[string]string{"text": text})
		var ae *agent.ArgumentsError
		if _, err := shout.Call(ctx, args); !errors.As(err, &ae) || !strings.Contains(err.Error(), "too long") {
			t.Fatalf("a %d-byte argument: %v, want an *ArgumentsError", len(args), err)
		}
	}
	big := strings.Repeat("a", 1<<20)
	if out, err := shout.Call(ctx, json.RawMessage(`{"text":"`+big+`"}`)); err != nil || len(out) != len(big) {
		t.Fatalf("a 1 MiB argument: %d bytes, %v", len(out), err)
	}
	if out, err := shout.Call(ctx, json.RawMessage(`{"text":"hi"}`)); err != nil || out != "HI" {
		t.Fatalf("the call after: %q, %v", out, err)
	}
}

// pipeServer runs newMCPServer over a pair of pipes and returns the
// client's transport and a function that closes the server's reading
// end, as the exit of a stdio server's process does (its writing end is
// kept open, so that the client's reader does not see the end first: a
// write to a killed child often finds the pipe broken before the reader
// reads its end).
func pipeServer(t *testing.T) (mcp.Transport, func()) {
	t.Helper()
	sr, cw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sr.Close(); cw.Close(); cr.Close(); sw.Close() })
	go func() {
		_ = newMCPServer().Run(context.Background(), &mcp.IOTransport{Reader: sr, Writer: nopCloser{sw}})
	}()
	return &mcp.IOTransport{Reader: cr, Writer: cw}, func() { sr.Close() }
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// A call written to a stdio server whose process is gone (the pipe is
// broken) never reached it: an MCPClient makes it again on a new
// connection, and a session of ConnectMCP fails it with an error saying
// that the connection was lost (mcp.ErrConnectionClosed). Before, the
// MCPClient failed the call, and the error named a broken pipe alone.
func TestMCPCallOnDeadStdioServer(t *testing.T) {
	ctx := context.Background()
	var kills []func()
	var mu sync.Mutex
	tools, done := dialTools(t, ctx, func() mcp.Transport {
		tr, kill := pipeServer(t)
		mu.Lock()
		kills = append(kills, kill)
		mu.Unlock()
		return tr
	})
	defer done()
	shout := func(tl agent.Tool) (string, error) { return tl.Call(ctx, json.RawMessage(`{"text":"hi"}`)) }
	for round := range 2 {
		mu.Lock()
		kills[len(kills)-1]()
		mu.Unlock()
		if out, err := shout(tools[0]); err != nil || out != "HI" {
			t.Fatalf("round %d: the call after the server died: %q, %v; want it made on a new connection", round, out, err)
		}
	}
	if len(kills) != 3 {
		t.Fatalf("%d connections, want 3", len(kills))
	}

	tr, kill := pipeServer(t)
	cs, err := agent.ConnectMCP(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err = agent.MCPTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	kill()
	for range 2 {
		_, err := shout(tools[0])
		if !errors.Is(err, mcp.ErrConnectionClosed) || !strings.Contains(err.Error(), "connection to the MCP server was lost") {
			t.Fatalf("a call on a ConnectMCP session whose server died: %v", err)
		}
	}
}

// TestMCPSessionMissingAfterCallNotRetried: a streamable HTTP server
// took a tools/call, sent a priming event and went away (restarted);
// the SDK resumes the stream and is answered 404 for the session
// (mcp.ErrSessionMissing), which it reports for the call. The call
// reached the server and may have acted (charged a card): it fails, and
// is not made again on a new session.
func TestMCPSessionMissingAfterCallNotRetried(t *testing.T) {
	var calls, sessions atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if r.Header.Get("Last-Event-ID") != "" {
				http.Error(w, "session not found", http.StatusNotFound) // server restarted: session forgotten
				return
			}
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		case http.MethodDelete:
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &req)
		reply := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
		}
		switch req.Method {
		case "initialize":
			n := sessions.Add(1)
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
			reply(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}`)
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/list":
			reply(`{"tools":[{"name":"charge","inputSchema":{"type":"object"}}]}`)
		case "server/discover":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.ID)
		case "ping":
			reply(`{}`)
		case "tools/call":
			calls.Add(1) // the server acts on the call (e.g. charges a card)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "id: 1\ndata: \n\n") // priming event (resumable stream)
			w.(http.Flusher).Flush()
			// then the server restarts: the stream ends without the response
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, done := dialTools(t, ctx, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: srv.URL} })
	defer done()
	out, err := tools[0].Call(ctx, json.RawMessage(`{}`))
	t.Logf("out=%q err=%v tools/call received by server: %d, sessions: %d", out, err, calls.Load(), sessions.Load())
	if err == nil {
		t.Error("the call answered, want it failed (its response never came)")
	}
	if calls.Load() != 1 {
		t.Errorf("the server received the call %d times, want once", calls.Load())
	}
}

// A streamable HTTP server that refuses a call for now (429 Too Many
// Requests, 503) keeps its session: the call fails, saying so, and the
// next one goes out on the same session. Before, the failure was
// followed by a ping, which the rate-limited server refused too, so
// the session was dropped and initialized again, losing the server's
// state of it.
func TestMCPTransientRefusalKeepsSession(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			ctx := context.Background()
			sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil)
			var (
				limited      atomic.Bool // the server refuses calls and pings
				inits, pings atomic.Int32
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(strings.NewReader(string(body)))
					switch {
					case strings.Contains(string(body), `"method":"initialize"`):
						inits.Add(1)
					case strings.Contains(string(body), `"method":"ping"`):
						pings.Add(1)
						if limited.Load() {
							http.Error(w, http.StatusText(status), status)
							return
						}
					case strings.Contains(string(body), `"method":"tools/call"`) && limited.Load():
						http.Error(w, http.StatusText(status), status)
						return
					}
				}
				sdk.ServeHTTP(w, r)
			}))
			defer srv.Close()
			tools, done := dialTools(t, ctx, func() mcp.Transport {
				return &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1}
			})
			defer done()
			limited.Store(true)
			if _, err := tools[0].Call(ctx, json.RawMessage(`{"text":"hi"}`)); err == nil || !strings.Contains(err.Error(), http.StatusText(status)) ||
				errors.Is(err, mcp.ErrConnectionClosed) {
				t.Fatalf("the refused call: %v; want it failed with %q, the connection not lost", err, http.StatusText(status))
			}
			limited.Store(false)
			if out, err := tools[0].Call(ctx, json.RawMessage(`{"text":"hi"}`)); err != nil || out != "HI" {
				t.Fatalf("the next call: %q, %v", out, err)
			}
			if n, p := inits.Load(), pings.Load(); n != 1 || p != 0 {
				t.Fatalf("%d sessions initialized and %d pings, want 1 and none", n, p)
			}
		})
	}
}

// connectTools connects to the MCP server tr reaches (ConnectMCP) and
// lists its tools; done closes the session.
func connectTools(t *testing.T, ctx context.Context, tr mcp.Transport) (tools []agent.Tool, done func()) {
	t.Helper()
	cs, err := agent.ConnectMCP(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err = agent.MCPTools(ctx, cs); err != nil {
		cs.Close()
		t.Fatal(err)
	}
	return tools, func() { cs.Close() }
}

// dialTools dials an MCPClient with newTransport (DialMCP) and lists its
// tools; done closes the client.
func dialTools(t *testing.T, ctx context.Context, newTransport func() mcp.Transport) (tools []agent.Tool, done func()) {
	t.Helper()
	c, err := agent.DialMCP(ctx, newTransport)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err = c.Tools(ctx); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return tools, func() { c.Close() }
}
