//go:build unix

package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

const stubbornMCPEnv = "ARMATURE_AGENT_TEST_STUBBORN_PIDFILE"

// TestHelperStubbornMCPServer is not a test: run by the tests below
// (through a shell, as npx runs a package's server: npm exec → sh -c →
// node), it is a stdio MCP server that, like the reference
// server-everything, does not exit when its stdin closes. It appends its
// pid to the file the variable names. Its "hangup" tool kills the
// launcher and closes its stdout, so that the client sees the connection
// end while the server lives on.
func TestHelperStubbornMCPServer(t *testing.T) {
	pidfile := os.Getenv(stubbornMCPEnv)
	if pidfile == "" {
		t.Skip("helper process only")
	}
	if f, err := os.OpenFile(pidfile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		_ = f.Close()
	}
	s := newMCPServer()
	mcp.AddTool(s, &mcp.Tool{Name: "hangup", Description: "Hangs up"},
		func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			_ = syscall.Kill(os.Getppid(), syscall.SIGKILL)
			_ = os.Stdout.Close()
			time.Sleep(30 * time.Second)
			return nil, nil, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
	time.Sleep(30 * time.Second) // timers, open handles: it lives on
	os.Exit(0)
}

// launched returns a new transport for the stubborn helper server,
// started through sh, which appends its pid to pidfile.
func launched(t *testing.T, pidfile string) func() mcp.Transport {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func() mcp.Transport {
		cmd := exec.Command("sh", "-c", `"$0" -test.run='^TestHelperStubbornMCPServer$'; status=$?; exit $status`, exe)
		cmd.Env = append(os.Environ(), stubbornMCPEnv+"="+pidfile)
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 200 * time.Millisecond}
	}
}

// serverPids reads the pids the helper servers wrote to pidfile, and
// kills them when the test ends.
func serverPids(t *testing.T, pidfile string) []int {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		pids = append(pids, pid)
	}
	return pids
}

// running reports whether the process pid runs (and is no zombie).
func running(pid int) (bool, string) {
	if syscall.Kill(pid, 0) != nil {
		return false, ""
	}
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if f := strings.Fields(string(stat)); len(f) > 3 && f[2] != "Z" {
		return true, f[3]
	}
	return false, ""
}

// An MCPClient (or a ConnectMCP session) whose stdio server is started
// through a launcher — `npx -y @modelcontextprotocol/server-…`, the way
// most MCP servers are distributed, or any sh/npm/uv wrapper — ends the
// server on Close: the command runs in a process group of its own, which
// Close signals whole, not only its direct child (the launcher), after
// which the server, reparented to init, lived on.
func TestMCPCloseEndsLaunchedServer(t *testing.T) {
	ctx := context.Background()
	for _, via := range []string{"MCPClient", "ConnectMCP"} {
		t.Run(via, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			newTransport := launched(t, pidfile)
			var closer interface{ Close() error }
			if via == "MCPClient" {
				c, err := agent.DialMCP(ctx, newTransport)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Tools(ctx); err != nil {
					t.Fatal(err)
				}
				closer = c
			} else {
				cs, err := agent.ConnectMCP(ctx, newTransport())
				if err != nil {
					t.Fatal(err)
				}
				closer = cs
			}
			pids := serverPids(t, pidfile)
			if len(pids) != 1 {
				t.Fatalf("%d servers started", len(pids))
			}
			pid := pids[0]
			start := time.Now()
			if err := closer.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Close took %v with a TerminateDuration of 200ms", d)
			}
			time.Sleep(time.Second)
			if alive, parent := running(pid); alive {
				t.Fatalf("the MCP server (pid %d, parent %s) still runs after %s Close", pid, parent, via)
			}
		})
	}
}

// A stdio server whose connection ended (its launcher died and it closed
// its stdout) while it lives on is ended too when the connection closes
// under the MCPClient, which connects again: a reconnect leaks no server.
func TestMCPClientReconnectEndsLostServer(t *testing.T) {
	ctx := context.Background()
	pidfile := filepath.Join(t.TempDir(), "pid")
	c, err := agent.DialMCP(ctx, launched(t, pidfile))
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
	_, err = byName["hangup"].Call(ctx, json.RawMessage(`{"text":"bye"}`))
	if err == nil {
		t.Fatal("the hangup call succeeded")
	}
	t.Logf("hangup: %v", err)
	if out, err := byName["shout"].Call(ctx, json.RawMessage(`{"text":"hi"}`)); err != nil || out != "HI" {
		t.Fatalf("the call after the hangup: %q, %v; want it made on a new connection", out, err)
	}
	pids := serverPids(t, pidfile)
	if len(pids) != 2 {
		t.Fatalf("%d servers started, want 2", len(pids))
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		alive, parent := running(pids[0])
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first MCP server (pid %d, parent %s) still runs after the client connected again", pids[0], parent)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if alive, _ := running(pids[1]); !alive {
		t.Fatalf("the second MCP server (pid %d) does not run", pids[1])
	}
}

// A server that exits when its stdin closes is not waited for longer
// than it takes: Close returns well before the TerminateDuration, with
// the server started through a launcher too.
func TestMCPCloseFastForWellBehavedServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := agent.DialMCP(ctx, func() mcp.Transport {
		cmd := exec.Command("sh", "-c", `"$0"; status=$?; exit $status`, exe)
		cmd.Env = append(os.Environ(), mcpServerEnv+"=1")
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v for a server that exits on EOF", d)
	}
}
