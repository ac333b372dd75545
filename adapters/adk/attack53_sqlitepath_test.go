package adk_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapters/adk"
)

// TestAttack53SQLitePathPercent: session.path is documented as a file
// path (relative to the workspace file; only ?, # and NUL are refused),
// but the adapter opens it as a file: URI without escaping it, so SQLite
// percent-decodes it: path "sessions%41.db" writes the sessions to
// "sessionsA.db", "a%20b.db" to "a b.db". Two agents whose paths differ
// only so ("x%41.db" and "xA.db") share one file, and an operator backing
// up (or deleting) the file the workspace names misses the real one.
// Expected: the file named is the file used (the path escaped in the
// URI, or % refused like ? and #).
func TestAttack53SQLitePathPercent(t *testing.T) {
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
		t.Fatalf("session.path %q was not created (%v); the directory holds %q", path, err, names)
	}
}
