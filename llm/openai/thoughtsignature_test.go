package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// TestThoughtSignatureRoundTrip: a tool call's
// extra_content.google.thought_signature (Gemini's OpenAI-compatible
// endpoint) is read into ToolCall.Signature and sent back on that call
// when the server is Gemini's (stripped elsewhere, §3.1.7). Before, users
// saw the second model call of a tool turn fail with HTTP 400.
//
// Original report: Gemini's OpenAI-compatible
// endpoint (generativelanguage.googleapis.com/v1beta/openai, documented
// for Gemini 3) returns each function call's thought signature as
// tool_calls[].extra_content.google.thought_signature and requires it
// back on that call in the next request ("Function call is missing a
// thought_signature", HTTP 400). A user running an agent with a tool
// over this endpoint sees the turn fail at its second model call: the
// mapping drops extra_content on the way in (ToolCall.Signature stays
// empty) and never sends it on the way out. They should see the
// signature kept on the ToolCall and sent back.
func TestThoughtSignatureRoundTrip(t *testing.T) {
	const sig = "CiQB0e2Kb7Xh4sigAAAA"
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			_, _ = w.Write([]byte(`{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"` + sig + `"}},"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"function-call-1","type":"function"}]}}],"created":1,"id":"r1","model":"gemini-3-pro-preview","object":"chat.completion","usage":{"completion_tokens":10,"prompt_tokens":20,"total_tokens":30}}`))
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Sunny."}}],"created":1,"id":"r2","model":"gemini-3-pro-preview","object":"chat.completion"}`))
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "gemini-3-pro-preview"})
	if err != nil {
		t.Fatal(err)
	}
	tools := []llm.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	msgs := []llm.Message{llm.UserText("Weather in Paris?")}
	resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("calls = %+v", resp.Message.ToolCalls)
	}
	if resp.Message.ToolCalls[0].Signature != sig {
		t.Errorf("ToolCall.Signature = %q, want the extra_content thought_signature", resp.Message.ToolCalls[0].Signature)
	}
	msgs = append(msgs, resp.Message, llm.ToolResult("function-call-1", "sunny"))
	if _, err := llm.Complete(context.Background(), p, &llm.Request{Messages: msgs, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bodies[1], sig) {
		t.Errorf("second request does not send the thought signature back: %s", bodies[1])
	}
}
