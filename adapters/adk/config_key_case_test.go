package adk_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
)

// TestConfigKeysAreCaseSensitive: an adk: section's keys must be the
// config's JSON names exactly, at any depth ("Session: {Driver: ...}",
// "MAX_LLM_CALLS" are unknown keys, refused with their path). Before,
// encoding/json's case-insensitive matching took them, the last of two
// spellings winning.
func TestConfigKeysAreCaseSensitive(t *testing.T) {
	for _, tc := range []struct{ section, path string }{
		{`{"Session":{"driver":"memory"}}`, `"Session"`},
		{`{"session":{"Driver":"memory"}}`, `"session.Driver"`},
		{`{"max_llm_calls":5,"MAX_LLM_CALLS":50}`, `"MAX_LLM_CALLS"`},
		{`{"model":{"Provider":"scripted"}}`, `"model.Provider"`},
	} {
		var cfg adk.Config
		err := (&adapter.Agent{ID: "helper", Backend: adk.Name, Config: json.RawMessage(tc.section)}).DecodeConfig(&cfg)
		if err == nil || !strings.Contains(err.Error(), "unknown key "+tc.path) {
			t.Errorf("section %s: %v, want unknown key %s", tc.section, err, tc.path)
		}
	}
}
