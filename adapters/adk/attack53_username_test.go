package adk_test

import (
	"errors"
	"testing"

	"github.com/armature-go/armature/adapters/adk"
)

// TestAttack53AgentNamedUser: adk: {name: user} is accepted, though
// ADK-Go reserves "user" for the end user's events ("Agent name cannot
// be \"user\"", agent.Config.Name; it does not check it) and the adapter
// reads an event's author "user" as the user's: Engine.run never
// reports the agent's node as completed (no agent.node.completed in any
// run record of the agent, seen through the binary), and lastUserText
// would take the agent's answers for user messages when another agent
// shares the session. Expected: Config.Validate refuses the name, as it
// refuses the other invalid fields of the section.
func TestAttack53AgentNamedUser(t *testing.T) {
	err := adk.Config{Name: "user"}.Validate()
	if !errors.Is(err, adk.ErrInvalidConfig) {
		t.Fatalf("Validate of name \"user\": %v, want ErrInvalidConfig", err)
	}
}
