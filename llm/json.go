package llm

import (
	"strconv"

	"github.com/armature-go/armature/internal/jsonstr"
)

// This file holds the hand-written JSON encoders. Every encoder appends to
// a byte slice and produces exactly what encoding/json would produce for
// the same output (strings are escaped as json.Marshal escapes them,
// including its HTML escaping; raw JSON is compacted and HTML-escaped as
// json.Marshal does for a json.RawMessage), so m.MarshalJSON() and
// json.Marshal(m) agree byte for byte. That output is the canonical form:
// decoding it and encoding again yields the same bytes.

// MarshalJSON encodes the message in the spec's wire shape. It fails on
// an unknown role, block type or image source type, and on tool-call
// arguments that are not valid JSON, so that whatever it produces decodes.
func (m Message) MarshalJSON() ([]byte, error) {
	return encoded(m.appendJSON(make([]byte, 0, m.sizeHint())))
}

// AppendJSON appends the message's encoding, the bytes MarshalJSON
// returns, to dst and returns the extended buffer; it fails as
// MarshalJSON does, returning dst unchanged. Encoders that write many
// messages (a conversation's items) use it to skip encoding/json's
// reflection and its re-validation of a marshaler's output.
func (m Message) AppendJSON(dst []byte) ([]byte, error) {
	out, err := m.appendJSON(dst)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// AppendMessagesJSON appends ms as json.Marshal encodes a []Message (nil
// as null) to dst and returns the extended buffer; it fails as
// MarshalJSON does, returning dst unchanged.
func AppendMessagesJSON(dst []byte, ms []Message) ([]byte, error) {
	if ms == nil {
		return append(dst, "null"...), nil
	}
	out := append(dst, '[')
	for i := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		var err *ValidationError
		if out, err = ms[i].appendJSON(out); err != nil {
			return dst, err
		}
	}
	return append(out, ']'), nil
}

// sizeHint estimates the encoded size of m, to size the output buffer once.
func (m Message) sizeHint() int {
	n := 64 + len(m.Content.text) + len(m.ToolCallID)
	for i := range m.Content.blocks {
		b := &m.Content.blocks[i]
		n += 48 + len(b.Text) + len(b.Signature) + len(b.Source.URL) + len(b.Source.Base64Data) + len(b.Data)
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		n += 48 + len(tc.ID) + len(tc.Name) + len(tc.Arguments) + len(tc.Signature)
	}
	return n
}

func (m Message) appendJSON(dst []byte) ([]byte, *ValidationError) {
	if !m.Role.Valid() {
		return nil, invalid("role", "unknown role "+strconv.Quote(string(m.Role)))
	}
	dst = append(dst, `{"role":"`...)
	dst = append(dst, m.Role...)
	dst = append(dst, '"')
	if !m.Content.IsZero() {
		dst = append(dst, `,"content":`...)
		var err *ValidationError
		if dst, err = m.Content.appendJSON(dst); err != nil {
			return nil, err
		}
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err *ValidationError
			if dst, err = m.ToolCalls[i].appendJSON(dst); err != nil {
				return nil, err.under("tool_calls", i)
			}
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = appendString(dst, m.ToolCallID)
	}
	return append(dst, '}'), nil
}

// MarshalJSON encodes the content: null when absent, a JSON string, or an
// array of blocks.
func (c Content) MarshalJSON() ([]byte, error) {
	return encoded(c.appendJSON(nil))
}

func (c Content) appendJSON(dst []byte) ([]byte, *ValidationError) {
	switch c.kind {
	case contentText:
		return appendString(dst, c.text), nil
	case contentBlocks:
		dst = append(dst, '[')
		for i := range c.blocks {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err *ValidationError
			if dst, err = c.blocks[i].appendJSON(dst); err != nil {
				return nil, err.under("content", i)
			}
		}
		return append(dst, ']'), nil
	}
	return append(dst, "null"...), nil
}

// MarshalJSON encodes the block with its "type" discriminator and the
// fields of its type only.
func (b Block) MarshalJSON() ([]byte, error) {
	return encoded(b.appendJSON(nil))
}

