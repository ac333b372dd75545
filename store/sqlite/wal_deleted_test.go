package sqlite_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// A WAL file deleted (by hand) while a DurabilityFull Store has it open
// can no longer make a commit durable: SQLite appends to the deleted
// file. The Store then refuses to acknowledge writes, and Ping reports
// why (a readiness probe fails), instead of acknowledging turns a crash
// then loses.
func TestWALDeletedWhileOpen(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("an open file cannot be deleted there")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "wal.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Durability: sqlite.DurabilityFull})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping before: %v", err)
	}
	// Every connection the Store keeps is open before the file goes: a
	// connection SQLite opened after it would create a new WAL file, which
	// hides the deletion (README, "Durability").
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "after"}); err == nil || !strings.Contains(err.Error(), "WAL file was deleted") {
		t.Errorf("a write after the WAL was deleted: %v, want it refused", err)
	}
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "WAL file was deleted") {
		t.Errorf("ping after the WAL was deleted: %v, want it to say so", err)
	}
}
