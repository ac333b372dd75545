package adk_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
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
	adaptertest.CheckBridge(t, adk.Name, adk.Factory, `{"streaming":false}`, `{"streaming":true}`)
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

// TestGeminiSampling: the workspace's model settings reach ADK-Go's own
// Gemini client too (the agent's GenerateContentConfig), not only a
// bridged model: before, an adk agent with model: {provider: gemini}
// silently dropped the workspace's max_tokens and temperature.
func TestGeminiSampling(t *testing.T) {
	var (
		mu  sync.Mutex
		got []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		geminiAnswer(w, r, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`)
	}))
	defer srv.Close()
	t.Setenv("TEST_GEMINI_KEY", "test-key")
	ctx := context.Background()
	section := `{"model":{"provider":"gemini","name":"gemini-test","base_url":` + quote(srv.URL) + `,"api_key_env":"TEST_GEMINI_KEY"}}`
	ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(section),
		Sampling: llm.Config{MaxTokens: new(300), Temperature: new(0.25)}}
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
	if err != nil || res.Output == nil || res.Output.Text != "hi" {
		t.Fatalf("turn: %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	gc, _ := got[0]["generationConfig"].(map[string]any)
	if len(got) != 1 || gc["maxOutputTokens"] != float64(300) || gc["temperature"] != 0.25 {
		t.Fatalf("requests: %v, want generationConfig maxOutputTokens 300 and temperature 0.25", got)
	}
}
