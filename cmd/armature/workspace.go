package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/openai"
)

// workspace is the YAML file that declares armature serve's agents:
//
//	default_agent: support
//	task_hints: {refunds: support}
//	agents:
//	  - id: support
//	    provider: openai          # demo | openai | anthropic | gemini
//	    model: gpt-4o-mini
//	    base_url: https://api.openai.com/v1
//	    api_key_env: OPENAI_API_KEY   # the key is read from the environment, never the file
//	    system: You are a helpful support agent.
//	    tools: [lookup_order, issue_refund]
//	    approval: [issue_refund]
//	    risk: {issue_refund: dangerous}   # safe | caution (default) | dangerous
//	    max_tokens: 1024
type workspace struct {
	DefaultAgent string            `yaml:"default_agent"`
	TaskHints    map[string]string `yaml:"task_hints"`
	Agents       []agentSpec       `yaml:"agents"`
}

type agentSpec struct {
	ID        string   `yaml:"id"`
	Provider  string   `yaml:"provider"`
	Model     string   `yaml:"model"`
	BaseURL   string   `yaml:"base_url"`
	APIKeyEnv string   `yaml:"api_key_env"`
	System    string   `yaml:"system"`
	Tools     []string `yaml:"tools"`
	Approval  []string `yaml:"approval"`
	// Risk declares tools' risk tiers (agent.Risk), overriding the
	// built-in tool's own.
	Risk     map[string]string `yaml:"risk"`
	MaxSteps int               `yaml:"max_steps"`
	// MaxTokens and Temperature set the model's sampling; the Anthropic
	// mapping requires max_tokens, so it defaults to 1024 there.
	MaxTokens   *int     `yaml:"max_tokens"`
	Temperature *float64 `yaml:"temperature"`
}

// loadWorkspace reads path, or returns the built-in demo workspace when
// path is empty.
func loadWorkspace(path string) (*workspace, error) {
	if path == "" {
		return &workspace{Agents: []agentSpec{{ID: "demo", Provider: "demo", Model: demo.ModelName,
			Tools: []string{"lookup_order", "issue_refund"}, Approval: []string{"issue_refund"}}}}, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	var ws workspace
	if err := yaml.Unmarshal(raw, &ws); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", path, err)
	}
	if len(ws.Agents) == 0 {
		return nil, fmt.Errorf("workspace %s: no agents", path)
	}
	return &ws, nil
}

// builtinTools are the tools a workspace may name.
func builtinTools() map[string]agent.Tool {
	out := map[string]agent.Tool{}
	for _, t := range demo.Tools() {
		t.NeedsApproval = false
		out[t.Definition.Name] = t
	}
	return out
}

func (s agentSpec) toolNames() []string { return slices.Clone(s.Tools) }

// build constructs the agent a spec declares.
func (s agentSpec) build(ctx context.Context) (*agent.Agent, error) {
	provider, err := s.provider()
	if err != nil {
		return nil, err
	}
	builtins := builtinTools()
	var tools []agent.Tool
	for _, name := range s.Tools {
		t, ok := builtins[name]
		if !ok {
			return nil, fmt.Errorf("unknown tool %q", name)
		}
		if slices.Contains(s.Approval, name) {
			t = t.WithApproval()
		}
		if r, ok := s.Risk[name]; ok {
			risk, err := agent.ParseRisk(r)
			if err != nil {
				return nil, fmt.Errorf("risk of %q: %w", name, err)
			}
			t = t.WithRisk(risk)
		}
		tools = append(tools, t)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Risk)) {
		if !slices.Contains(s.Tools, name) {
			return nil, fmt.Errorf("risk names %q, which is not among the agent's tools", name)
		}
	}
	for _, name := range s.Approval {
		if !slices.Contains(s.Tools, name) {
			return nil, fmt.Errorf("approval names %q, which is not among the agent's tools", name)
		}
	}
	model := llm.Config{MaxTokens: s.MaxTokens, Temperature: s.Temperature}
	if model.MaxTokens == nil && s.Provider == "anthropic" {
		model.MaxTokens = new(1024)
	}
	return agent.New(agent.Config{Provider: provider, System: s.System, Tools: tools, MaxSteps: s.MaxSteps, Model: model})
}

// provider builds the spec's model provider.
func (s agentSpec) provider() (llm.Provider, error) {
	key := ""
	if s.APIKeyEnv != "" {
		key = os.Getenv(s.APIKeyEnv)
	}
	switch s.Provider {
	case "", "demo":
		return demo.Model{}, nil
	case "openai":
		return openai.New(openai.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model})
	case "anthropic":
		return anthropic.New(anthropic.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model})
	case "gemini":
		return gemini.New(gemini.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model})
	}
	return nil, fmt.Errorf("unknown provider %q (supported: demo, openai, anthropic, gemini)", s.Provider)
}
