package adk_test

import (
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
)

// TestInstructions: a turn's per-request instructions (the Responses
// API's instructions field, agent.WithInstructions) reach its model
// calls in place of the agent's instruction, streamed or not; the next
// turn without them has the agent's again. Before, ADK-Go always sent
// the agent's.
func TestInstructions(t *testing.T) {
	for _, section := range []string{`{"streaming":false}`, `{"streaming":true}`} {
		t.Run("section "+section, func(t *testing.T) {
			adaptertest.CheckInstructions(t, adk.Name, adk.Factory, section)
		})
	}
}
