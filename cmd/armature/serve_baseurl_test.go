package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesAnUnparseableBaseURL: a workspace agent whose
// base_url begins with http:// but does not parse (a "%zz" escape) is
// refused at startup, as an ftp:// one is. Before, it was accepted, and
// every turn of that agent then failed provider_invalid_request, bucket
// user_correctable: the user was told to change a message when the
// operator's configuration was broken.
func TestServeRefusesAnUnparseableBaseURL(t *testing.T) {
	bin := buildArmature(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws.yaml")
	yaml := "agents:\n  - id: a\n    provider: openai\n    base_url: \"http://127.0.0.1:1/v1/%zz\"\n    model: m\n"
	if err := os.WriteFile(ws, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "d"), "--workspace", ws)
	cmd.Env = append(os.Environ(), "ARMATURE_TOKENS=", "ARMATURE_WORKSPACE=", "ARMATURE_DATABASE=")
	var stderr bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	wait := func() { // stderr is read only once the process is waited for
		if !waited {
			waited = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	defer wait()
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving on") {
				serving <- sc.Text()
			}
		}
		close(serving)
	}()
	select {
	case line, ok := <-serving:
		if ok {
			t.Fatalf("armature serve started with an unparseable base_url %q (%s); every turn of agent a then fails as provider_invalid_request/user_correctable (\"Please adjust your message\")", "http://127.0.0.1:1/v1/%zz", line)
		}
		wait()
		if !strings.Contains(stderr.String(), "BaseURL") {
			t.Errorf("refused at startup, but not naming the base URL: %s", stderr.String())
		}
	case <-time.After(8 * time.Second):
		wait()
		t.Fatalf("neither started nor exited; stderr:\n%s", stderr.String())
	}
}
