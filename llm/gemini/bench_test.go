package gemini_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/llm"
)

// BenchmarkComplete measures one Complete round trip (encode, HTTP over a
// pooled loopback connection, decode, tool-call checks) against an
// in-process server answering a tool-calling turn.
func BenchmarkComplete(b *testing.B) {
	answer := []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Let me check.","thought":true},{"functionCall":{"name":"get_weather","id":"c1","args":{"location":"SF"}},"thoughtSignature":"c2ln"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":9,"totalTokenCount":49}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	p := newProvider(b, srv.URL)
	req := &llm.Request{
		Messages: []llm.Message{
			llm.SystemText("You are a weather bot."),
			llm.UserText("Weather in SF?"),
			llm.AssistantToolCalls(llm.ToolCall{ID: "c0", Name: "get_weather", Arguments: json.RawMessage(`{"location":"LA"}`)}),
			llm.ToolResult("c0", "75F sunny"),
		},
		Tools:  []llm.Tool{weatherTool},
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
