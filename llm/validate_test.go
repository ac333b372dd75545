package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/llm"
)

var (
	weatherArgs = json.RawMessage(`{"city":"Boston"}`)
	weatherCall = llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: weatherArgs}
	weatherTool = llm.Tool{
		Name:        "get_weather",
		Description: "Get current weather for a city.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
)

func TestMessageValidate(t *testing.T) {
	pngInline := llm.ImageInline(llm.MediaTypePNG, "iVBORw0KGgo=")
	cases := []struct {
		name  string
		msg   llm.Message
		field string // "" when valid
	}{
		// Valid messages.
		{"system text", llm.SystemText("be terse"), ""},
		{"user text", llm.UserText("hi"), ""},
		{"user blocks", llm.UserBlocks(llm.ImageURL("https://example.com/x.png").WithDetail(llm.DetailHigh), llm.TextBlock("describe")), ""},
		{"user inline png", llm.UserBlocks(pngInline), ""},
		{"user inline jpeg", llm.UserBlocks(llm.ImageInline(llm.MediaTypeJPEG, "ABC123==")), ""},
		{"user inline webp", llm.UserBlocks(llm.ImageInline(llm.MediaTypeWebP, "UklGRg==")), ""},
		{"user inline gif", llm.UserBlocks(llm.ImageInline(llm.MediaTypeGIF, "R0lGOD==")), ""},
		{"user data url", llm.UserBlocks(llm.ImageURL("data:image/png;base64,iVBO")), ""},
		{"url image media_type ignored", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: llm.SourceURL, URL: "u"}, MediaType: "text/plain"}), ""},
		{"detail auto and low", llm.UserBlocks(llm.ImageURL("u").WithDetail(llm.DetailAuto), llm.ImageURL("v").WithDetail(llm.DetailLow)), ""},
		{"assistant text", llm.AssistantText("hello"), ""},
		{"assistant tool calls, no content", llm.AssistantToolCalls(weatherCall), ""},
		{"assistant tool calls, empty string", llm.Message{Role: llm.RoleAssistant, Content: llm.Text(""), ToolCalls: []llm.ToolCall{weatherCall}}, ""},
		{"assistant tool calls, empty blocks", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(), ToolCalls: []llm.ToolCall{weatherCall}}, ""},
		{"assistant tool calls with text", llm.Message{Role: llm.RoleAssistant, Content: llm.Text("checking"), ToolCalls: []llm.ToolCall{weatherCall}}, ""},
		{"assistant null arguments", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n"}), ""},
		{"assistant arguments with space", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(" {\"a\": 1} ")}), ""},
		{"assistant thinking", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ThinkingBlock("hmm", "sig"), llm.RedactedThinkingBlock("xx"), llm.TextBlock("42"))}, ""},
		{"assistant thinking with tool calls", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ThinkingBlock("hmm", "")), ToolCalls: []llm.ToolCall{weatherCall}}, ""},
		{"tool result", llm.ToolResult("call_1", "72F"), ""},
		{"empty tool result", llm.ToolResult("call_1", ""), ""},

		// Ids and names are valid UTF-8: stored as JSON, invalid bytes
		// become U+FFFD, and call_\xff and call_\xfe would be one id.
		{"tool call id not UTF-8", llm.AssistantToolCalls(llm.ToolCall{ID: "call_\xff", Name: "n"}), "tool_calls[0].id"},
		{"tool call name not UTF-8", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n\xfe"}), "tool_calls[0].name"},
		{"tool_call_id not UTF-8", llm.ToolResult("call_\xff", "72F"), "tool_call_id"},

		// Roles.
		{"zero message", llm.Message{}, "role"},
		{"unknown role", llm.Message{Role: "developer", Content: llm.Text("x")}, "role"},

		// system.
		{"system empty", llm.SystemText(""), "content"},
		{"system absent", llm.Message{Role: llm.RoleSystem}, "content"},
		{"system blocks (017)", llm.Message{Role: llm.RoleSystem, Content: llm.Blocks(llm.TextBlock("you are a helpful assistant"))}, "content"},
		{"system tool calls", llm.Message{Role: llm.RoleSystem, Content: llm.Text("s"), ToolCalls: []llm.ToolCall{weatherCall}}, "tool_calls"},
		{"system tool_call_id", llm.Message{Role: llm.RoleSystem, Content: llm.Text("s"), ToolCallID: "x"}, "tool_call_id"},

		// user.
		{"user empty (003)", llm.UserText(""), "content"},
		{"user absent", llm.Message{Role: llm.RoleUser}, "content"},
		{"user empty sequence (014)", llm.Message{Role: llm.RoleUser, Content: llm.Blocks()}, "content"},
		{"user empty text block (015)", llm.UserBlocks(llm.TextBlock(""), llm.TextBlock("real text")), "content[0].text"},
		{"user image source missing (018)", llm.UserBlocks(llm.Block{Type: llm.BlockImage}, llm.TextBlock("describe")), "content[0].source"},
		{"user invalid detail (019)", llm.UserBlocks(llm.ImageURL("https://example.com/x.png").WithDetail("ultra")), "content[0].detail"},
		{"user inline missing media_type (020)", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: llm.SourceInline, Base64Data: "ABC123=="}}, llm.TextBlock("describe")), "content[0].media_type"},
		{"user inline unsupported media_type", llm.UserBlocks(llm.TextBlock("a"), llm.ImageInline("image/tiff", "SUkq")), "content[1].media_type"},
		{"user inline upper-case media_type", llm.UserBlocks(llm.ImageInline("IMAGE/PNG", "iVBO")), "content[0].media_type"},
		{"user inline non-image media_type", llm.UserBlocks(llm.ImageInline("application/pdf", "JVBE")), "content[0].media_type"},
		{"user url and data", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: llm.SourceURL, URL: "u", Base64Data: "d"}}), "content[0].source"},
		{"user inline and url", llm.UserBlocks(llm.Block{Type: llm.BlockImage, MediaType: llm.MediaTypePNG, Source: llm.ImageSource{Type: llm.SourceInline, URL: "u", Base64Data: "d"}}), "content[0].source"},
		{"user url empty", llm.UserBlocks(llm.ImageURL("")), "content[0].source.url"},
		{"user inline empty", llm.UserBlocks(llm.ImageInline(llm.MediaTypePNG, "")), "content[0].source.base64_data"},
		{"user source without type", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{URL: "u"}}), "content[0].source.type"},
		{"user unknown source type", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: "file", URL: "u"}}), "content[0].source.type"},
		{"user thinking", llm.UserBlocks(llm.ThinkingBlock("hmm", "")), "content[0].type"},
		{"user redacted thinking", llm.UserBlocks(llm.TextBlock("a"), llm.RedactedThinkingBlock("x")), "content[1].type"},
		{"user unknown block", llm.UserBlocks(llm.Block{Type: "audio"}), "content[0].type"},
		{"user missing block type", llm.UserBlocks(llm.Block{Text: "x"}), "content[0].type"},
		{"user tool calls", llm.Message{Role: llm.RoleUser, Content: llm.Text("u"), ToolCalls: []llm.ToolCall{weatherCall}}, "tool_calls"},
		{"user tool_call_id", llm.Message{Role: llm.RoleUser, Content: llm.Text("u"), ToolCallID: "x"}, "tool_call_id"},

		// assistant.
		{"assistant empty (003)", llm.AssistantText(""), "content"},
		{"assistant absent", llm.Message{Role: llm.RoleAssistant}, "content"},
		{"assistant empty sequence", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks()}, "content"},
		{"assistant image", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ImageURL("u"))}, "content[0].type"},
		{"assistant empty thinking", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ThinkingBlock("", "sig"))}, "content[0].text"},
		{"assistant empty redacted", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.RedactedThinkingBlock(""))}, "content[0].data"},
		{"assistant bad block with tool calls", llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.TextBlock("")), ToolCalls: []llm.ToolCall{weatherCall}}, "content[0].text"},
		{"assistant tool_call_id", llm.Message{Role: llm.RoleAssistant, Content: llm.Text("a"), ToolCallID: "x"}, "tool_call_id"},
		{"tool call without id", llm.AssistantToolCalls(llm.ToolCall{Name: "n"}), "tool_calls[0].id"},
		{"tool call duplicate id", llm.AssistantToolCalls(weatherCall, llm.ToolCall{ID: "call_2", Name: "n"}, weatherCall), "tool_calls[2].id"},
		{"tool call without name", llm.AssistantToolCalls(llm.ToolCall{ID: "c"}), "tool_calls[0].name"},
		{"tool call array arguments", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`[1]`)}), "tool_calls[0].arguments"},
		{"tool call string arguments", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`"{\"a\":1}"`)}), "tool_calls[0].arguments"},
		{"tool call malformed arguments", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":`)}), "tool_calls[0].arguments"},

		// tool.
		{"tool absent content", llm.Message{Role: llm.RoleTool, ToolCallID: "call_1"}, "content"},
		{"tool blocks", llm.Message{Role: llm.RoleTool, Content: llm.Blocks(llm.TextBlock("r")), ToolCallID: "call_1"}, "content"},
		{"tool without tool_call_id", llm.Message{Role: llm.RoleTool, Content: llm.Text("r")}, "tool_call_id"},
		{"tool with tool calls", llm.Message{Role: llm.RoleTool, Content: llm.Text("r"), ToolCallID: "call_1", ToolCalls: []llm.ToolCall{weatherCall}}, "tool_calls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.msg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error on %q", tc.field)
			}
			checkValidationError(t, err, -1, tc.field)

			// Through ValidateMessages the same error gets the message
			// index and a full path.
			msgs := []llm.Message{llm.UserText("first"), tc.msg, llm.UserText("last")}
			checkValidationError(t, llm.ValidateMessages(msgs, nil), 1, "messages[1]."+tc.field)
		})
	}
}

