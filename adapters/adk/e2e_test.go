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
// restarts; with and without ADK-Go's streaming mode.
func TestEndToEnd(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "blocking", true: "streaming"}[streaming], func(t *testing.T) {
			section, err := json.Marshal(map[string]any{"streaming": streaming, "session": map[string]any{
				"driver": adk.SessionSQLite, "path": filepath.Join(t.TempDir(), "adk-sessions.db")}})
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Run(t, adaptertest.Config{Backend: adk.Name, Factory: adk.Factory, Section: section})
		})
	}
}
