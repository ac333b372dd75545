package llm

// Role is a message kind (llm-provider §3). The Role constants are wire
// identifiers from the OpenArmature specification; they must not change.
type Role string

// The four message roles.
const (
	// RoleSystem carries instructions; its content is a non-empty string,
	// and it may appear only as the first message of a list.
	RoleSystem Role = "system"
	// RoleUser carries the user's turn: a non-empty string or a non-empty
	// sequence of text and image blocks.
	RoleUser Role = "user"
	// RoleAssistant carries the model's turn: text, thinking and
	// redacted-thinking blocks, and/or tool calls.
	RoleAssistant Role = "assistant"
	// RoleTool carries a tool's textual result for the assistant tool call
	// named by [Message.ToolCallID].
	RoleTool Role = "tool"
)

// Valid reports whether r is one of the four spec roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		return true
	}
	return false
}

// Message is one entry of a conversation (llm-provider §3).
//
// The zero value has no role and is not valid. Build messages with
// [SystemText], [UserText], [AssistantText], [ToolResult] or a struct
// literal, and check them with [Message.Validate] or [ValidateMessages].
// Messages are values: treat a Message (and the slices it holds) as
// immutable once shared.
//
// Its JSON form is the spec's wire shape:
//
//	{"role":"assistant","content":"...","tool_calls":[...]}
//	{"role":"tool","content":"72F","tool_call_id":"call_1"}
//	{"role":"user","content":[{"type":"text","text":"hi"}]}
//
// content is omitted when absent, tool_calls when empty and tool_call_id
// when empty.
type Message struct {
	// Role is the message kind.
	Role Role
	// Content is the message text or content-block sequence; its zero
	// value means no content.
	Content Content
	// ToolCalls are the tool calls an assistant message requests, in
	// order. Only assistant messages carry them.
	ToolCalls []ToolCall
	// ToolCallID is, on a tool message, the ID of the assistant tool call
	// this message answers. Only tool messages carry it.
	ToolCallID string
}

// SystemText returns a system message with text content.
func SystemText(s string) Message { return Message{Role: RoleSystem, Content: Text(s)} }

// UserText returns a user message with text content.
func UserText(s string) Message { return Message{Role: RoleUser, Content: Text(s)} }

// UserBlocks returns a user message whose content is the given block
// sequence (text and image blocks). The slice is not copied.
func UserBlocks(blocks ...Block) Message { return Message{Role: RoleUser, Content: Blocks(blocks...)} }

// AssistantText returns an assistant message with text content.
func AssistantText(s string) Message { return Message{Role: RoleAssistant, Content: Text(s)} }

// AssistantToolCalls returns an assistant message with no content that
// requests the given tool calls. The slice is not copied.
func AssistantToolCalls(calls ...ToolCall) Message {
	return Message{Role: RoleAssistant, ToolCalls: calls}
}

// ToolResult returns a tool message carrying result as the answer to the
// assistant tool call whose ID is toolCallID.
func ToolResult(toolCallID, result string) Message {
	return Message{Role: RoleTool, Content: Text(result), ToolCallID: toolCallID}
}

// Text returns the message's text: the content string, or the text of its
// text blocks concatenated in order (thinking, redacted-thinking and image
// blocks contribute nothing). It is "" when the message has no content.
func (m Message) Text() string { return m.Content.Text() }
