package main

import (
	"fmt"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
)

// TestAgainstAimock runs the adapters' upstream script on a native agent
// (backend: armature): armature serve with the workspace model of each
// vendor pointed at aimock, a third-party mock of the OpenAI, Anthropic
// and Gemini APIs, holds up as the ADK-Go and Eino backends do — plain,
// tool and approval turns across a kill, and the upstream's rate limit
// and empty answer as errored turns that leave nothing in the session.
// (A native agent streams its model's answer only to a client that
// streams, so the script's JSON turns are not streamed and a cut stream
// is not among them; the interop suite cuts each vendor's stream.)
func TestAgainstAimock(t *testing.T) {
	for _, vendor := range []struct{ provider, model, path string }{
		{"openai", "gpt-test", "/v1"}, {"anthropic", "claude-test", ""}, {"gemini", "gemini-test", ""},
	} {
		t.Run(vendor.provider, func(t *testing.T) {
			adaptertest.RunUpstream(t, adaptertest.UpstreamConfig{Package: ".", Streaming: false, Workspace: func(mock string) string {
				return fmt.Sprintf(`agents:
  - id: %s
    provider: %s
    model: %s
    base_url: %q
    api_key_env: %s
    system: You are the test agent.
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
`, adaptertest.AgentID, vendor.provider, vendor.model, mock+vendor.path, adaptertest.UpstreamKeyEnv)
			}})
		})
	}
}
