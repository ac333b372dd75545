package adk_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapters/adk"
)

// TestSQLitePathUsedAsNamed: session.path is a file path, and the file it
// names is the file the sessions are written to, even when it holds a %
// (the path is escaped in the file: URI, or else refused like ? and #).
// SQLite percent-decodes a file: URI, so an unescaped "sessions%41.db"
// would write to "sessionsA.db": two agents whose paths differ only so
// would share one file, and an operator backing up (or deleting) the
// file the workspace names would miss the real one.
func TestSQLitePathUsedAsNamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions%41.db")
	ctx := context.Background()
	e, err := adk.NewEngine(ctx, adk.Config{Session: adk.SessionConfig{Driver: adk.SessionSQLite, Path: path}})
	if err != nil {
		return // refused: acceptable
	}
	defer e.Close()
	if _, err := e.Send(ctx, "u", "s", "hello", func(adk.Event) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Fatalf("session.path %q: %v, want the sessions in the file named; the directory holds %q", path, err, names)
	}
}
