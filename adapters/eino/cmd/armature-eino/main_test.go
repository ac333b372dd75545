package main

import (
	"fmt"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
)

// TestServeWorkspace: armature-eino serves the workspace beside it; a
// refund suspends, the process is killed, and the approval given to a
// new process completes it.
func TestServeWorkspace(t *testing.T) {
	adaptertest.RunBinary(t, ".", "workspace.yaml")
}

// TestAgainstAimock: an Eino agent whose model is the workspace's
// (provider: workspace: Armature's OpenAI, Anthropic or Gemini client),
// pointed at a third-party mock of each vendor's API, holds up through
// armature-eino as against the vendor: plain, tool and approval turns
// across a kill, and the upstream's rate limit, empty answer and cut
// stream as errored turns of their categories.
func TestAgainstAimock(t *testing.T) {
	for _, vendor := range []struct{ provider, model, path string }{
		{"openai", "gpt-test", "/v1"}, {"anthropic", "claude-test", ""}, {"gemini", "gemini-test", ""},
	} {
		t.Run(vendor.provider, func(t *testing.T) {
			adaptertest.RunUpstream(t, adaptertest.UpstreamConfig{Package: ".", Streaming: true, Workspace: func(mock string) string {
				return fmt.Sprintf(`agents:
  - id: %s
    backend: eino
    provider: %s
    model: %s
    base_url: %q
    api_key_env: %s
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
    eino:
      instruction: You are the test agent.
      provider: workspace
      checkpoint: {driver: file, dir: eino-checkpoints}
      streaming: true
`, adaptertest.AgentID, vendor.provider, vendor.model, mock+vendor.path, adaptertest.UpstreamKeyEnv)
			}})
		})
	}
}
