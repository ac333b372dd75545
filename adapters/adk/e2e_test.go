package adk_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
)

// TestEndToEnd runs the adapter contract's end-to-end script on an ADK-Go
// agent whose sessions live in ADK-Go's database session service (a
// SQLite file), so its pending confirmations survive the script's
// restarts, with and without ADK-Go's streaming mode; and in ADK-Go's
// in-memory session service (the default), whose sessions each restart
// loses: their history, and the confirmation pending across the
// restart, are seeded from the runtime's session.
func TestEndToEnd(t *testing.T) {
	for _, c := range []struct {
		name      string
		streaming bool
		memory    bool
	}{{"blocking", false, false}, {"streaming", true, false}, {"memory", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := map[string]any{"streaming": c.streaming}
			if !c.memory {
				cfg["session"] = map[string]any{"driver": adk.SessionSQLite, "path": filepath.Join(t.TempDir(), "adk-sessions.db")}
			}
			section, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Run(t, adaptertest.Config{Backend: adk.Name, Factory: adk.Factory, Section: section})
		})
	}
}

// TestSoak: deleted conversations of an ADK-Go agent, in ADK-Go's
// in-memory session service and in its database service, leave nothing
// in the process: not in the runtime, the adapter, or ADK-Go's session
// service (adaptertest.Soak).
func TestSoak(t *testing.T) {
	for _, memory := range []bool{true, false} {
		t.Run(fmt.Sprintf("memory=%v", memory), func(t *testing.T) {
			cfg := map[string]any{"streaming": false}
			if !memory {
				cfg["session"] = map[string]any{"driver": adk.SessionSQLite, "path": filepath.Join(t.TempDir(), "adk-sessions.db")}
			}
			section, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Soak(t, adaptertest.Config{Backend: adk.Name, Factory: adk.Factory, Section: section}, 100, 400)
		})
	}
}
