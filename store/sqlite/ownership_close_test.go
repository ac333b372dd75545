package sqlite_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// TestCloseOfOneStoreKeepsOwnership: doc.go says "Any number of
// Stores in one process share the file, but another process cannot open
// it while it is open". Closing one of two Stores of a process, or a
// SoleWriter Open that fails with ErrLocked, must not let another
// process open the file the other Store still owns. (Their advisory lock
// was once taken on a descriptor of the database file itself, and on
// Linux closing any descriptor of a file releases every POSIX lock the
// process holds on it, SQLite's unix-excl lock included.)
func TestCloseOfOneStoreKeepsOwnership(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix-excl VFS")
	}
	ctx := t.Context()
	t.Run("second store closed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "owned.db")
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: "parent"}); err != nil {
			t.Fatal(err)
		}
		if got := openInChild(t, path, false); got != "locked" {
			t.Fatalf("baseline: another process opened an owned file: %s", got)
		}
		s2, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// s is still open: the file must still be owned.
		if got := openInChild(t, path, false); got != "locked" {
			t.Fatalf("after closing the process's second Store, another process opened the file the first still owns: %s, want locked", got)
		}
	})
	t.Run("failed sole writer open", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "owned.db")
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: "parent"}); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlite.Open(ctx, sqlite.Config{Path: path, SoleWriter: true}); !errors.Is(err, sqlite.ErrLocked) {
			t.Fatalf("sole writer beside an open Store: %v, want ErrLocked", err)
		}
		if got := openInChild(t, path, false); got != "locked" {
			t.Fatalf("after a failed SoleWriter Open, another process opened the file the open Store owns: %s, want locked", got)
		}
	})
}
