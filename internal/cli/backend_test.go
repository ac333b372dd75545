package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestWorkspaceBackendSettings: an upstream agent receives the
// workspace's model settings (max_tokens, temperature; the anthropic
// default) and history window, and the keys only the native backend
// implements are refused on it rather than silently ignored.
func TestWorkspaceBackendSettings(t *testing.T) {
	load := func(t *testing.T, agentYAML string) (*adapter.Workspace, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "ws.yaml")
		if err := os.WriteFile(path, []byte("agents:\n"+agentYAML), 0o600); err != nil {
			t.Fatal(err)
		}
		ws, err := loadWorkspace(path)
		if err != nil {
			t.Fatal(err)
		}
		return ws.adapterWorkspace()
	}
	aw, err := load(t, `
  - {id: a, backend: eino, provider: openai, model: m, base_url: "http://127.0.0.1:1/v1", max_tokens: 300, temperature: 0.25}
  - {id: b, backend: adk, provider: anthropic, model: m, base_url: "http://127.0.0.1:1"}
  - {id: c, backend: eino, window: {max_messages: 20, max_tokens: 4000}}
  - {id: d, window: {max_messages: 4}, max_steps: 3, compaction: {}}
`)
	if err != nil {
		t.Fatal(err)
	}
	s := aw.Agents[0].Sampling
	if s.MaxTokens == nil || *s.MaxTokens != 300 || s.Temperature == nil || *s.Temperature != 0.25 {
		t.Errorf("eino agent's sampling: %+v", s)
	}
	if s := aw.Agents[1].Sampling; s.MaxTokens == nil || *s.MaxTokens != 1024 || s.Temperature != nil {
		t.Errorf("anthropic adk agent's sampling: %+v, want max_tokens 1024 (the mapping requires one)", s)
	}
	if s := aw.Agents[2].Sampling; s.MaxTokens != nil || s.Temperature != nil {
		t.Errorf("default sampling: %+v", s)
	}
	if w := aw.Agents[2].Window; w.MaxMessages != 20 || w.MaxTokens != 4000 {
		t.Errorf("eino agent's window: %+v", w)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`[{id: x, backend: eino, compaction: {}, window: {max_messages: 20}}]`, "compaction"},
		{`[{id: x, backend: adk, system_prompt: {name: p}}]`, "system_prompt"},
		{`[{id: x, backend: eino, max_steps: 4, compaction: {}}]`, "compaction, max_steps"},
		{`[{id: x, backend: adk, tool_timeout: 30s, max_tool_result_bytes: 1KiB}]`, "tool_timeout, max_tool_result_bytes"},
	} {
		_, err := load(t, "  - "+tc.yaml[1:len(tc.yaml)-1]+"\n")
		if err == nil || !strings.Contains(err.Error(), "agent x: "+tc.want+": only the native backend") {
			t.Errorf("%s: error %v, want the native-only keys %q refused", tc.yaml, err, tc.want)
		}
		// The backend's section has no such keys (no tool bounds, no
		// compaction): the error must not tell the user to put them there.
		if err != nil && strings.Contains(err.Error(), "configure backend") {
			t.Errorf("%s: error %q sends the user to the backend's section, which has no such key", tc.yaml, err)
		}
	}
}

// TestWorkspaceStrict: a key the workspace does not declare is refused
// with its line (a typo such as timout:, a secret put in the file), as is
// a second YAML document; a backend-native section (a mapping, named
// like a backend) is not. Before, all of them were ignored.
func TestWorkspaceStrict(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"top-level typo", "agentz: []\nagents: [{id: a}]\n", "agentz"},
		{"agent typo", "agents:\n  - id: a\n    timout: 30s\n", "timout"},
		{"secret in the file", "agents:\n  - id: a\n    api_key: sk-0123456789\n", "api_key"},
		{"window typo", "agents:\n  - id: a\n    window: {max_mesages: 5}\n", "max_mesages"},
		{"prompts typo", "prompts: {dirr: p}\nagents: [{id: a}]\n", "dirr"},
		{"second document", "agents: [{id: a}]\n---\nagents: [{id: b, bogus: 1}]\n", "more than one"},
		{"negative max_tokens", "agents:\n  - id: a\n    max_tokens: -5\n", "max_tokens"},
		{"NaN temperature", "agents:\n  - id: a\n    temperature: .nan\n", "temperature"},
		{"negative temperature", "agents:\n  - id: a\n    temperature: -3\n", "temperature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ws.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadWorkspace(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sk-0123456789") {
				t.Fatalf("loadWorkspace = %v, want an error naming %q (and no secret)", err, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "ws.yaml")
	if err := os.WriteFile(path, []byte("agents:\n  - id: a\n    backend: adk\n    adk: {instruction: hi}\n    eino:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadWorkspace(path); err != nil {
		t.Fatalf("backend sections: %v", err)
	}
}

// TestWorkspaceKeyEnvMustBeSet: an api_key_env naming an unset variable
// is a startup error, not model calls without a key.
func TestWorkspaceKeyEnvMustBeSet(t *testing.T) {
	t.Setenv("ARMATURE_TEST_UNSET_KEY", "")
	s := agentSpec{ID: "a", Provider: "openai", Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "ARMATURE_TEST_UNSET_KEY"}
	if _, err := s.provider(); err == nil || !strings.Contains(err.Error(), "ARMATURE_TEST_UNSET_KEY") {
		t.Fatalf("provider() = %v, want an error naming the variable", err)
	}
	t.Setenv("ARMATURE_TEST_UNSET_KEY", "sk-test-0123456789")
	if _, err := s.provider(); err != nil {
		t.Fatalf("with the variable set: %v", err)
	}
}

// TestBadWorkspaceOpensNoStore: a workspace mistake stops the server
// before its store opens: a fresh data directory gets no database (a
// shared PostgreSQL schema no migration). Before, the store was opened
// and migrated first.
func TestBadWorkspaceOpensNoStore(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(ws, []byte("agents:\n  - id: a\n    timout: 30s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	err := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--workspace", ws}, &strings.Builder{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "timout") {
		t.Fatalf("serve = %v, want the workspace's error", err)
	}
	if _, err := os.Stat(filepath.Join(data, "armature.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store was opened: %v", err)
	}
}
