//go:build linux

package sqlite_test

import (
	"context"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

const readOnlyHelperEnv = "ARMATURE_SQLITE_READONLY_HELPER"

// TestReadOnlyFileHelper is the child of TestReadOnlyFileRefusedAtOpen.
func TestReadOnlyFileHelper(t *testing.T) {
	path := os.Getenv(readOnlyHelperEnv)
	if path == "" {
		t.Skip("child process only")
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, SoleWriter: true, Durability: sqlite.DurabilityFull})
	if err != nil {
		fmt.Printf("result open-failed %v\n", err)
		return
	}
	defer s.Close(ctx)
	ping := s.Ping(ctx)
	_, serr := s.Save(ctx, session.SaveRequest{SessionID: "after-restore"})
	ping2 := s.Ping(ctx)
	fmt.Printf("result opened ping=%v save=%v ping-after-save=%v\n", ping, serr, ping2)
}

// TestReadOnlyFileRefusedAtOpen: an operator restores armature.db as
// root into the data directory of a service user (the directory is the
// user's, the file root's, 0644). The service user's Open refuses the
// file, saying it cannot be written, instead of opening it (an
// up-to-date file needs no write to open), answering Ping ready, and
// failing every turn's save as retryable. Needs root (to run the child
// as uid 65534).
func TestReadOnlyFileRefusedAtOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the child as another user")
	}
	ctx := t.Context()
	base, err := os.MkdirTemp("", "sqlite-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary, where the other user can run it.
	bin := filepath.Join(base, "sqlite.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst.Close()

	dir := filepath.Join(base, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "armature.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The directory is the service user's; the restored file is root's.
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.CommandContext(ctx, bin, "-test.run=^TestReadOnlyFileHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), readOnlyHelperEnv+"="+path)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var res string
	for _, line := range strings.Split(string(out), "\n") {
		if r, ok := strings.CutPrefix(line, "result "); ok {
			res = r
		}
	}
	t.Logf("child: %s", res)
	if strings.HasPrefix(res, "opened ping=<nil>") {
		t.Fatalf("a database file the process cannot write opened and pinged ready; every write then fails: %s", res)
	}
}
