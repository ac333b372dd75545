package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter"
)

// TestWorkspaceBackends: backend: names the adapter (default armature),
// the section named like it is the adapter's config, and a backend no
// factory is registered for fails at startup.
func TestWorkspaceBackends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.yaml")
	if err := os.WriteFile(path, []byte(`
progress: {narration: {enabled: true, style: concise}}
direct_tools: {ops: ["*"]}
agents:
  - id: native
    tools: [lookup_order]
  - id: upstream
    backend: adk
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
    adk: {instruction: be brief, max_iterations: 3}
    eino: {ignored: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWorkspace(path)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Progress == nil || !ws.Progress.Narration.Enabled || ws.DirectTools["ops"][0] != "*" {
		t.Errorf("progress / direct_tools: %+v %v", ws.Progress, ws.DirectTools)
	}
	aw, err := ws.adapterWorkspace()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		i               int
		backend, config string
		tools           int
	}{
		{0, adapter.Native, "", 1},
		{1, "adk", `{"instruction":"be brief","max_iterations":3}`, 2},
	} {
		ag := aw.Agents[tc.i]
		if ag.Backend != tc.backend || string(ag.Config) != tc.config || len(ag.Tools) != tc.tools || ag.Provider == nil {
			t.Errorf("agent %s: backend %q config %s tools %d provider %v", ag.ID, ag.Backend, ag.Config, len(ag.Tools), ag.Provider)
		}
	}
	if !aw.Agents[1].Tools[1].NeedsApproval {
		t.Error("the adk agent's issue_refund does not need approval")
	}
	reg, err := ws.adapters(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: aw, Agent: aw.Agents[0]}); err != nil || a.Name() != adapter.Native {
		t.Errorf("native: %v %v", a, err)
	}
	if _, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: aw, Agent: aw.Agents[1]}); !errors.Is(err, adapter.ErrUnknownAdapter) {
		t.Errorf("adk without a registered factory: %v", err)
	}
}
