package eino_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
)

// TestEndToEnd runs the adapter contract's end-to-end script on an Eino
// agent whose checkpoints live in a [eino.FileStore], so its interrupted
// approvals survive the script's restarts; with and without Eino's
// streaming.
func TestEndToEnd(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "blocking", true: "streaming"}[streaming], func(t *testing.T) {
			section, err := json.Marshal(map[string]any{"streaming": streaming, "checkpoint": map[string]any{
				"driver": eino.CheckpointFile, "dir": filepath.Join(t.TempDir(), "checkpoints")}})
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Run(t, adaptertest.Config{Backend: eino.Name, Factory: eino.Factory, Section: section})
		})
	}
}

// TestSoak: deleted conversations of an Eino agent leave nothing in the
// process: not in the runtime, the adapter, or its checkpoints of the
// approvals left pending (adaptertest.Soak).
func TestSoak(t *testing.T) {
	adaptertest.Soak(t, adaptertest.Config{Backend: eino.Name, Factory: eino.Factory}, 100, 400)
}
