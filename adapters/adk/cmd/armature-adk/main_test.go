package main

import (
	"fmt"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
)

// TestServeWorkspace: armature-adk serves the workspace beside it; a
// refund suspends, the process is killed, and the approval given to a
// new process completes it.
func TestServeWorkspace(t *testing.T) {
	adaptertest.RunBinary(t, ".", "workspace.yaml")
}

// TestAgainstAimock: an ADK-Go agent pointed at a third-party mock of
// its vendor's API holds up through armature-adk as against the vendor:
// plain, tool and approval turns across a kill, and the upstream's rate
// limit, empty answer and cut stream as errored turns of their
// categories. Its model is ADK-Go's own Gemini client (model: {provider:
// gemini}), with and without ADK-Go's streaming mode, or the workspace
// agent's model (Armature's OpenAI or Anthropic client) bridged.
func TestAgainstAimock(t *testing.T) {
	for _, c := range []struct {
		name      string
		streaming bool
		model     func(mock string) string // the agent's model keys and its adk: section's model
	}{
		{"gemini", true, geminiModel},
		{"gemini-blocking", false, geminiModel},
		{"openai-bridged", true, func(mock string) string {
			return fmt.Sprintf("provider: openai\n    model: gpt-test\n    base_url: %q\n    api_key_env: %s\n    adk:\n", mock+"/v1", adaptertest.UpstreamKeyEnv)
		}},
		{"anthropic-bridged", true, func(mock string) string {
			return fmt.Sprintf("provider: anthropic\n    model: claude-test\n    base_url: %q\n    api_key_env: %s\n    adk:\n", mock, adaptertest.UpstreamKeyEnv)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			adaptertest.RunUpstream(t, adaptertest.UpstreamConfig{Package: ".", Streaming: c.streaming, Workspace: func(mock string) string {
				return fmt.Sprintf(`agents:
  - id: %s
    backend: adk
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
    %s      instruction: You are the test agent.
      session: {driver: sqlite, path: adk-sessions.db}
      streaming: %v
`, adaptertest.AgentID, c.model(mock), c.streaming)
			}})
		})
	}
}

// geminiModel selects ADK-Go's own Gemini client on the mock.
func geminiModel(mock string) string {
	return fmt.Sprintf("adk:\n      model: {provider: gemini, name: gemini-test, base_url: %q, api_key_env: %s}\n", mock, adaptertest.UpstreamKeyEnv)
}