func (b *Block) appendJSON(dst []byte) ([]byte, *ValidationError) {
	switch b.Type {
	case BlockText, BlockThinking:
		dst = append(dst, `{"type":"`...)
		dst = append(dst, b.Type...)
		dst = append(dst, `","text":`...)
		dst = appendString(dst, b.Text)
		if b.Signature != "" {
			dst = append(dst, `,"signature":`...)
			dst = appendString(dst, b.Signature)
		}
	case BlockImage:
		dst = append(dst, `{"type":"image"`...)
		if !b.Source.IsZero() {
			var err *ValidationError
			if dst, err = b.Source.appendJSON(append(dst, `,"source":`...)); err != nil {
				return nil, err
			}
		}
		if b.MediaType != "" {
			dst = append(dst, `,"media_type":`...)
			dst = appendString(dst, b.MediaType)
		}
		if b.Detail != "" {
			dst = append(dst, `,"detail":`...)
			dst = appendString(dst, string(b.Detail))
		}
	case BlockRedactedThinking:
		dst = append(dst, `{"type":"redacted_thinking","data":`...)
		dst = appendString(dst, b.Data)
	default:
		return nil, invalid("type", "unknown block type "+strconv.Quote(string(b.Type)))
	}
	return append(dst, '}'), nil
}

func (s *ImageSource) appendJSON(dst []byte) ([]byte, *ValidationError) {
	if s.Type == SourceInlineRedacted {
		dst = append(dst, `{"byte_count":`...)
		dst = strconv.AppendInt(dst, int64(s.ByteCount), 10)
		return append(dst, `,"type":"inline_redacted"}`...), nil
	}
	if s.Type != SourceURL && s.Type != SourceInline {
		return nil, invalid("source.type", "unknown image source type "+strconv.Quote(string(s.Type)))
	}
	dst = append(dst, `{"type":"`...)
	dst = append(dst, s.Type...)
	dst = append(dst, '"')
	if s.Type == SourceURL || s.URL != "" {
		dst = append(dst, `,"url":`...)
		dst = appendString(dst, s.URL)
	}
	if s.Type == SourceInline || s.Base64Data != "" {
		dst = append(dst, `,"base64_data":`...)
		dst = appendString(dst, s.Base64Data)
	}
	return append(dst, '}'), nil
}

// MarshalJSON encodes the tool call as {"id","name","arguments"} plus
// "signature" when set; nil arguments encode as null.
func (tc ToolCall) MarshalJSON() ([]byte, error) {
	return encoded(tc.appendJSON(nil))
}

func (tc *ToolCall) appendJSON(dst []byte) ([]byte, *ValidationError) {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, tc.ID)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, tc.Name)
	dst = append(dst, `,"arguments":`...)
	var ok bool
	if dst, ok = appendRawJSON(dst, tc.Arguments); !ok {
		return nil, invalid("arguments", "not valid JSON")
	}
	if tc.Signature != "" {
		dst = append(dst, `,"signature":`...)
		dst = appendString(dst, tc.Signature)
	}
	return append(dst, '}'), nil
}

// MarshalJSON encodes the tool definition as {"name","description",
// "parameters"}; nil parameters encode as null.
func (t Tool) MarshalJSON() ([]byte, error) {
	dst := append(make([]byte, 0, 48+len(t.Name)+len(t.Description)+len(t.Parameters)), `{"name":`...)
	dst = appendString(dst, t.Name)
	dst = append(dst, `,"description":`...)
	dst = appendString(dst, t.Description)
	dst = append(dst, `,"parameters":`...)
	var ok bool
	if dst, ok = appendRawJSON(dst, t.Parameters); !ok {
		return nil, invalid("parameters", "not valid JSON")
	}
	return append(dst, '}'), nil
}

// appendRawJSON appends raw in canonical form (compact, HTML-escaped, as
// json.Marshal encodes a json.RawMessage), or null when raw is empty. It
// reports false when raw is not valid JSON.
func appendRawJSON(dst, raw []byte) ([]byte, bool) { return jsonstr.AppendRaw(dst, raw) }

// encoded converts an encoder's result for a MarshalJSON method, keeping a
// nil *ValidationError from becoming a non-nil error.
func encoded(b []byte, err *ValidationError) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}

// AppendJSONString appends s to dst as a JSON string, escaped exactly as
// encoding/json escapes it. Wire mappings use it to write request bodies
// by hand (§8 wire-byte stability).
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendString appends s as a JSON string exactly as encoding/json encodes
// it (jsonstr.Append).
func appendString(dst []byte, s string) []byte { return jsonstr.Append(dst, s) }
