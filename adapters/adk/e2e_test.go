package adk_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
)

// TestEndToEnd runs the adapter contract's end-to-end script on an ADK-Go
// agent whose sessions live in ADK-Go's database session service (a
// SQLite file), so its pending confirmations survive the script's
// restarts.
func TestEndToEnd(t *testing.T) {
	section, err := json.Marshal(map[string]any{"session": map[string]any{"driver": adk.SessionSQLite,
		"path": filepath.Join(t.TempDir(), "adk-sessions.db")}})
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.Run(t, adaptertest.Config{Backend: adk.Name, Factory: adk.Factory, Section: section})
}
