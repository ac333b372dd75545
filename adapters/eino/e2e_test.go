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
// approvals survive the script's restarts.
func TestEndToEnd(t *testing.T) {
	section, err := json.Marshal(map[string]any{"checkpoint": map[string]any{"driver": eino.CheckpointFile,
		"dir": filepath.Join(t.TempDir(), "checkpoints")}})
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.Run(t, adaptertest.Config{Backend: eino.Name, Factory: eino.Factory, Section: section})
}
