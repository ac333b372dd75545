package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
)

// TestCheckPromptsRefusesNonSystemChatPrompt: checkPrompts fetches and
// renders each system_prompt as a turn of its agent does, and README
// promises that with a prompt dir a prompt that cannot be used "stops the
// startup, naming the file". A chat prompt with a user (or assistant)
// segment renders, but agent.ManagedPrompt takes system segments only,
// so every turn would fail with prompt_render_error: the startup check
// runs the agent's own check (agent.ManagedPrompt.Render) and refuses it.
func TestCheckPromptsRefusesNonSystemChatPrompt(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "prompts")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := "labels: {production: '1'}\nversions:\n  - version: '1'\n    chat_template:\n" +
		"      - {role: system, content: 'You help {{ team }}.'}\n" +
		"      - {role: user, content: 'Say hello first.'}\n"
	if err := os.WriteFile(filepath.Join(pdir, "support.yaml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(p, []byte("prompts: {dir: prompts}\nagents: [{id: a, provider: demo, system_prompt: {name: support, variables: {team: billing}}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWorkspace(p)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m, err := ws.promptManager(log)
	if err != nil {
		t.Fatal(err)
	}
	err = ws.checkPrompts(t.Context(), m, log)
	if err == nil {
		t.Fatal("startup check accepted a chat prompt with a user segment, which every turn of the agent refuses (prompt_render_error: a system prompt is a text prompt or system segments)")
	}
	if !errors.Is(err, errcat.PromptRenderError) || !strings.Contains(err.Error(), filepath.Join(pdir, "support.yaml")) {
		t.Fatalf("startup error %v: want prompt_render_error naming the file", err)
	}
}

// TestLangfuseKeyEnvUnsetRefused: a workspace's langfuse section whose
// public_key_env / secret_key_env name variables that are not set (or
// empty) is refused at startup, as an agent's api_key_env is: with empty
// keys every fetch would be refused with 401 (prompt_store_unavailable)
// and the manager would silently serve the prompt dir's copy for as long
// as the server runs.
func TestLangfuseKeyEnvUnsetRefused(t *testing.T) {
	t.Setenv("ARMATURE_TEST_UNSET_PK", "")
	t.Setenv("ARMATURE_TEST_UNSET_SK", "")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(p, []byte(`prompts:
  dir: prompts
  langfuse: {base_url: "http://127.0.0.1:19201", public_key_env: ARMATURE_TEST_UNSET_PK, secret_key_env: ARMATURE_TEST_UNSET_SK}
agents: [{id: a, provider: demo}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWorkspace(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.promptManager(slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("langfuse public_key_env / secret_key_env naming unset variables was accepted (the backend runs with empty keys)")
	}
}

// TestLangfuseKeyEnvErrorNamesKey: the refusal names the key and the
// variable, never a value; keys set in the environment are accepted.
func TestLangfuseKeyEnvErrorNamesKey(t *testing.T) {
	const secret = "pk-lf-do-not-print"
	t.Setenv("ARMATURE_TEST_PK", secret)
	t.Setenv("ARMATURE_TEST_SK", "")
	dir := t.TempDir()
	p := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(p, []byte(`prompts:
  langfuse: {base_url: "http://127.0.0.1:19201", public_key_env: ARMATURE_TEST_PK, secret_key_env: ARMATURE_TEST_SK}
agents: [{id: a, provider: demo}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWorkspace(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ws.promptManager(slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "secret_key_env names ARMATURE_TEST_SK, which is not set") || strings.Contains(err.Error(), secret) {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("ARMATURE_TEST_SK", "sk-lf")
	if _, err := ws.promptManager(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("keys set: %v", err)
	}
}
