package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildArmature builds the armature binary into the test's own temp dir
// (removed with it; the Go build cache makes the second build quick).
func buildArmature(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "armature")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// TestChatInvalidServerURLHidesItsPassword: the password in the
// userinfo of a --server URL (or ARMATURE_SERVER) that fails validation
// (it does not parse, or is not http(s)) is never printed: the error
// names the URL redacted, as the request error of a valid one does
// ("user:***@"). Before, it was printed verbatim. README: "no secret
// appears in a log or an error".
func TestChatInvalidServerURLHidesItsPassword(t *testing.T) {
	bin := buildArmature(t)
	const pw = "S3CRETPW-attack58"
	for _, server := range []string{
		"http://user:" + pw + "@127.0.0.1:1/%zz",
		"http://user:" + pw + "@[::1",
		"ftp://user:" + pw + "@127.0.0.1:1",
	} {
		for _, viaEnv := range []bool{false, true} {
			args := []string{"chat", "-state", filepath.Join(t.TempDir(), "st.json")}
			env := append(os.Environ(), "ARMATURE_TOKEN=")
			if viaEnv {
				env = append(env, "ARMATURE_SERVER="+server)
			} else {
				args = append(args, "-server", server)
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			cmd.Stdin = strings.NewReader("hello\n")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(8 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("chat did not exit")
			}
			if strings.Contains(out.String(), pw) {
				t.Errorf("server=%q env=%v: the URL's password is on the output:\n%s", server, viaEnv, out.String())
			}
		}
	}
}
