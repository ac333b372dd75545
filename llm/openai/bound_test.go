package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/spectest"
	"github.com/armature-go/armature/llm/openai"
)

// openaiReplyBound is the Chat Completions wire for
// spectest.CheckReplyBound.
var openaiReplyBound = spectest.ReplyBound{
	New: func(baseURL string, limit int64) (llm.Provider, error) {
		return openai.New(openai.Config{BaseURL: baseURL, APIKey: spectest.ReplyBoundKey, Model: "m", MaxResponseBytes: limit})
	},
	Request: func() *llm.Request {
		return &llm.Request{Messages: []llm.Message{llm.UserText("hi")},
			Tools: []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	},
	Body: func(text string) []byte {
		return []byte(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			text + `"},"finish_reason":"stop"}]}`)
	},
	Stream: func(deltas []string) []byte {
		var b strings.Builder
		for _, d := range deltas {
			fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", d)
		}
		b.WriteString("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		return []byte(b.String())
	},
	ToolStream: func(n int) []byte {
		var b strings.Builder
		b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"\"}}]}}]}\n\n")
		for ; n > 0; n -= 1024 {
			fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":%q}}]}}]}\n\n", strings.Repeat("H", min(n, 1024)))
		}
		b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]}}]}\n\n")
		b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
		return []byte(b.String())
	},
}

// TestReplyBound: a reply over Config.MaxResponseBytes fails the call
// with provider_invalid_response, streamed or not, without reading the
// rest of it.
func TestReplyBound(t *testing.T) { spectest.CheckReplyBound(t, openaiReplyBound) }

// TestReplyBoundDefault: with no MaxResponseBytes, a reply of more than
// 16 MiB (the attack's runaway upstream) fails, streamed or not, and
// one just under it succeeds; a negative bound is refused.
func TestReplyBoundDefault(t *testing.T) {
	const over = openai.DefaultMaxResponseBytes + 1<<20
	deltas := func(total int) []string {
		d := make([]string, 0, total/(64<<10)+1)
		for ; total > 0; total -= 64 << 10 {
			d = append(d, strings.Repeat("H", min(total, 64<<10)))
		}
		return d
	}
	underBody := openaiReplyBound.Body("")
	underBody = openaiReplyBound.Body(strings.Repeat("H", openai.DefaultMaxResponseBytes-len(underBody)))
	tests := []struct {
		name   string
		stream bool
		body   []byte
		ok     bool
	}{
		{"body under the default", false, underBody, true},
		{"body over the default", false, openaiReplyBound.Body(strings.Repeat("H", over)), false},
		{"stream under the default", true, openaiReplyBound.Stream(deltas(openai.DefaultMaxResponseBytes)), true},
		{"stream over the default", true, openaiReplyBound.Stream(deltas(over)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ok && testing.Short() {
				t.Skip("a 16 MiB reply: slow under -short")
			}
			ct := "application/json"
			if tt.stream {
				ct = "text/event-stream"
			}
			p, _ := serve(t, replay{status: 200, contentType: ct, body: string(tt.body)})
			_, err := llm.Complete(t.Context(), p, &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Stream: tt.stream})
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, llm.ErrResponseTooLarge)) {
				t.Fatalf("err %v, want success %v", err, tt.ok)
			}
		})
	}
	if _, err := openai.New(openai.Config{Model: "m", MaxResponseBytes: -1}); !errors.Is(err, openai.ErrInvalidConfig) {
		t.Errorf("a negative MaxResponseBytes: %v, want ErrInvalidConfig", err)
	}
}
