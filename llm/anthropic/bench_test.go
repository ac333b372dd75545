package anthropic_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/llm"
)

// BenchmarkComplete measures one Complete round trip (body building,
// HTTP over loopback with a reused connection, response mapping) against
// an in-process server, for a short tool-using conversation.
func BenchmarkComplete(b *testing.B) {
	reply := []byte(`{"type":"message","id":"msg_b","model":"claude-test","role":"assistant","content":[{"type":"thinking","thinking":"Think.","signature":"sig"},{"type":"text","text":"It is sunny."},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"location":"LA"}}],"stop_reason":"tool_use","usage":{"input_tokens":40,"output_tokens":12}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(reply)
	}))
	defer srv.Close()
	p := newProvider(b, srv.URL, nil)
	req := &llm.Request{
		Messages: []llm.Message{
			llm.SystemText("You are a weather assistant."),
			llm.UserText("Weather in SF?"),
			llm.AssistantToolCalls(llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"SF"}`)}),
			llm.ToolResult("toolu_1", "72F sunny"),
		},
		Tools: []llm.Tool{{Name: "get_weather", Description: "Weather lookup.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)}},
		Config: llm.Config{MaxTokens: new(256), Temperature: new(0.2)},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestBody measures building the byte-stable request body.
func BenchmarkRequestBody(b *testing.B) {
	p := newProvider(b, "http://127.0.0.1:1", nil)
	req := &llm.Request{
		Messages: []llm.Message{llm.SystemText("Be terse."), llm.UserText("Hello.")},
		Config:   llm.Config{MaxTokens: new(64)},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.RequestBody(req); err != nil {
			b.Fatal(err)
		}
	}
}
