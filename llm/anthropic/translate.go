package anthropic

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/armature-go/armature/llm"
)

// wireMessage is one entry of a Messages request's messages array.
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func decodeErr(index int, field, reason string, err error) error {
	return &llm.ValidationError{Index: index, Field: field, Reason: reason, Err: err}
}

// DecodeMessages reads the conversation of an Anthropic Messages request
// body (its system and messages members) back into spec messages: the
// receive direction of llm-provider §8.2.1.2. The system text becomes a
// leading system message; in a user message each tool_result entry
// becomes a tool message and each maximal run of other entries one user
// message, in order; an assistant message's tool_use entries become its
// ToolCalls and its text, thinking and redacted_thinking entries its
// content blocks. A conversation this package encoded decodes to an
// equivalent list (message boundaries of externally authored,
// interleaved user messages may differ; content and order do not).
// Failures are *llm.ValidationError (provider_invalid_request).
func DecodeMessages(body []byte) ([]llm.Message, error) {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []wireMessage   `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, decodeErr(-1, "messages", "not a Messages request body", err)
	}
	var out []llm.Message
	if len(req.System) > 0 && string(req.System) != "null" {
		s, err := textOf(req.System)
		if err != nil {
			return nil, decodeErr(-1, "system", "must be a string or an array of text blocks", err)
		}
		out = append(out, llm.SystemText(s))
	}
	for i, m := range req.Messages {
		var err error
		switch m.Role {
		case "user":
			out, err = decodeUser(out, i, m.Content)
		case "assistant":
			out, err = decodeAssistant(out, i, m.Content)
		default:
			err = decodeErr(i, "messages["+strconv.Itoa(i)+"].role", "unknown role "+strconv.Quote(m.Role), nil)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// textOf reads a string, or the concatenated text of an array of text
// blocks.
func textOf(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []wireBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, b := range blocks {
		if b.Type == "text" {
			sb.WriteString(b.Text)
		}
	}
	return sb.String(), nil
}

// contentOf reads a content member: a string or an array of entries.
func contentOf(raw json.RawMessage) (text string, blocks []wireBlock, isText bool, err error) {
	if json.Unmarshal(raw, &text) == nil {
		return text, nil, true, nil
	}
	err = json.Unmarshal(raw, &blocks)
	return "", blocks, false, err
}

func decodeUser(out []llm.Message, i int, raw json.RawMessage) ([]llm.Message, error) {
	path := "messages[" + strconv.Itoa(i) + "].content"
	text, entries, isText, err := contentOf(raw)
	if err != nil {
		return nil, decodeErr(i, path, "must be a string or an array of content blocks", err)
	}
	if isText {
		return append(out, llm.UserText(text)), nil
	}
	var run []llm.Block
	flush := func() {
		if len(run) > 0 {
			out = append(out, llm.UserBlocks(run...))
			run = nil
		}
	}
	for j, b := range entries {
		at := path + "[" + strconv.Itoa(j) + "]"
		switch b.Type {
		case "tool_result":
			flush()
			result := ""
			if len(b.Content) > 0 && string(b.Content) != "null" {
				if result, err = textOf(b.Content); err != nil {
					return nil, decodeErr(i, at+".content", "must be a string or an array of text blocks", err)
				}
			}
			out = append(out, llm.ToolResult(b.ToolUseID, result))
		case "text":
			run = append(run, llm.TextBlock(b.Text))
		case "image":
			if b.Source == nil {
				return nil, decodeErr(i, at+".source", "image without a source", nil)
			}
			switch b.Source.Type {
			case "base64":
				run = append(run, llm.ImageInline(b.Source.MediaType, b.Source.Data))
			case "url":
				run = append(run, llm.ImageURL(b.Source.URL))
			default:
				return nil, decodeErr(i, at+".source.type", "unsupported image source "+strconv.Quote(b.Source.Type), nil)
			}
		default:
			return nil, decodeErr(i, at+".type", "unsupported user content block "+strconv.Quote(b.Type), nil)
		}
	}
	flush()
	return out, nil
}

func decodeAssistant(out []llm.Message, i int, raw json.RawMessage) ([]llm.Message, error) {
	path := "messages[" + strconv.Itoa(i) + "].content"
	text, entries, isText, err := contentOf(raw)
	if err != nil {
		return nil, decodeErr(i, path, "must be a string or an array of content blocks", err)
	}
	if isText {
		return append(out, llm.AssistantText(text)), nil
	}
	m := llm.Message{Role: llm.RoleAssistant}
	var blocks []llm.Block
	for j, b := range entries {
		at := path + "[" + strconv.Itoa(j) + "]"
		switch b.Type {
		case "text":
			blocks = append(blocks, llm.TextBlock(b.Text))
		case "thinking":
			blocks = append(blocks, llm.ThinkingBlock(b.Thinking, b.Signature))
		case "redacted_thinking":
			blocks = append(blocks, llm.RedactedThinkingBlock(b.Data))
		case "tool_use":
			args, err := llm.CanonicalJSON(b.Input)
			if err != nil || len(args) == 0 || args[0] != '{' {
				return nil, decodeErr(i, at+".input", "tool_use input must be a JSON object", err)
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		default:
			return nil, decodeErr(i, at+".type", "unsupported assistant content block "+strconv.Quote(b.Type), nil)
		}
	}
	if len(blocks) > 0 {
		m.Content = llm.Blocks(blocks...)
	}
	return append(out, m), nil
}
