package adaptertest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/syncbuf"
)

// RunBinary builds the armature serve binary of package pkg (a main
// package over internal/cli with an adapter registered, such as
// ./cmd/armature-adk) and drives it as an operator would: armature serve
// on workspace (a workspace YAML whose agent has the demo tools, with
// issue_refund under approval), a refund turn that suspends, the
// process killed with SIGKILL, a new process on the same data directory,
// the approval given over REST, then another turn. Relative paths of the
// workspace are resolved against its directory, which RunBinary copies
// into a temporary one with the workspace file.
func RunBinary(t *testing.T, pkg, workspace string) {
	t.Helper()
	raw, err := os.ReadFile(workspace)
	if err != nil {
		t.Fatal(err)
	}
	bs := buildServer(t, pkg, raw) // skips under -short
	serve := func() (string, func()) { return bs.serve(t) }
	post := func(base, path, body string) map[string]any {
		t.Helper()
		_, out := postJSON(t, base, path, body)
		return out
	}

	base, stop := serve()
	out := post(base, "/v1/sessions/op/messages", `{"content":"refund order 91"}`)
	sig, _ := out["signal"].(map[string]any)
	signalID, _ := sig["signal_id"].(string)
	if out["outcome"] != "suspended" || signalID == "" {
		stop()
		t.Fatalf("refund turn: %v", out)
	}
	stop() // SIGKILL with the approval pending

	base, stop = serve()
	defer stop()
	out = post(base, "/v1/sessions/op/signals", fmt.Sprintf(`{"signal_id":%q,"payload":{"approval":{"approved":true}}}`, signalID))
	if out["outcome"] != "completed" || !strings.Contains(fmt.Sprint(out["replies"]), "refunded $30.00") {
		t.Fatalf("approval after the restart: %v", out)
	}
	if out = post(base, "/v1/sessions/op/messages", `{"content":"where is order 92?"}`); out["outcome"] != "completed" {
		t.Fatalf("turn after the approval: %v", out)
	}
}

// binaryServer is an armature serve binary built for a test, with its
// workspace and data directory.
type binaryServer struct {
	bin, workspace, data string
}

// buildServer builds the armature serve binary of package pkg into a
// temporary directory and writes workspace there.
func buildServer(t *testing.T, pkg string, workspace []byte) *binaryServer {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bs := &binaryServer{bin: filepath.Join(dir, "armature-under-test"), workspace: filepath.Join(dir, "workspace.yaml"),
		data: filepath.Join(dir, "data")}
	if out, err := exec.Command("go", "build", "-o", bs.bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	if err := os.WriteFile(bs.workspace, workspace, 0o600); err != nil {
		t.Fatal(err)
	}
	return bs
}

// serve starts armature serve on a free port and waits until it is
// ready; stop kills the process (SIGKILL) and waits for it.
func (bs *binaryServer) serve(t *testing.T) (base string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs syncbuf.Buffer
	cmd := exec.Command(bs.bin, "serve", "--addr", addr, "--data", bs.data, "--workspace", bs.workspace)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base = "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the server did not get ready:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := false
	return base, func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	}
}

// postJSON posts body to base+path and decodes the JSON object answered.
func postJSON(t *testing.T, base, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := httpPost(base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(resp.body, &out); err != nil {
		t.Fatalf("POST %s: %d %s", path, resp.code, resp.body)
	}
	return resp.code, out
}
