package anthropic_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/internal/spectest"
)

const anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"

func anthropicEnd(stop string) string {
	return "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" + stop + "\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
}

// TestReplyBound: a reply over Config.MaxResponseBytes fails the call
// with provider_invalid_response, streamed or not, without reading the
// rest of it; a negative bound is refused.
func TestReplyBound(t *testing.T) {
	spectest.CheckReplyBound(t, spectest.ReplyBound{
		New: func(baseURL string, limit int64) (llm.Provider, error) {
			return anthropic.New(anthropic.Config{BaseURL: baseURL, APIKey: spectest.ReplyBoundKey, Model: "claude-test", MaxResponseBytes: limit})
		},
		Request: func() *llm.Request {
			return &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Config: llm.Config{MaxTokens: new(256)},
				Tools: []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}}
		},
		Body: func(text string) []byte {
			return []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"` +
				text + `"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
		},
		Stream: func(deltas []string) []byte {
			var b strings.Builder
			b.WriteString(anthropicStart)
			b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
			for _, d := range deltas {
				fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", d)
			}
			b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
			b.WriteString(anthropicEnd("end_turn"))
			return []byte(b.String())
		},
		ToolStream: func(n int) []byte {
			var b strings.Builder
			b.WriteString(anthropicStart)
			b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n")
			delta := func(s string) {
				fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":%q}}\n\n", s)
			}
			delta(`{"a":"`)
			for ; n > 0; n -= 1024 {
				delta(strings.Repeat("H", min(n, 1024)))
			}
			delta(`"}`)
			b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
			b.WriteString(anthropicEnd("tool_use"))
			return []byte(b.String())
		},
	})
	if _, err := anthropic.New(anthropic.Config{Model: "m", MaxResponseBytes: -1}); err == nil {
		t.Error("a negative MaxResponseBytes was accepted")
	}
}
