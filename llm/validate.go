package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/jsonvalid"
)

// Validate checks the rules of llm-provider §3 and §3.1 that concern one
// message on its own:
//
//   - system: content is a non-empty string; no tool calls or tool call ID.
//   - user: content is a non-empty string or a non-empty sequence of text
//     and image blocks; no tool calls or tool call ID.
//   - assistant: content is a non-empty string or a non-empty sequence of
//     text, thinking and redacted-thinking blocks, unless the message has
//     tool calls, when it may be empty; no tool call ID. Each tool call
//     has a non-empty ID, unique within the message, a non-empty name,
//     and arguments that are a JSON object or null.
//   - tool: content is a string (possibly empty); the tool call ID is set;
//     no tool calls.
//   - blocks: text and thinking blocks have non-empty text,
//     redacted-thinking blocks non-empty data; an image block has exactly
//     one source (a non-empty URL or non-empty inline data), an inline
//     image has a supported media type ([SupportedImageMediaType]), and
//     the detail hint is "", auto, low or high.
//
// It returns nil or a *[ValidationError] for the first broken rule, with
// Index -1 and Field relative to the message ("content[0].text"). It does
// not allocate when the message is valid. Rules over the whole list (a
// tool message answering an earlier tool call, where a system message may
// stand) are [ValidateMessages]'.
func (m Message) Validate() error {
	return orNil(m.validate())
}

func (m *Message) validate() *ValidationError {
	switch m.Role {
	case RoleSystem:
		if !m.Content.IsText() {
			return invalid("content", "system content must be a string")
		}
		if m.Content.text == "" {
			return invalid("content", "system content must not be empty")
		}
	case RoleUser:
		if err := m.validateContent("user"); err != nil {
			return err
		}
	case RoleAssistant:
		if len(m.ToolCalls) == 0 || !m.Content.IsEmpty() {
			if err := m.validateContent("assistant"); err != nil {
				if len(m.ToolCalls) == 0 && m.Content.IsEmpty() {
					err.Reason = "assistant message needs content or tool calls"
				}
				return err
			}
		}
		if err := validateToolCalls(m.ToolCalls); err != nil {
			return err
		}
	case RoleTool:
		if !m.Content.IsText() {
			return invalid("content", "tool content must be a string")
		}
		if m.ToolCallID == "" {
			return invalid("tool_call_id", "tool message needs a tool_call_id")
		}
		if !utf8.ValidString(m.ToolCallID) {
			return invalid("tool_call_id", "tool_call_id must be valid UTF-8")
		}
	case "":
		return invalid("role", "missing role")
	default:
		return invalid("role", "unknown role "+strconv.Quote(string(m.Role)))
	}
	if m.Role != RoleAssistant && len(m.ToolCalls) > 0 {
		return invalid("tool_calls", "only assistant messages may carry tool calls")
	}
	if m.Role != RoleTool && m.ToolCallID != "" {
		return invalid("tool_call_id", "only tool messages may carry a tool_call_id")
	}
	return nil
}

// validateContent checks user or assistant content: a non-empty string or
// a non-empty sequence of blocks the role allows.
func (m *Message) validateContent(role string) *ValidationError {
	switch m.Content.kind {
	case contentNone:
		return invalid("content", role+" message needs content")
	case contentText:
		if m.Content.text == "" {
			return invalid("content", role+" content must not be empty")
		}
		return nil
	}
	if len(m.Content.blocks) == 0 {
		return invalid("content", "content block sequence must not be empty")
	}
	for i := range m.Content.blocks {
		if err := m.Content.blocks[i].validate(m.Role); err != nil {
			return err.under("content", i)
		}
	}
	return nil
}

// validate checks one block of a message of the given role.
func (b *Block) validate(role Role) *ValidationError {
	switch b.Type {
	case BlockText:
		if b.Text == "" {
			return invalid("text", "text block must not be empty")
		}
	case BlockImage:
		if role != RoleUser {
			return invalid("type", "image blocks are allowed only in user messages")
		}
		return b.validateImage()
	case BlockThinking:
		if role != RoleAssistant {
			return invalid("type", "thinking blocks are allowed only in assistant messages")
		}
		if b.Text == "" {
			return invalid("text", "thinking block must not be empty")
		}
	case BlockRedactedThinking:
		if role != RoleAssistant {
			return invalid("type", "redacted_thinking blocks are allowed only in assistant messages")
		}
		if b.Data == "" {
			return invalid("data", "redacted_thinking block needs data")
		}
	case "":
		return invalid("type", "missing block type")
	default:
		return invalid("type", "unknown block type "+strconv.Quote(string(b.Type)))
	}
	return nil
}

