package npmtest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// AimockVersion is the version of aimock (@copilotkit/aimock on npm), a
// third-party mock of the OpenAI, Anthropic and Gemini APIs, that the
// interop tests run against.
const AimockVersion = "1.43.0"

var aimockListening = regexp.MustCompile(`listening on (http://\S+)`)

// StartAimock runs aimock on a free port with fixtures (aimock's
// fixture-file JSON: {"fixtures": [...]}) until t ends, and returns its
// base URL (the OpenAI API is under /v1, Anthropic's and Gemini's at
// the root). Like Install, it skips without node locally and fails in
// CI.
func StartAimock(t testing.TB, fixtures string) string {
	t.Helper()
	dir := Install(t, "@copilotkit/aimock", AimockVersion)
	fx := filepath.Join(t.TempDir(), "fixtures.json")
	if err := os.WriteFile(fx, []byte(fixtures), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "node_modules", "@copilotkit", "aimock", "dist", "cli.js"), "-p", "0", "-f", fx)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := aimockListening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("aimock did not start")
	}
	return ""
}
