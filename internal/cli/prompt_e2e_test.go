package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestE2EManagedPrompt: an agent whose system prompt is a managed prompt
// file; each run records which version it used (agent.prompt.resolved),
// and a new version published under the label reaches the next turn
// without a restart.
func TestE2EManagedPrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	pdir := filepath.Join(dir, "prompts")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	publish := func(label string) {
		body := "labels: {production: '" + label + "'}\nversions:\n" +
			"  - {version: '1', template: 'You help {{ team }}.'}\n" +
			"  - {version: '2', template: 'You help {{ team }}, briefly.'}\n"
		if err := os.WriteFile(filepath.Join(pdir, "support.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	publish("1")
	ws := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(ws, []byte(`
prompts: {dir: prompts, cache_ttl: 0s}
agents:
  - id: support
    provider: demo
    tools: [lookup_order]
    system_prompt: {name: support, variables: {team: billing}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), "--workspace", ws)
	version := func() string {
		t.Helper()
		var out struct {
			Outcome string `json:"outcome"`
			RunID   string `json:"run_id"`
		}
		if code := s.do("POST", "/v1/sessions/p1/messages", map[string]string{"content": "where is order 7?"}, &out); code != 200 || out.Outcome != "completed" {
			t.Fatalf("send: %d %+v", code, out)
		}
		var evs struct {
			Events []struct {
				Data json.RawMessage `json:"data"`
			} `json:"events"`
		}
		s.do("GET", "/v1/runs/"+out.RunID+"/events", nil, &evs)
		found := ""
		for _, e := range evs.Events {
			var d struct {
				Event struct {
					Phase  string `json:"phase"`
					Prompt struct {
						Name, Version string
					} `json:"prompt"`
				} `json:"event"`
			}
			if json.Unmarshal(e.Data, &d) == nil && d.Event.Phase == "agent.prompt.resolved" {
				if found != "" {
					t.Fatalf("the prompt was recorded twice in one run")
				}
				found = d.Event.Prompt.Name + "@" + d.Event.Prompt.Version
			}
		}
		return found
	}
	if got := version(); got != "support@1" {
		t.Fatalf("first run used %q", got)
	}
	publish("2")
	if got := version(); got != "support@2" {
		t.Fatalf("after publishing: %q", got)
	}
}
