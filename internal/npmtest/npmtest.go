// Package npmtest installs npm packages for interop tests: official
// clients and third-party mock servers that Armature's code did not
// write. A package is installed once per version in the user cache
// directory. Without node, npm or the registry, a test skips locally and
// fails in CI ($CI set), where it must run.
//
// # Example
//
//	dir := npmtest.Install(t, "openai", "7.57.0")
//	cmd := exec.Command("node", "script.mjs")
//	cmd.Dir = dir // node resolves "openai" from dir/node_modules
package npmtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Install installs pkg@version and returns the directory whose
// node_modules holds it. Test binaries of several packages may install
// the same package at once: each installs into a directory of its own
// and renames it into place, and one that finds it taken uses the
// winner's.
func Install(t testing.TB, pkg, version string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "node is not installed: the %s interop test cannot run", pkg)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "armature-test", "npm", filepath.Base(pkg)+"-"+version)
	installed := func() bool {
		_, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
		return err == nil
	}
	if installed() {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".installing-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp) // gone once renamed; a failed install's leftovers
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	for attempt := range 3 {
		out.Reset()
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", tmp, pkg+"@"+version)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err = cmd.Run(); err == nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 2 * time.Second)
	}
	if err != nil {
		unavailable(t, "npm install %s@%s: %v\n%s", pkg, version, err, out.String())
	}
	for range 2 {
		if err = os.Rename(tmp, dir); err == nil || installed() {
			return dir
		}
		// A directory an interrupted install left (before installs were
		// renamed into place) is in the way: it goes.
		_ = os.RemoveAll(dir)
	}
	t.Fatalf("npm install %s@%s: %v", pkg, version, err)
	return ""
}

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
