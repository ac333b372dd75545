package adk_test

import (
	"context"
	"testing"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
)

// TestWorkspaceSampling: the workspace agent's model settings
// (adapter.Agent.Sampling) reach the bridged model's every call. Before,
// an adk agent on the anthropic provider failed every turn: the mapping
// requires max_tokens, which the bridge never set.
func TestWorkspaceSampling(t *testing.T) {
	url, bodies := adaptertest.AnthropicEndpoint(t)
	p, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: "test-key", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ag := &adapter.Agent{ID: "x", Backend: adk.Name, Model: "m", Provider: p,
		Sampling: llm.Config{MaxTokens: new(1024), Temperature: new(0.5)}}
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output == nil || res.Output.Text != "hi" {
		t.Fatalf("turn: %+v", res)
	}
	got := bodies()
	if len(got) != 1 || got[0]["max_tokens"] != float64(1024) || got[0]["temperature"] != 0.5 {
		t.Fatalf("requests: %v, want max_tokens 1024 and temperature 0.5", got)
	}
}

// TestRequestSamplingWins: the settings of the ADK-Go request's own
// GenerateContentConfig win over the workspace's, field by field.
func TestRequestSamplingWins(t *testing.T) {
	var seen llm.Config
	p := adaptertest.ProviderFunc(func(req *llm.Request) {
		seen = req.Config
	})
	m := adk.NewProviderModelConfig("m", p, llm.Config{MaxTokens: new(1024), Temperature: new(0.9), TopP: new(0.5)})
	req := &model.LLMRequest{Contents: []*genai.Content{genai.NewContentFromText("hi", genai.RoleUser)},
		Config: &genai.GenerateContentConfig{MaxOutputTokens: 64, Temperature: new(float32(0.2)), StopSequences: []string{"END"}}}
	for _, err := range m.GenerateContent(context.Background(), req, false) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen.MaxTokens == nil || *seen.MaxTokens != 64 || seen.Temperature == nil || *seen.Temperature != 0.2 ||
		seen.TopP == nil || *seen.TopP != 0.5 || len(seen.StopSequences) != 1 {
		t.Fatalf("config sent: %+v, want max_tokens 64 and temperature 0.2 (the request's), top_p 0.5 (the workspace's), stop END", seen)
	}
}
