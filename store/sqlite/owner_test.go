package sqlite_test

import (
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

const openHelperEnv = "ARMATURE_SQLITE_OPEN_HELPER"

// openInChild opens path in a child process (this test binary, re-run as
// TestOpenHelper) with the given Shared setting and returns what it
// printed: "opened", or "locked" when Open failed with ErrLocked.
func openInChild(t *testing.T, path string, shared bool) string {
	t.Helper()
	cmd := osexec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestOpenHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%v", openHelperEnv, path, shared))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if r, ok := strings.CutPrefix(line, "result "); ok {
			return r
		}
	}
	t.Fatalf("helper printed no result:\n%s", out)
	return ""
}

// TestOpenHelper is the child process of the ownership tests; it does
// nothing in a normal run.
func TestOpenHelper(t *testing.T) {
	env := os.Getenv(openHelperEnv)
	if env == "" {
		t.Skip("run by TestStoreOwnsItsFile")
	}
	path, shared, _ := strings.Cut(env, "|")
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Shared: shared == "true", BusyTimeout: 200 * time.Millisecond})
	switch {
	case errors.Is(err, sqlite.ErrLocked):
		if !errors.Is(err, errcat.SessionLoadFailed) {
			t.Fatalf("ErrLocked without its category: %v", err)
		}
		fmt.Println("result locked")
		return
	case err != nil:
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "child", State: nil}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("result opened")
}

// TestStoreOwnsItsFile: a Store owns its file by default, so another
// process's Open fails with ErrLocked until it closes; Stores that all
// set Shared open the file together; Stores of one process share it in
// either mode.
func TestStoreOwnsItsFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if runtime.GOOS == "windows" {
		t.Skip("no unix-excl VFS: Stores are always shared")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "owned.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "parent"}); err != nil {
		t.Fatal(err)
	}
	// Another Store in this process shares the file and sees its writes.
	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Load(ctx, session.LoadRequest{SessionID: "parent"}); err != nil {
		t.Fatalf("second Store of the process: %v", err)
	}
	for _, shared := range []bool{false, true} {
		if got := openInChild(t, path, shared); got != "locked" {
			t.Errorf("another process (Shared %v) opening an owned file: %s, want locked", shared, got)
		}
	}
	if _, err := os.Stat(path + "-shm"); err == nil {
		t.Error("an owned file has a -shm file: the WAL index should be in memory")
	}
	for _, st := range []*sqlite.Store{s, s2} {
		if err := st.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := openInChild(t, path, false); got != "opened" {
		t.Fatalf("opening after Close: %s", got)
	}

	// Shared Stores open the file together, across processes.
	sh, err := sqlite.Open(ctx, sqlite.Config{Path: path, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close(ctx)
	if got := openInChild(t, path, true); got != "opened" {
		t.Fatalf("a shared Store beside a shared Store: %s", got)
	}
	if _, err := sh.Load(ctx, session.LoadRequest{SessionID: "child"}); err != nil {
		t.Fatalf("the child's write, read by the parent: %v", err)
	}
}
