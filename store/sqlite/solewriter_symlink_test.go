package sqlite_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// doc.go: "With Config.SoleWriter a Store ... is the only Store with the
// file open, in this process or any other ... each Open that would break
// the promise fails with ErrLocked." The same file opened through a
// symbolic link to it.
func TestSoleWriterThroughSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip()
	}
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	link := filepath.Join(dir, "link.db")
	sole, err := sqlite.Open(ctx, sqlite.Config{Path: path, SoleWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sole.Close(ctx)
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	w1, err := sole.Save(ctx, session.SaveRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqlite.Open(ctx, sqlite.Config{Path: link})
	if errors.Is(err, sqlite.ErrLocked) {
		return
	}
	if err != nil {
		t.Fatalf("open through the link: %v", err)
	}
	defer other.Close(ctx)
	_, werr := other.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"k": json.RawMessage(`"v2"`)}})
	t.Errorf("a second Store opened the sole writer's file through a symlink (write: %v), want ErrLocked", werr)
	_, lerr := sole.Load(ctx, session.LoadRequest{SessionID: "s", IfVersionNot: w1.Version})
	if errors.Is(lerr, session.ErrNotModified) {
		t.Errorf("the sole writer answers a warm turn's version check 'not modified' (version %d) although the other Store wrote the session: a stale history is served", w1.Version)
	}
}
