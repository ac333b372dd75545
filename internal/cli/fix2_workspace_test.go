package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/errcat"
)

// TestWorkspaceNarrationStyle: a narration style the template narration
// does not know is refused when the workspace loads, naming the accepted
// values; concise and the default load.
func TestWorkspaceNarrationStyle(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		progress string
		want     string // "" loads
	}{
		{"progress: {narration: {enabled: true, style: concise}}", ""},
		{"progress: {narration: {enabled: true}}", ""},
		{"progress: {narration: {enabled: true, style: chatty}}", `progress.narration.style "chatty" is unknown: the accepted values are "concise"`},
		{"progress: {narration: {enabled: false, style: Concise}}", `"Concise" is unknown`},
		{"progress: {narration: {enabled: true, style: ' '}}", `" " is unknown`},
	} {
		p := filepath.Join(dir, "ws.yaml")
		if err := os.WriteFile(p, []byte(tc.progress+"\nagents: [{id: x, provider: demo}]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadWorkspace(p)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.progress, err, tc.want)
		}
	}
}

// TestCheckPrompts: a managed system prompt that is missing, invalid or
// does not render with the agent's variables fails the start when the
// prompts are local files, naming the agent, the prompt and the file
// looked for (the category stays inspectable); with a Langfuse backend
// (where it may be published later) it is a warning and the start goes
// on.
func TestCheckPrompts(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "prompts")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"support": "labels: {production: '1'}\nversions: [{version: '1', template: 'You help {{ team }}.'}]\n",
		"broken":  "versions: [",
	} {
		if err := os.WriteFile(filepath.Join(pdir, name+".yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	langfuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"Prompt not found"}`, http.StatusNotFound)
	}))
	defer langfuse.Close()
	for _, tc := range []struct {
		name, prompts, prompt string
		want                  []string // "" in want[0]: starts
		cat                   errcat.Category
		warn                  bool
	}{
		{"present", "{dir: prompts}", "{name: support, variables: {team: billing}}", []string{""}, "", false},
		{"missing", "{dir: prompts}", "{name: suport, variables: {team: billing}}",
			[]string{`agent "a": system_prompt "suport" (label "production") does not exist: looked in ` + filepath.Join(pdir, "suport.yaml")}, errcat.PromptNotFound, false},
		{"missing label", "{dir: prompts}", "{name: support, label: staging, variables: {team: billing}}",
			[]string{`(label "staging") does not exist`}, errcat.PromptNotFound, false},
		{"invalid file", "{dir: prompts}", "{name: broken}", []string{`system_prompt "broken"`, "cannot be used", "broken.yaml"}, errcat.PromptStoreUnavailable, false},
		{"does not render", "{dir: prompts}", "{name: support}", []string{`system_prompt "support"`, "cannot be used"}, errcat.PromptRenderError, false},
		{"missing in Langfuse", "{langfuse: {base_url: '" + langfuse.URL + "'}, dir: prompts}", "{name: suport}", []string{""}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "ws.yaml")
			if err := os.WriteFile(p, []byte("prompts: "+tc.prompts+"\nagents: [{id: a, provider: demo, system_prompt: "+tc.prompt+"}]\n"), 0o600); err != nil {
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
			if tc.want[0] == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			} else {
				for _, w := range tc.want {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want %q", err, w)
					}
				}
				if !errors.Is(err, tc.cat) {
					t.Errorf("err = %v, not %s", err, tc.cat)
				}
			}
			if warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "suport"); warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
}

// TestServeRefusesMissingPrompt: armature serve fails at startup, before
// it opens (or creates) the store, for a managed prompt that is not in
// the workspace's prompt dir, instead of failing each turn.
func TestServeRefusesMissingPrompt(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "ARMATURE_TOKENS"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(ws, []byte("prompts: {dir: prompts}\nagents: [{id: a, provider: demo, system_prompt: {name: support}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	// Bounded: a server that starts anyway serves until the deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := runServe(ctx, []string{"--workspace", ws, "--data", data, "--addr", "127.0.0.1:19201"}, io.Discard, io.Discard, Options{})
	if err == nil || !strings.Contains(err.Error(), `system_prompt "support" (label "production") does not exist`) {
		t.Fatalf("runServe = %v, want the missing prompt refused", err)
	}
	if _, err := os.Stat(filepath.Join(data, "armature.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was opened: %v", err)
	}
}

// TestServeRefusesUnregisteredBackend: an agent naming a backend no
// adapter is registered for (armature serve without the adk module) is
// refused before the store opens, so a shared database is not migrated
// on the way out.
func TestServeRefusesUnregisteredBackend(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "ARMATURE_TOKENS"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(ws, []byte("agents: [{id: a, backend: adk, provider: demo, adk: {instruction: hi}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := runServe(ctx, []string{"--workspace", ws, "--data", data, "--addr", "127.0.0.1:19202"}, io.Discard, io.Discard, Options{})
	if !errors.Is(err, adapter.ErrUnknownAdapter) || !strings.Contains(err.Error(), `"adk"`) {
		t.Fatalf("runServe = %v, want the unregistered backend refused", err)
	}
	if _, err := os.Stat(filepath.Join(data, "armature.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was opened: %v", err)
	}
}
