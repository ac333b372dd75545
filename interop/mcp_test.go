package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/npmtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

// The MCP reference servers the suite runs against (MIT, pinned): one
// with a tool for each kind of result, over stdio and streamable HTTP,
// and one that serves a directory over stdio.
const (
	everythingPkg     = "@modelcontextprotocol/server-everything"
	everythingVersion = "2026.8.31"
	filesystemPkg     = "@modelcontextprotocol/server-filesystem"
	filesystemVersion = "2026.8.31"
)

// secret is in the environment of this process only: a stdio server is
// started with the environment it needs and must not see it.
const secret = "sk-interop-SECRET-4242"

// stopWithin is how long closing a stdio session waits for the server
// to exit before it is signalled (server-everything does not exit when
// its stdin closes).
const stopWithin = 300 * time.Millisecond

// serverEnv is the environment a stdio server is started with.
func serverEnv() []string { return []string{"PATH=" + os.Getenv("PATH"), "ARMATURE_INTEROP=1"} }

// everythingCmd is server-everything's command for transport ("stdio"
// or "streamableHttp").
func everythingCmd(t *testing.T, transport string) *exec.Cmd {
	t.Helper()
	dir := npmtest.Install(t, everythingPkg, everythingVersion)
	cmd := exec.Command("node", filepath.Join(dir, "node_modules", everythingPkg, "dist", "index.js"), transport)
	cmd.Env = serverEnv()
	return cmd
}

