package adaptertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "armature-under-test")
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	raw, err := os.ReadFile(workspace)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "workspace.yaml")
	if err := os.WriteFile(ws, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	serve := func() (base string, stop func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		var logs bytes.Buffer
		cmd := exec.Command(bin, "serve", "--addr", addr, "--data", data, "--workspace", ws)
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
		return base, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	}
	post := func(base, path, body string) map[string]any {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
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