func (b *Block) validateImage() *ValidationError {
	s := &b.Source
	switch s.Type {
	case SourceURL:
		if s.Base64Data != "" {
			return invalid("source", "image source has both a url and inline data")
		}
		if s.URL == "" {
			return invalid("source.url", "url image source needs a url")
		}
	case SourceInline:
		if s.URL != "" {
			return invalid("source", "image source has both a url and inline data")
		}
		if s.Base64Data == "" {
			return invalid("source.base64_data", "inline image source needs base64_data")
		}
		if b.MediaType == "" {
			return invalid("media_type", "inline image needs a media_type")
		}
		if !SupportedImageMediaType(b.MediaType) {
			return invalid("media_type", "unsupported image media type "+strconv.Quote(b.MediaType)+
				" (want image/png, image/jpeg, image/webp or image/gif)")
		}
	case "":
		if s.IsZero() {
			return invalid("source", "image block needs a source")
		}
		return invalid("source.type", "missing image source type")
	default:
		return invalid("source.type", "unknown image source type "+strconv.Quote(string(s.Type)))
	}
	if !b.Detail.Valid() {
		return invalid("detail", "invalid image detail "+strconv.Quote(string(b.Detail))+" (want auto, low or high)")
	}
	return nil
}

// validateToolCalls checks an assistant message's tool calls.
func validateToolCalls(calls []ToolCall) *ValidationError {
	for i := range calls {
		tc := &calls[i]
		if tc.ID == "" {
			return invalid("id", "tool call needs an id").under("tool_calls", i)
		}
		if !utf8.ValidString(tc.ID) {
			// Stored as JSON, an id's invalid bytes all become U+FFFD:
			// two ids would become one.
			return invalid("id", "tool call id must be valid UTF-8").under("tool_calls", i)
		}
		for j := range i {
			if calls[j].ID == tc.ID {
				return invalid("id", "duplicate tool call id "+strconv.Quote(tc.ID)+" in the message").under("tool_calls", i)
			}
		}
		if tc.Name == "" {
			return invalid("name", "tool call needs a name").under("tool_calls", i)
		}
		if !utf8.ValidString(tc.Name) {
			return invalid("name", "tool call name must be valid UTF-8").under("tool_calls", i)
		}
		if !objectOrNull(tc.Arguments) {
			return invalid("arguments", "tool call arguments must be a JSON object or null").under("tool_calls", i)
		}
	}
	return nil
}

// objectOrNull reports whether raw is empty, JSON null or a JSON object.
func objectOrNull(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true
	}
	if !jsonvalid.Valid(raw) {
		return false
	}
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return raw[0] == '{' || raw[0] == 'n'
}

// Validate checks a tool definition (llm-provider §4): a non-empty name
// and parameters that are a JSON object schema (a JSON object whose
// "type", when present, is "object"). It returns nil or a
// *[ValidationError] with Index -1 and Field relative to the tool.
func (t Tool) Validate() error {
	return orNil(t.validate())
}

func (t *Tool) validate() *ValidationError {
	if t.Name == "" {
		return invalid("name", "tool needs a name")
	}
	if len(t.Parameters) == 0 {
		return invalid("parameters", "tool needs a parameters JSON Schema")
	}
	if !jsonvalid.Valid(t.Parameters) {
		return invalid("parameters", "parameters must be a JSON Schema object, not malformed JSON")
	}
	d := decoder{b: t.Parameters}
	var typeErr *ValidationError
	err := d.object("parameters", func(key []byte) *ValidationError {
		if string(key) == "type" && typeErr == nil {
			if v := d.raw(); string(v) != `"object"` {
				typeErr = invalid("parameters.type", `parameters must be an object schema (type "object")`)
			}
			return nil
		}
		d.skip()
		return nil
	})
	if err != nil {
		err.Reason = "parameters must be a JSON Schema object"
		return err
	}
	if typeErr != nil {
		return typeErr
	}
	return nil
}