// everythingStdio connects to a new server-everything over stdio.
func everythingStdio(t *testing.T) *mcp.ClientSession {
	t.Helper()
	cs, err := agent.ConnectMCP(t.Context(), &mcp.CommandTransport{Command: everythingCmd(t, "stdio"), TerminateDuration: stopWithin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// freePort is a free port of the ones this suite may use.
func freePort(t *testing.T) int {
	t.Helper()
	for port := 19840; port < 19860; port++ {
		if ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port in 19840-19859")
	return 0
}

// dialTools dials an MCPClient with newTransport, closed when the test
// ends, and lists its tools.
func dialTools(t *testing.T, ctx context.Context, newTransport func() mcp.Transport) []agent.Tool {
	t.Helper()
	c, err := agent.DialMCP(ctx, newTransport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// startEverythingHTTP runs server-everything over streamable HTTP on port
// and returns a function that kills it (and waits for its end).
func startEverythingHTTP(t *testing.T, port int) (stop func()) {
	t.Helper()
	cmd := everythingCmd(t, "streamableHttp")
	cmd.Env = append(cmd.Env, fmt.Sprintf("PORT=%d", port))
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(errOut)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				up <- true
			}
		}
		if !said {
			up <- false
		}
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatal("server-everything (streamable HTTP) exited before it listened")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything (streamable HTTP) did not start")
	}
	return stop
}

func byName(tools []agent.Tool) map[string]agent.Tool {
	m := map[string]agent.Tool{}
	for _, tl := range tools {
		m[tl.Definition.Name] = tl
	}
	return m
}

// offered lists cs's tools through MCPTools and checks that each tool the
// server lists is offered or skipped with a reason.
func offered(t *testing.T, cs *mcp.ClientSession) []agent.Tool {
	t.Helper()
	ctx := t.Context()
	var listed []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, tl.Name)
	}
	tools, err := agent.MCPTools(ctx, cs)
	skipped := map[string]string{}
	var sk *agent.SkippedMCPToolsError
	if errors.As(err, &sk) {
		skipped = sk.Skipped
	} else if err != nil {
		t.Fatal(err)
	}
	if len(tools)+len(skipped) != len(listed) {
		t.Fatalf("%d tools listed, %d offered and %d skipped", len(listed), len(tools), len(skipped))
	}
	got := byName(tools)
	for _, name := range listed {
		// The reference servers' names are all ones a model API takes.
		if _, ok := got[name]; !ok && skipped[name] == "" {
			t.Errorf("tool %q is neither offered nor skipped with a reason", name)
		}
	}
	for _, tl := range tools {
		if err := tl.Definition.Validate(); err != nil {
			t.Errorf("tool %s: %v", tl.Definition.Name, err)
		}
	}
	return tools
}

func definitions(tools []agent.Tool) string {
	var defs []string
	for _, tl := range tools {
		b, _ := json.Marshal(tl.Definition)
		defs = append(defs, string(b))
	}
	slices.Sort(defs)
	return strings.Join(defs, "\n")
}

// Every tool the reference servers list is offered (or skipped with a
// reason), under the same name and definition on a second connection
// and over streamable HTTP.
func TestMCPReferenceServersTools(t *testing.T) {
	first := offered(t, everythingStdio(t))
	second := offered(t, everythingStdio(t))
	if len(first) < 12 {
		t.Fatalf("%d tools offered", len(first))
	}
	if definitions(first) != definitions(second) {
		t.Fatalf("the tools differ between two connections:\n%s\n---\n%s", definitions(first), definitions(second))
	}
	port := freePort(t)
	startEverythingHTTP(t, port)
	cs, err := agent.ConnectMCP(t.Context(), &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if overHTTP := offered(t, cs); definitions(overHTTP) != definitions(first) {
		t.Fatalf("the tools differ between stdio and streamable HTTP:\n%s\n---\n%s", definitions(first), definitions(overHTTP))
	}

	fsTools := offered(t, filesystemStdio(t, t.TempDir()))
	for _, name := range []string{"read_text_file", "write_file", "list_directory", "read_media_file", "edit_file"} {
		if _, ok := byName(fsTools)[name]; !ok {
			t.Errorf("server-filesystem's %s is not offered", name)
		}
	}
}

// filesystemStdio connects to a new server-filesystem serving root.
func filesystemStdio(t *testing.T, root string) *mcp.ClientSession {
	t.Helper()
	dir := npmtest.Install(t, filesystemPkg, filesystemVersion)
	cmd := exec.Command("node", filepath.Join(dir, "node_modules", filesystemPkg, "dist", "index.js"), root)
	cmd.Env = serverEnv()
	cs, err := agent.ConnectMCP(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: stopWithin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callCase is a call of a tool and what it must give: a result that
// contains want, or an error that contains wantErr (an *ArgumentsError,
// refused before it reached the server, when args is set).
type callCase struct {
	tool, args string
	want       string
	wantErr    string
	argsErr    bool
}

func runCalls(t *testing.T, tools map[string]agent.Tool, cases []callCase) {
	t.Helper()
	for _, c := range cases {
		tl, ok := tools[c.tool]
		if !ok {
			t.Errorf("no tool %s", c.tool)
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		out, err := tl.Call(ctx, json.RawMessage(c.args))
		cancel()
		var ae *agent.ArgumentsError
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s %.80s: %v", c.tool, c.args, err)
		case c.wantErr == "" && !strings.Contains(out, c.want):
			t.Errorf("%s %.80s: %.300q, want it to contain %q", c.tool, c.args, out, c.want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s %.80s: %.200q, %v; want an error containing %q", c.tool, c.args, out, err, c.wantErr)
		case c.wantErr != "" && errors.As(err, &ae) != c.argsErr:
			t.Errorf("%s %.80s: %v is an *ArgumentsError: %v, want %v", c.tool, c.args, err, !c.argsErr, c.argsErr)
		}
	}
}

// server-everything's tools through the agent's Tool: valid, invalid
// (refused before they reach the server, as *ArgumentsError), missing
// and huge arguments, unicode, each kind of content (images, embedded
// resources, resource links, structured content), a result marked as an
// error, a long operation, and the environment the server sees.
func TestMCPEverythingCalls(t *testing.T) {
	tools := byName(offered(t, everythingStdio(t)))
	huge, _ := json.Marshal(map[string]string{"message": strings.Repeat("é", 1<<20)}) // 2 MiB
	tooHuge, _ := json.Marshal(map[string]string{"message": strings.Repeat("é", 5<<19)})
	runCalls(t, tools, []callCase{
		{tool: "echo", args: `{"message":"héllo wörld 😀 \u202e ✓"}`, want: "Echo: héllo wörld 😀 \u202e ✓"},
		{tool: "echo", args: `{"message":"x","extra":true}`, want: "Echo: x"},
		{tool: "echo", args: string(huge), want: "Echo: éééé"},
		{tool: "get-sum", args: `{"a":1.5,"b":-2}`, want: "The sum of 1.5 and -2 is -0.5."},
		// Schema violations, refused before the call.
		{tool: "echo", args: `{"message":5}`, wantErr: "at '/message': got number, want string", argsErr: true},
		{tool: "echo", args: `{}`, wantErr: "missing property 'message'", argsErr: true},
		{tool: "echo", args: `[1]`, wantErr: "invalid arguments", argsErr: true},
		{tool: "echo", args: `{"message":`, wantErr: "invalid arguments", argsErr: true},
		{tool: "get-sum", args: `{"a":"1","b":2}`, wantErr: "at '/a': got string, want number", argsErr: true},
		{tool: "get-structured-content", args: `{"location":"Paris"}`, wantErr: "value must be one of", argsErr: true},
		{tool: "get-resource-links", args: `{"count":11}`, wantErr: "maximum", argsErr: true},
		{tool: "get-annotated-message", args: `{"messageType":"debug","includeImage":"yes"}`, wantErr: "at '/includeImage': got string, want boolean", argsErr: true},
		// Over MaxMCPRequestBytes: refused, and the session lives on.
		{tool: "echo", args: string(tooHuge), wantErr: "too long", argsErr: true},
		{tool: "echo", args: `{"message":"still here"}`, want: "Echo: still here"},
		// Defaults of the schema are the server's to fill.
		{tool: "get-resource-links", args: ``, want: "Here are 3 resource links"},
		// Content other than text.
		{tool: "get-tiny-image", args: `{}`, want: "Here's the image you requested:\n[image: image/png, "},
		{tool: "get-annotated-message", args: `{"messageType":"success","includeImage":true}`, want: "Operation completed successfully\n[image: image/png, "},
		{tool: "get-resource-reference", args: `{"resourceType":"Text","resourceId":3}`, want: "[resource <demo://resource/dynamic/text/3>, text/plain]\nResource 3: "},
		{tool: "get-resource-reference", args: `{"resourceType":"Blob","resourceId":2}`, want: "[resource <demo://resource/dynamic/blob/2>: "},
		{tool: "get-resource-links", args: `{"count":2}`, want: "[resource link: Text Resource 2 <demo://resource/dynamic/text/2>, text/plain: Resource 2: plaintext resource]"},
		{tool: "gzip-file-as-resource", args: `{"name":"hi.gz","data":"data:text/plain;base64,aGVsbG8=","outputType":"resource"}`, want: "[resource <demo://resource/session/hi.gz>: application/gzip, "},
		{tool: "gzip-file-as-resource", args: `{"name":"hi2.gz","data":"data:text/plain;base64,aGVsbG8="}`, want: "[resource link: hi2.gz <demo://resource/session/hi2.gz>, application/gzip]"},
		{tool: "get-structured-content", args: `{"location":"Chicago"}`, want: `{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}`},
		// A result marked as an error.
		{tool: "get-resource-reference", args: `{"resourceType":"Text","resourceId":0}`, wantErr: "Invalid resourceId: 0"},
		// A tool that needs the tasks extension, which the client
		// does not have: the server's refusal reaches the model.
		{tool: "simulate-research-query", args: `{"topic":"x"}`, wantErr: "requires task augmentation"},
		// A long operation (its progress notifications go to no
		// one: the client sends no progress token).
		{tool: "trigger-long-running-operation", args: `{"duration":0.6,"steps":3}`, want: "Long running operation completed. Duration: 0.6 seconds, Steps: 3."},
		// The client supports roots and has none.
		{tool: "get-roots-list", args: `{}`, want: "no roots are currently configured"},
	})
	env, err := tools["get-env"].Call(t.Context(), nil)
	if err != nil || !strings.Contains(env, "ARMATURE_INTEROP") || strings.Contains(env, secret) {
		t.Fatalf("the server's environment: %v %.300s", err, env)
	}
}

// A call whose context ends mid-call returns at once with the context's
// error, and the session goes on working; 20 calls at once on one
// session each get their own answer.
func TestMCPEverythingCancelAndConcurrency(t *testing.T) {
	port := freePort(t)
	startEverythingHTTP(t, port)
	sessions := map[string]*mcp.ClientSession{"stdio": everythingStdio(t)}
	cs, err := agent.ConnectMCP(t.Context(), &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	sessions["http"] = cs
	for name, cs := range sessions {
		t.Run(name, func(t *testing.T) {
			tools := byName(offered(t, cs))
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := tools["trigger-long-running-operation"].Call(ctx, json.RawMessage(`{"duration":20,"steps":20}`))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("cancelled call: %v, want the context's deadline", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("the cancelled call returned after %v", took)
			}
			runCalls(t, tools, []callCase{{tool: "echo", args: `{"message":"after"}`, want: "Echo: after"}})

			var wg sync.WaitGroup
			errs := make(chan error, 20)
			for i := range 20 {
				wg.Go(func() {
					out, err := tools["get-sum"].Call(t.Context(), json.RawMessage(fmt.Sprintf(`{"a":%d,"b":1000}`, i)))
					if want := fmt.Sprintf("The sum of %d and 1000 is %d.", i, i+1000); err != nil || out != want {
						errs <- fmt.Errorf("call %d: %q, %v; want %q", i, out, err, want)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// server-filesystem, restricted to a temporary directory: files with
// unicode names written and read, a path outside refused by the server,
// a media file's content described, schema violations refused before
// the call.
func TestMCPFilesystem(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("héllo\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(root), "outside-"+filepath.Base(root)+".txt")
	if err := os.WriteFile(outside, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(outside) })
	tools := byName(offered(t, filesystemStdio(t, root)))
	p := func(name string) string { b, _ := json.Marshal(filepath.Join(root, name)); return string(b) }
	runCalls(t, tools, []callCase{
		{tool: "list_allowed_directories", args: `{}`, want: root},
		{tool: "read_text_file", args: `{"path":` + p("a.txt") + `}`, want: "héllo\nworld\n"},
		{tool: "write_file", args: `{"path":` + p("ü 😀.txt") + `,"content":"ünïcode 😀\n"}`, want: "Successfully wrote"},
		{tool: "read_text_file", args: `{"path":` + p("ü 😀.txt") + `}`, want: "ünïcode 😀\n"},
		{tool: "list_directory", args: `{"path":` + p("") + `}`, want: "[FILE] ü 😀.txt"},
		{tool: "read_media_file", args: `{"path":` + p("a.txt") + `}`, want: "[resource <file://"},
		{tool: "read_text_file", args: `{"path":` + p("../"+filepath.Base(outside)) + `}`, wantErr: "Access denied"},
		{tool: "read_text_file", args: `{"path":"/etc/passwd"}`, wantErr: "Access denied"},
		{tool: "read_text_file", args: `{"path":` + p("nope.txt") + `}`, wantErr: "ENOENT"},
		{tool: "read_text_file", args: `{"path":5}`, wantErr: "at '/path': got number, want string", argsErr: true},
		{tool: "write_file", args: `{"path":` + p("b.txt") + `}`, wantErr: "missing property 'content'", argsErr: true},
		{tool: "read_multiple_files", args: `{"paths":[]}`, wantErr: "minItems", argsErr: true},
	})
	if _, err := os.Stat(filepath.Join(root, "b.txt")); err == nil {
		t.Fatal("write_file without content reached the server")
	}
}

// waitDead waits until the process pid has exited, all its threads
// (and so has closed its files): a zombie that its parent has not reaped
// yet counts.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		_, after, _ := strings.Cut(string(stat), ") ")
		threads, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if strings.HasPrefix(after, "Z") && (err != nil || len(threads) <= 1) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("process %d did not die", pid)
}

// A stdio server's child killed (kill -9) between calls: the tools of a
// ConnectMCP session fail saying the connection was lost; an MCPClient
// starts a new child at the next call, which succeeds.
func TestMCPStdioServerKilled(t *testing.T) {
	ctx := t.Context()
	cmd := everythingCmd(t, "stdio")
	cs, err := agent.ConnectMCP(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: stopWithin})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools := byName(offered(t, cs))
	runCalls(t, tools, []callCase{{tool: "echo", args: `{"message":"hi"}`, want: "Echo: hi"}})
	_ = cmd.Process.Kill()
	waitDead(t, cmd.Process.Pid)
	for range 2 {
		_, err := tools["echo"].Call(ctx, json.RawMessage(`{"message":"hi"}`))
		if !errors.Is(err, mcp.ErrConnectionClosed) || !strings.Contains(err.Error(), "connection to the MCP server was lost") {
			t.Fatalf("a call after the server was killed: %v, want one saying the connection was lost", err)
		}
	}

	var mu sync.Mutex
	var children []*exec.Cmd
	c, err := agent.DialMCP(ctx, func() mcp.Transport {
		cmd := everythingCmd(t, "stdio")
		mu.Lock()
		children = append(children, cmd)
		mu.Unlock()
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: stopWithin}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dialed, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tools = byName(dialed)
	for round := range 2 {
		mu.Lock()
		child := children[len(children)-1]
		mu.Unlock()
		_ = child.Process.Kill()
		waitDead(t, child.Process.Pid)
		runCalls(t, tools, []callCase{{tool: "echo", args: fmt.Sprintf(`{"message":"round %d"}`, round), want: fmt.Sprintf("Echo: round %d", round)}})
	}
	if len(children) != 3 {
		t.Fatalf("%d children started, want 3", len(children))
	}
	if err := c.Close(); err != nil {
		t.Log(err) // the killed children's exit status
	}
	if _, err := tools["echo"].Call(ctx, json.RawMessage(`{"message":"x"}`)); !errors.Is(err, agent.ErrMCPClosed) {
		t.Fatalf("a call after Close: %v", err)
	}
}

// Over streamable HTTP, with a key in the endpoint's user information
// and query: the server stopped mid-session fails the call, and once it
// is back the next call connects again and succeeds; a redirect to
// another origin is refused; no error names the key.
func TestMCPStreamableHTTP(t *testing.T) {
	ctx := t.Context()
	port := freePort(t)
	stop := startEverythingHTTP(t, port)
	endpoint := fmt.Sprintf("http://armature:pw-%s@127.0.0.1:%d/mcp?token=%s", secret, port, secret)
	var errs []error
	noKey := func(err error) {
		t.Helper()
		errs = append(errs, err)
		if err != nil && (strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "pw-")) {
			t.Errorf("an error names the endpoint's key: %v", err)
		}
	}
	var dials atomic.Int32
	tools := byName(dialTools(t, ctx, func() mcp.Transport {
		dials.Add(1)
		return &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}
	}))
	echo := func(msg string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return tools["echo"].Call(cctx, json.RawMessage(`{"message":"`+msg+`"}`))
	}
	if out, err := echo("up"); err != nil || out != "Echo: up" {
		t.Fatalf("%q %v", out, err)
	}
	stop()
	for range 2 {
		_, err := echo("down")
		noKey(err)
		// Refused, or lost with the standalone SSE stream that noticed
		// first (which of the two depends on timing).
		if err == nil || !strings.Contains(err.Error(), "connection refused") && !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Fatalf("a call with the server down: %v", err)
		}
	}
	startEverythingHTTP(t, port)
	for _, msg := range []string{"back", "again"} {
		if out, err := echo(msg); err != nil || out != "Echo: "+msg {
			t.Fatalf("a call after the server came back: %q %v", out, err)
		}
	}

	// ConnectMCP's errors.
	_, err := agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://armature:pw-%s@127.0.0.1:%d/nope?token=%s", secret, port, secret), MaxRetries: -1})
	noKey(err)
	if err == nil {
		t.Fatal("connected to a path the server does not serve")
	}
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp?token="+secret, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	_, err = agent.ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: strings.Replace(redirector.URL, "http://", "http://armature:pw-"+secret+"@", 1) + "/mcp?token=" + secret, MaxRetries: -1})
	noKey(err)
	if err == nil || !strings.Contains(err.Error(), "another origin") || reached.Load() != 0 {
		t.Fatalf("a redirect to another origin: %v (%d requests reached it)", err, reached.Load())
	}
	t.Logf("errors: %q", errs)
}

// A turn of an agent through chat.Harness whose (scripted) model calls
// server-everything's tools: their results, an image described and an
// argument error, land in the session's history, which stays valid.
func TestMCPAgentTurn(t *testing.T) {
	ctx := t.Context()
	tools := dialTools(t, ctx, func() mcp.Transport {
		return &mcp.CommandTransport{Command: everythingCmd(t, "stdio"), TerminateDuration: stopWithin}
	})
	p := llmtest.New(llmtest.CallTools(
		llm.ToolCall{ID: "c1", Name: "get-sum", Arguments: json.RawMessage(`{"a":2,"b":3}`)},
		llm.ToolCall{ID: "c2", Name: "get-tiny-image", Arguments: json.RawMessage(`{}`)},
		llm.ToolCall{ID: "c3", Name: "echo", Arguments: json.RawMessage(`{"message":7}`)},
	), llmtest.Reply("The sum is 5."))
	a, err := agent.New(agent.Config{Provider: p, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Send(ctx, "s", llm.UserText("add 2 and 3"))
	if _, ok := out.(*chat.Completed); err != nil || !ok {
		t.Fatalf("turn: %v %#v", err, out)
	}
	st, err := g.SessionState(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	hist := chat.Messages.Get(st)
	if err := llm.CheckHistory(nil, hist); err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, m := range hist {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Text()
		}
	}
	if results["c1"] != "The sum of 2 and 3 is 5." || !strings.Contains(results["c2"], "[image: image/png, ") ||
		!strings.HasPrefix(results["c3"], "error: agent: tool echo: invalid arguments") || hist[len(hist)-1].Text() != "The sum is 5." {
		t.Fatalf("history: %q", results)
	}
	// The model was sent the same results.
	reqs := p.Requests()
	sent := reqs[len(reqs)-1].Transcript()
	if n := len(sent); n < 4 || sent[n-3].Text() != results["c1"] {
		t.Fatalf("the model was sent %+v", sent)
	}
}
