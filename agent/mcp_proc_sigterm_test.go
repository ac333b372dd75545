//go:build unix

package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// A server whose group holds a process ignoring SIGTERM: the SIGKILL
// path; Close called concurrently; no process or zombie left.
func TestMCPSigtermIgnoredGrandchild(t *testing.T) {
	exe, _ := os.Executable()
	dir := t.TempDir()
	gpid := filepath.Join(dir, "gpid")
	cmd := exec.Command("sh", "-c", `trap '' TERM; sleep 300 & echo $! > "$1"; "$0"; exit $?`, exe, gpid)
	cmd.Env = append(os.Environ(), mcpServerEnv+"=1")
	ctx := context.Background()
	cs, err := agent.ConnectMCP(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.MCPTools(ctx, cs); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(gpid)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cs.Close() }()
	}
	wg.Wait()
	t.Logf("close took %v, errs %v", time.Since(start), errs)
	time.Sleep(300 * time.Millisecond)
	if alive, parent := running(pid); alive {
		t.Errorf("grandchild %d (parent %s) still runs", pid, parent)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("close took %v", d)
	}
}