// ValidateMessages checks a complete() request's messages and tools
// (llm-provider §3, §4, §5), before anything reaches a provider:
//
//   - the list is non-empty, and every message passes [Message.Validate];
//   - the first message is system or user, and a system message stands
//     only first;
//   - each tool message's tool_call_id is the ID of a tool call of an
//     earlier assistant message;
//   - the last message is user or tool (the model has something to answer);
//   - every tool passes [Tool.Validate], and tool names are unique.
//
// It returns nil or a *[ValidationError] for the first broken rule, with
// Index set to the offending message's index (-1 for list and tool rules)
// and Field the full path ("messages[2].content[0].source.media_type",
// "tools[1].name"). It does not allocate for a valid, typical request.
func ValidateMessages(msgs []Message, tools []Tool) error {
	return orNil(validateConversation("", msgs, tools))
}

// validateConversation is [ValidateMessages] over the conversation system
// (when non-empty, a leading system message standing before msgs) and
// msgs; indexes are msgs'.
func validateConversation(system string, msgs []Message, tools []Tool) *ValidationError {
	if len(msgs) == 0 {
		return invalid("messages", "the message list must not be empty")
	}
	var idBuf [16]string
	ids := stringSet{small: idBuf[:0]}
	for i := range msgs {
		m := &msgs[i]
		if err := m.validate(); err != nil {
			return err.at(i)
		}
		switch m.Role {
		case RoleSystem:
			if system != "" {
				return invalid("role", "a system message may not follow the request's system prompt").at(i)
			}
			if i > 0 {
				return invalid("role", "a system message may only be the first message").at(i)
			}
		case RoleAssistant:
			if i == 0 && system == "" {
				return invalid("role", "the message list must begin with a system or user message").at(i)
			}
			for j := range m.ToolCalls {
				ids = ids.add(m.ToolCalls[j].ID)
			}
		case RoleTool:
			// A tool result first (no system prompt) answers no call: said
			// so, which names what is wrong (a call left out), rather than
			// that the list must begin otherwise.
			if !ids.has(m.ToolCallID) {
				return invalid("tool_call_id", "tool_call_id "+strconv.Quote(m.ToolCallID)+
					" matches no tool call of an earlier assistant message").at(i)
			}
		}
	}
	if last := msgs[len(msgs)-1].Role; last != RoleUser && last != RoleTool {
		return invalid("role", "the last message must be a user or tool message, not "+string(last)).at(len(msgs) - 1)
	}
	var nameBuf [16]string
	names := stringSet{small: nameBuf[:0]}
	for i := range tools {
		if err := tools[i].validate(); err != nil {
			return err.under("tools", i)
		}
		if names.has(tools[i].Name) {
			return invalid("name", "duplicate tool name "+strconv.Quote(tools[i].Name)).under("tools", i)
		}
		names = names.add(tools[i].Name)
	}
	return nil
}

// at makes e an error about message i of a list: it sets Index and
// prefixes Field with "messages[i]".
func (e *ValidationError) at(i int) *ValidationError {
	e.Index = i
	return e.under("messages", i)
}

// stringSet is a set of strings that stays a slice (linear search, no
// allocation with a stack buffer) while small and becomes a map when large.
type stringSet struct {
	small []string
	large map[string]struct{}
}

const stringSetSmall = 32

// add returns the set with v added. (A value method, so that a stack
// buffer behind small stays on the stack.)
func (s stringSet) add(v string) stringSet {
	if s.large != nil {
		s.large[v] = struct{}{}
		return s
	}
	if len(s.small) < stringSetSmall {
		s.small = append(s.small, v)
		return s
	}
	s.large = make(map[string]struct{}, 2*stringSetSmall)
	for _, x := range s.small {
		s.large[x] = struct{}{}
	}
	s.large[v] = struct{}{}
	return s
}

func (s stringSet) has(v string) bool {
	if s.large != nil {
		_, ok := s.large[v]
		return ok
	}
	for _, x := range s.small {
		if x == v {
			return true
		}
	}
	return false
}
