package prompt_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// langfuseServer serves the prompts API the way Langfuse answers it.
func langfuseServer(t *testing.T) *httptest.Server {
	t.Helper()
	prompts := map[string]string{
		"support@production": `{"name":"support","version":4,"type":"text","prompt":"Answer {{question}} as {{persona}}.",
			"config":{"model":"gpt-4o","temperature":0.3,"max_tokens":200,"supported_languages":["en"],"token_budget":{"input_max_tokens":900,"x":1}},
			"labels":["production","latest"],"tags":["support"]}`,
		"chat@staging": `{"name":"chat","version":7,"type":"chat","prompt":[{"role":"system","content":"You are {{persona}}."},
			{"type":"placeholder","name":"history"},{"type":"chatmessage","role":"user","content":"{{question}}"}],"config":{},"labels":["staging"]}`,
		"garbage@production": `{"name":`,
		"weird@production":   `{"name":"weird","version":1,"type":"image","prompt":"x"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "pk-lf-1" || p != "sk-lf-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/api/public/v2/prompts/")
		switch name {
		case "down":
			w.WriteHeader(http.StatusBadGateway)
			return
		case "slow":
			time.Sleep(300 * time.Millisecond)
		}
		body, ok := prompts[name+"@"+r.URL.Query().Get("label")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"LangfuseNotFoundError","message":"Prompt not found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLangfuse(t *testing.T) {
	ctx := context.Background()
	srv := langfuseServer(t)
	lf, err := prompt.NewLangfuse(prompt.LangfuseConfig{BaseURL: srv.URL, PublicKey: "pk-lf-1", SecretKey: "sk-lf-secret", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := lf.Fetch(ctx, "support", "production", prompt.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != "4" || p.IsChat() || *p.Sampling.Temperature != 0.3 || *p.Sampling.MaxTokens != 200 ||
		p.Sampling.Extras["supported_languages"] == nil || p.Sampling.Extras["model"] != nil || *p.TokenBudget.InputMaxTokens != 900 {
		t.Fatalf("text prompt %+v sampling %+v budget %+v", p, p.Sampling, p.TokenBudget)
	}
	if ref, ok := p.ObservabilityEntities["langfuse_prompt"].(prompt.LangfusePromptRef); !ok || ref.Version != 4 {
		t.Fatalf("entities %+v", p.ObservabilityEntities)
	}
	res, err := prompt.Render(p, map[string]any{"question": "Q", "persona": "P"}, prompt.RenderOptions{})
	if err != nil || res.Messages[0].Text() != "Answer Q as P." {
		t.Fatalf("render %+v %v", res, err)
	}
	c, err := lf.Fetch(ctx, "chat", "staging", prompt.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = prompt.Render(c, map[string]any{"question": "Q", "persona": "P"}, prompt.RenderOptions{
		Placeholders: map[string][]llm.Message{"history": {llm.UserText("u"), llm.AssistantText("a")}}})
	if err != nil || len(res.Messages) != 4 || res.Messages[3].Text() != "Q" {
		t.Fatalf("chat render %+v %v", res, err)
	}
	tests := []struct {
		name, label string
		lf          *prompt.Langfuse
		want        errcat.Category
	}{
		{name: "support", label: "staging", want: errcat.PromptNotFound},
		{name: "down", label: "production", want: errcat.PromptStoreUnavailable},
		{name: "slow", label: "production", want: errcat.PromptStoreUnavailable},
		{name: "garbage", label: "production", want: errcat.PromptStoreUnavailable},
		{name: "weird", label: "production", want: errcat.PromptStoreUnavailable},
	}
	wrongKey, _ := prompt.NewLangfuse(prompt.LangfuseConfig{BaseURL: srv.URL, PublicKey: "pk-lf-1", SecretKey: "sk-wrong-secret"})
	tests = append(tests, struct {
		name, label string
		lf          *prompt.Langfuse
		want        errcat.Category
	}{name: "support", label: "production", lf: wrongKey, want: errcat.PromptStoreUnavailable})
	for _, tt := range tests {
		b := lf
		if tt.lf != nil {
			b = tt.lf
		}
		_, err := b.Fetch(ctx, tt.name, tt.label, prompt.FetchOptions{})
		if !errors.Is(err, tt.want) {
			t.Errorf("%s@%s: %v, want %s", tt.name, tt.label, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "sk-")) {
			t.Errorf("%s: the error shows a key: %v", tt.name, err)
		}
	}
	if _, err := prompt.NewLangfuse(prompt.LangfuseConfig{BaseURL: "ftp://x"}); !errors.Is(err, prompt.ErrInvalidArgument) {
		t.Errorf("bad base URL: %v", err)
	}
	// Langfuse unavailable, local files as the fallback: their answer
	// (here: no such prompt) is the manager's.
	m, _ := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{lf, prompt.NewDir("testdata/prompts")}})
	if p, err := m.Fetch(ctx, "down", "production", prompt.FetchOptions{}); !errors.Is(err, errcat.PromptNotFound) {
		t.Errorf("down, then not found locally: %+v %v", p, err)
	}
}
