package cli

import (
	"strings"
	"testing"
)

// An unknown scalar key directly on an agent (the typo timout: 30s) is
// refused at startup with its line, as every other unknown key of the
// workspace is (README "Backend adapters"). Before, the error named the
// agent and the key but no line.
func TestWorkspaceUnknownAgentKeyNamesItsLine(t *testing.T) {
	raw := "agents:\n  - id: a\n    provider: demo\n    timout: 30s\n"
	_, err := parseWorkspace([]byte(raw), "w.yaml")
	if err == nil {
		t.Fatal("the unknown key timout: was accepted")
	}
	if !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("the unknown key is refused without its line: %v", err)
	}
}