func TestValidateMessages(t *testing.T) {
	assistantCall := llm.AssistantToolCalls(weatherCall)
	cases := []struct {
		name  string
		msgs  []llm.Message
		tools []llm.Tool
		index int    // message index of the error
		field string // "" when valid
	}{
		// Valid requests.
		{name: "one user message", msgs: []llm.Message{llm.UserText("Hi")}},
		{name: "system then user", msgs: []llm.Message{llm.SystemText("s"), llm.UserText("Hi")}},
		{name: "system, assistant, user", msgs: []llm.Message{llm.SystemText("s"), llm.AssistantText("Welcome"), llm.UserText("Hi")}},
		{name: "tool round trip", msgs: []llm.Message{
			llm.UserText("What's the weather in Boston?"), assistantCall, llm.ToolResult("call_1", "68F"),
		}, tools: []llm.Tool{weatherTool}},
		{name: "tool round trip, then user", msgs: []llm.Message{
			llm.UserText("q"), assistantCall, llm.ToolResult("call_1", "68F"), llm.AssistantText("It's 68F."), llm.UserText("thanks"),
		}},
		{name: "two parallel tool results", msgs: []llm.Message{
			llm.UserText("q"),
			llm.AssistantToolCalls(weatherCall, llm.ToolCall{ID: "call_2", Name: "get_time", Arguments: json.RawMessage(`{}`)}),
			llm.ToolResult("call_2", "noon"), llm.ToolResult("call_1", "68F"),
		}},
		{name: "tool result answers an older call", msgs: []llm.Message{
			llm.UserText("q"), assistantCall, llm.UserText("still there?"), llm.ToolResult("call_1", "68F"),
		}},
		{name: "tools without description", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{
			{Name: "a", Parameters: json.RawMessage(`{}`)}, {Name: "b", Parameters: json.RawMessage(`{"type":"object"}`)},
		}},
		{name: "many tools and calls (set grows past its small form)", msgs: manyCalls(40), tools: manyTools(40)},

		// 003-message-validation.
		{name: "system_message_in_middle", msgs: []llm.Message{llm.UserText("First user turn"), llm.SystemText("Late system message")}, index: 1, field: "messages[1].role"},
		{name: "tool_message_without_matching_assistant", msgs: []llm.Message{llm.UserText("Run the tool"), llm.ToolResult("nonexistent_id", "result")}, index: 1, field: "messages[1].tool_call_id"},
		{name: "duplicate_tool_names", msgs: []llm.Message{llm.UserText("Hi")}, tools: []llm.Tool{
			{Name: "dup", Description: "First", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
			{Name: "dup", Description: "Second", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		}, index: -1, field: "tools[1].name"},
		{name: "empty_user_content", msgs: []llm.Message{llm.UserText("")}, index: 0, field: "messages[0].content"},
		{name: "assistant_with_neither_content_nor_tool_calls", msgs: []llm.Message{
			llm.UserText("Hi"), llm.AssistantText(""), llm.UserText("Continue?"),
		}, index: 1, field: "messages[1].content"},
		{name: "last_message_assistant", msgs: []llm.Message{llm.UserText("Hi"), llm.AssistantText("Hello!")}, index: 1, field: "messages[1].role"},

		// Other list rules.
		{name: "empty list", msgs: nil, index: -1, field: "messages"},
		{name: "only a system message", msgs: []llm.Message{llm.SystemText("s")}, index: 0, field: "messages[0].role"},
		{name: "two system messages", msgs: []llm.Message{llm.SystemText("a"), llm.SystemText("b"), llm.UserText("u")}, index: 1, field: "messages[1].role"},
		{name: "begins with assistant", msgs: []llm.Message{llm.AssistantText("a"), llm.UserText("u")}, index: 0, field: "messages[0].role"},
		{name: "begins with tool", msgs: []llm.Message{llm.ToolResult("x", "r"), llm.UserText("u")}, index: 0, field: "messages[0].tool_call_id"}, // it answers no call
		{name: "tool result before its call", msgs: []llm.Message{
			llm.UserText("q"), llm.ToolResult("call_1", "68F"), assistantCall, llm.ToolResult("call_1", "68F"),
		}, index: 1, field: "messages[1].tool_call_id"},
		{name: "tool result for a user-carried id", msgs: []llm.Message{
			llm.UserText("call_1"), llm.ToolResult("call_1", "68F"),
		}, index: 1, field: "messages[1].tool_call_id"},
		{name: "unmatched tool result among many", msgs: append(manyCalls(40), llm.ToolResult("nope", "r")), index: 62, field: "messages[62].tool_call_id"},
		{name: "per-message error wins over list rules", msgs: []llm.Message{llm.UserText("a"), llm.UserBlocks(llm.TextBlock("")), llm.AssistantText("x")}, index: 1, field: "messages[1].content[0].text"},

		// Tool definitions.
		{name: "tool without name", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{{Parameters: json.RawMessage(`{}`)}}, index: -1, field: "tools[0].name"},
		{name: "tool without parameters", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{weatherTool, {Name: "x"}}, index: -1, field: "tools[1].parameters"},
		{name: "tool parameters not an object", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{{Name: "x", Parameters: json.RawMessage(`[]`)}}, index: -1, field: "tools[0].parameters"},
		{name: "tool parameters null", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{{Name: "x", Parameters: json.RawMessage(`null`)}}, index: -1, field: "tools[0].parameters"},
		{name: "tool parameters malformed", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{{Name: "x", Parameters: json.RawMessage(`{"type":`)}}, index: -1, field: "tools[0].parameters"},
		{name: "tool parameters not an object schema", msgs: []llm.Message{llm.UserText("q")}, tools: []llm.Tool{{Name: "x", Parameters: json.RawMessage(`{"type":"string"}`)}}, index: -1, field: "tools[0].parameters.type"},
		{name: "duplicate among many tools", msgs: []llm.Message{llm.UserText("q")}, tools: append(manyTools(40), llm.Tool{Name: "tool_7", Parameters: json.RawMessage(`{}`)}), index: -1, field: "tools[40].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.ValidateMessages(tc.msgs, tc.tools)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("ValidateMessages = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateMessages = nil, want an error on %q", tc.field)
			}
			checkValidationError(t, err, tc.index, tc.field)
		})
	}
}

