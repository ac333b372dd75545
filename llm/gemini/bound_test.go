package gemini_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// TestReplyBound: a reply over Config.MaxResponseBytes fails the call
// with provider_invalid_response, streamed or not, without reading the
// rest of it; a negative bound is refused.
func TestReplyBound(t *testing.T) {
	const usage = `"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2}`
	spectest.CheckReplyBound(t, spectest.ReplyBound{
		New: func(baseURL string, limit int64) (llm.Provider, error) {
			return gemini.New(gemini.Config{BaseURL: baseURL, APIKey: spectest.ReplyBoundKey, Model: "gemini-test",
				CallNonce: func() string { return "n" }, MaxResponseBytes: limit})
		},
		Request: func() *llm.Request {
			return &llm.Request{Messages: []llm.Message{llm.UserText("hi")},
				Tools: []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}}
		},
		Body: func(text string) []byte {
			return []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"` + text + `"}]},"finishReason":"STOP","index":0}],` + usage + `}`)
		},
		Stream: func(deltas []string) []byte {
			var b strings.Builder
			for _, d := range deltas {
				fmt.Fprintf(&b, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":%q}]},\"index\":0}],%s}\n\n", d, usage)
			}
			fmt.Fprintf(&b, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[]},\"finishReason\":\"STOP\",\"index\":0}],%s}\n\n", usage)
			return []byte(b.String())
		},
		// Gemini sends a call's arguments whole, in one part.
		ToolStream: func(n int) []byte {
			return fmt.Appendf(nil, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":%q}}}]},\"finishReason\":\"STOP\",\"index\":0}],%s}\n\n",
				strings.Repeat("H", n), usage)
		},
	})
	if _, err := gemini.New(gemini.Config{Model: "m", MaxResponseBytes: -1}); err == nil {
		t.Error("a negative MaxResponseBytes was accepted")
	}
}
