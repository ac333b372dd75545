package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Decoding is strict about discriminators and lenient about values: an
// unknown or missing role, block type or image source type, or a JSON
// value of the wrong kind, is an error (a *ValidationError, so
// errors.Is(err, ErrInvalidMessage) holds), while values that are
// representable but break a rule (an empty text, an unknown detail hint,
// arguments that are not an object) decode and are left to
// [Message.Validate]. Unknown object keys are ignored.

type messageWire struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []json.RawMessage `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
}

// UnmarshalJSON decodes a message in the spec's wire shape.
func (m *Message) UnmarshalJSON(data []byte) error {
	var w messageWire
	if err := json.Unmarshal(data, &w); err != nil {
		return decodeError("", err)
	}
	out := Message{Role: Role(w.Role), ToolCallID: w.ToolCallID}
	if !out.Role.Valid() {
		if w.Role == "" {
			return invalid("role", "missing role")
		}
		return invalid("role", "unknown role "+strconv.Quote(w.Role))
	}
	if err := out.Content.decode(w.Content); err != nil {
		return err
	}
	if len(w.ToolCalls) > 0 {
		out.ToolCalls = make([]ToolCall, len(w.ToolCalls))
		for i, raw := range w.ToolCalls {
			if err := out.ToolCalls[i].decode(raw); err != nil {
				return err.under("tool_calls", i)
			}
		}
	}
	*m = out
	return nil
}

// UnmarshalJSON decodes content: null, a JSON string or an array of blocks.
func (c *Content) UnmarshalJSON(data []byte) error {
	var out Content
	if err := out.decode(data); err != nil {
		return err
	}
	*c = out
	return nil
}

func (c *Content) decode(data json.RawMessage) *ValidationError {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) == 0 || data[0] == 'n' {
		if len(data) > 0 && !bytes.Equal(bytes.TrimRight(data, " \t\r\n"), []byte("null")) {
			return invalid("content", "must be a string, an array of content blocks or null")
		}
		*c = Content{}
		return nil
	}
	switch data[0] {
	case '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return decodeError("content", err)
		}
		*c = Text(s)
		return nil
	case '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return decodeError("content", err)
		}
		blocks := make([]Block, len(raws))
		for i, raw := range raws {
			if err := blocks[i].decode(raw); err != nil {
				return err.under("content", i)
			}
		}
		*c = Blocks(blocks...)
		return nil
	}
	return invalid("content", "must be a string, an array of content blocks or null")
}

type blockWire struct {
	Type      string      `json:"type"`
	Text      string      `json:"text"`
	Signature string      `json:"signature"`
	Source    *sourceWire `json:"source"`
	MediaType string      `json:"media_type"`
	Detail    string      `json:"detail"`
	Data      string      `json:"data"`
}

type sourceWire struct {
	Type       string `json:"type"`
	URL        string `json:"url"`
	Base64Data string `json:"base64_data"`
}

// UnmarshalJSON decodes a content block; its "type" must be one of the
// four block types.
func (b *Block) UnmarshalJSON(data []byte) error {
	var out Block
	if err := out.decode(data); err != nil {
		return err
	}
	*b = out
	return nil
}

func (b *Block) decode(data []byte) *ValidationError {
	var w blockWire
	if err := json.Unmarshal(data, &w); err != nil {
		return decodeError("", err)
	}
	switch t := BlockType(w.Type); t {
	case BlockText, BlockThinking:
		*b = Block{Type: t, Text: w.Text, Signature: w.Signature}
	case BlockImage:
		*b = Block{Type: t, MediaType: w.MediaType, Detail: Detail(w.Detail)}
		if w.Source != nil {
			switch st := SourceType(w.Source.Type); st {
			case SourceURL, SourceInline:
				b.Source = ImageSource{Type: st, URL: w.Source.URL, Base64Data: w.Source.Base64Data}
			case "":
				return invalid("source.type", "missing image source type")
			default:
				return invalid("source.type", "unknown image source type "+strconv.Quote(w.Source.Type))
			}
		}
	case BlockRedactedThinking:
		*b = Block{Type: t, Data: w.Data}
	case "":
		return invalid("type", "missing block type")
	default:
		return invalid("type", "unknown block type "+strconv.Quote(w.Type))
	}
	return nil
}

type toolCallWire struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Signature string          `json:"signature"`
}

// UnmarshalJSON decodes a tool call. Arguments are kept as raw JSON in
// canonical form (compact); null arguments decode to nil.
func (tc *ToolCall) UnmarshalJSON(data []byte) error {
	return orNil(tc.decode(data))
}

func (tc *ToolCall) decode(data []byte) *ValidationError {
	var w toolCallWire
	if err := json.Unmarshal(data, &w); err != nil {
		return decodeError("", err)
	}
	*tc = ToolCall{ID: w.ID, Name: w.Name, Arguments: canonicalRaw(w.Arguments), Signature: w.Signature}
	return nil
}

type toolWire struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// UnmarshalJSON decodes a tool definition. Parameters are kept as raw JSON
// in canonical form (compact); null parameters decode to nil.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var w toolWire
	if err := json.Unmarshal(data, &w); err != nil {
		return decodeError("", err)
	}
	*t = Tool{Name: w.Name, Description: w.Description, Parameters: canonicalRaw(w.Parameters)}
	return nil
}

// canonicalRaw returns the valid JSON raw in canonical form, or nil for
// null or no value.
func canonicalRaw(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return appendCompact(make([]byte, 0, len(raw)), raw)
}

func decodeError(field string, err error) *ValidationError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var ve *ValidationError
	switch {
	case asErr(err, &ve):
		return ve
	case asErr(err, &se):
		return &ValidationError{Index: -1, Field: field, Reason: "malformed JSON", Err: err}
	case asErr(err, &te):
		f := te.Field
		if field != "" && f != "" {
			f = field + "." + f
		} else if f == "" {
			f = field
		}
		return &ValidationError{Index: -1, Field: f, Reason: "wrong JSON type", Err: err}
	}
	return &ValidationError{Index: -1, Field: field, Reason: "cannot decode", Err: err}
}