// manyCalls returns a user message, then n/2 assistant messages each with
// two tool calls and their results in reverse order, and a repeated answer
// to the first call: 2 + 3n/2 messages
// ending with a tool message.
func manyCalls(n int) []llm.Message {
	msgs := []llm.Message{llm.UserText("go")}
	for i := 0; i < n; i += 2 {
		a := llm.ToolCall{ID: "call_" + itoa(i), Name: "t", Arguments: json.RawMessage(`{}`)}
		b := llm.ToolCall{ID: "call_" + itoa(i+1), Name: "t", Arguments: json.RawMessage(`{}`)}
		msgs = append(msgs, llm.AssistantToolCalls(a, b), llm.ToolResult(b.ID, "r"), llm.ToolResult(a.ID, "r"))
	}
	// Answer the first call again at the end, after the set has grown.
	return append(msgs, llm.ToolResult("call_0", "again"))
}

func manyTools(n int) []llm.Tool {
	tools := make([]llm.Tool, n)
	for i := range tools {
		tools[i] = llm.Tool{Name: "tool_" + itoa(i), Parameters: json.RawMessage(`{"type":"object"}`)}
	}
	return tools
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestToolValidate(t *testing.T) {
	if err := weatherTool.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	checkValidationError(t, llm.Tool{Name: "x", Parameters: json.RawMessage(`1`)}.Validate(), -1, "parameters")
}
