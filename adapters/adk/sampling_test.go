package adk_test

import (
	"context"
	"testing"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/llm"
)

// TestBridge: the workspace's model settings reach every call of the
// bridged model (before, an adk agent on the anthropic provider failed
// every turn: the mapping requires max_tokens, which the bridge never
// set), and a call's failure keeps its category through ADK-Go's
// own wrapping, streamed or not.
func TestBridge(t *testing.T) {
	adaptertest.CheckBridge(t, adk.Name, adk.Factory, `{}`, `{"streaming":true}`)
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
