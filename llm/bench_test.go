package llm_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/llm"
)

// typicalConversation is a short tool-using chat turn: system prompt, user
// question, assistant tool call, tool result, then the request's final
// user message.
func typicalConversation() ([]llm.Message, []llm.Tool) {
	msgs := []llm.Message{
		llm.SystemText("You are a helpful assistant. Answer briefly and use tools when they help."),
		llm.UserText("What's the weather in Boston today, and should I bring an umbrella?"),
		{
			Role:    llm.RoleAssistant,
			Content: llm.Text("Let me check."),
			ToolCalls: []llm.ToolCall{{
				ID: "call_abc123", Name: "get_weather",
				Arguments: json.RawMessage(`{"city":"Boston","units":"fahrenheit"}`),
			}},
		},
		llm.ToolResult("call_abc123", `{"temp_f":68,"conditions":"light rain","precip_prob":0.7}`),
		llm.AssistantText("It's 68°F with light rain (70% chance). Yes, bring an umbrella."),
		llm.UserBlocks(llm.TextBlock("And what about this sky?"), llm.ImageURL("https://example.com/sky.jpg").WithDetail(llm.DetailLow)),
	}
	return msgs, []llm.Tool{weatherTool}
}

func BenchmarkValidate(b *testing.B) {
	msgs, _ := typicalConversation()
	b.ReportAllocs()
	for b.Loop() {
		for i := range msgs {
			if err := msgs[i].Validate(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkValidateMessages(b *testing.B) {
	msgs, tools := typicalConversation()
	b.ReportAllocs()
	for b.Loop() {
		if err := llm.ValidateMessages(msgs, tools); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	for _, bc := range benchMessages() {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.msg.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, bc := range benchMessages() {
		data, err := json.Marshal(bc.msg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var m llm.Message
				if err := m.UnmarshalJSON(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshalConversation decodes a whole conversation through
// encoding/json, as a session store loading history does.
func BenchmarkUnmarshalConversation(b *testing.B) {
	msgs, _ := typicalConversation()
	data, err := json.Marshal(msgs)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var out []llm.Message
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalConversation(b *testing.B) {
	msgs, _ := typicalConversation()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(msgs); err != nil {
			b.Fatal(err)
		}
	}
}

type benchMessage struct {
	name string
	msg  llm.Message
}

func benchMessages() []benchMessage {
	msgs, _ := typicalConversation()
	return []benchMessage{
		{"user_text", msgs[1]},
		{"assistant_tool_call", msgs[2]},
		{"user_blocks", msgs[5]},
	}
}

// BenchmarkRedactImages is what an observed model call pays to redact a
// text conversation's inline images (none): a walk that copies nothing.
func BenchmarkRedactImages(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		msgs := make([]llm.Message, n)
		for i := range msgs {
			msgs[i] = llm.UserText("a message of the conversation")
		}
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if out := llm.RedactImages(msgs); len(out) != n {
					b.Fatal(len(out))
				}
			}
		})
	}
}
