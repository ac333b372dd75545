package adk_test

import (
	"errors"
	"testing"

	"github.com/armature-go/armature/adapters/adk"
)

// TestValidateRefusesAgentNamedUser: Config.Validate refuses adk: {name:
// user}, as it refuses the section's other invalid fields. ADK-Go
// reserves "user" for the end user's events ("Agent name cannot be
// \"user\"", agent.Config.Name, though it does not check it), and the
// adapter reads an event authored "user" as the user's: an agent of that
// name would never have its node reported completed, and lastUserText
// would take its answers for user messages when another agent shares the
// session.
func TestValidateRefusesAgentNamedUser(t *testing.T) {
	err := adk.Config{Name: "user"}.Validate()
	if !errors.Is(err, adk.ErrInvalidConfig) {
		t.Fatalf("Validate of name \"user\": %v, want ErrInvalidConfig", err)
	}
}
