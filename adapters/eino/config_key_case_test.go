package eino_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
)

// TestConfigKeysAreCaseSensitive: an eino: section's keys must be the
// config's JSON names exactly, at any depth: a key spelt in another case
// ("Max_Iterations", "MAX_ITERATIONS" beside "max_iterations",
// "Checkpoint: {Driver: memory}") is an unknown key, and the agent is
// refused at startup with the key's path, as for any other misspelling
// (and as the workspace file refuses "Max_Steps" on a native agent).
// Before, the section was decoded with encoding/json's case-insensitive
// matching: the workspace started, the misspelt key silently applied,
// and of two spellings the last won (500), though the README says the
// section is decoded strictly.
func TestConfigKeysAreCaseSensitive(t *testing.T) {
	for _, tc := range []struct{ section, path string }{
		{`{"Max_Iterations":1}`, `"Max_Iterations"`},
		{`{"max_iterations":5,"MAX_ITERATIONS":500}`, `"MAX_ITERATIONS"`},
		{`{"Checkpoint":{"Driver":"memory"}}`, `"Checkpoint"`},
		{`{"checkpoint":{"Driver":"memory"}}`, `"checkpoint.Driver"`},
	} {
		ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools(), Config: json.RawMessage(tc.section)}
		var cfg eino.Config
		if err := ag.DecodeConfig(&cfg); err == nil || !strings.Contains(err.Error(), "unknown key "+tc.path) {
			t.Errorf("section %s: %v (%+v), want unknown key %s", tc.section, err, cfg, tc.path)
		}
		if _, err := eino.Factory(context.Background(), adapter.FactoryRequest{Workspace: &adapter.Workspace{Agents: []*adapter.Agent{ag}}, Agent: ag}); err == nil {
			t.Errorf("section %s: the agent was built", tc.section)
		}
	}
	// The exact spelling is decoded as before.
	ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Config: json.RawMessage(`{"max_iterations":5,"checkpoint":{"driver":"memory"},"streaming":false}`)}
	var cfg eino.Config
	if err := ag.DecodeConfig(&cfg); err != nil || cfg.MaxIterations != 5 || cfg.Checkpoint.Driver != eino.CheckpointMemory || cfg.Streaming == nil || *cfg.Streaming {
		t.Errorf("exact keys: %+v, %v", cfg, err)
	}
}
