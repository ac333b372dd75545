package llm_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/armature-go/armature/llm"
)

// This file is a reference decoder for differential fuzzing: it implements
// the decoding rules documented in decode.go on top of encoding/json
// (json.Decoder tokens for ordered object members, json.Unmarshal for
// strings, json.Marshal of a json.RawMessage for canonical raw values), in
// the simplest way, ignoring speed. It reports errors as (field, reason)
// only far enough to compare fields.

type member struct {
	key string
	val json.RawMessage
}

// members returns the members of the JSON object raw in order, or false
// when raw is not an object.
func members(raw []byte) ([]member, bool) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{tok.(string), v})
	}
	return out, true
}

type oracleErr struct{ field string }

func (e *oracleErr) Error() string { return "oracle: " + e.field }

func oerr(field string) *oracleErr { return &oracleErr{field} }

func under(err *oracleErr, name string, i int) *oracleErr {
	prefix := name + "[" + strconv.Itoa(i) + "]"
	if err.field == "" {
		err.field = prefix
	} else {
		err.field = prefix + "." + err.field
	}
	return err
}

func first(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func ostring(raw json.RawMessage, field string, dst *string) *oracleErr {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		return oerr(field)
	}
	*dst = ""
	if s != nil {
		*dst = *s
	}
	return nil
}

// repeated records key in seen when it is one of known, and reports
// whether it was already there.
func repeated(seen map[string]bool, key string, known ...string) bool {
	if !slices.Contains(known, key) {
		return false
	}
	dup := seen[key]
	seen[key] = true
	return dup
}

func canonical(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	out, err := json.Marshal(raw)
	if err != nil {
		panic(err)
	}
	return out
}

// oracleMessage decodes data as Message.UnmarshalJSON is documented to.
func oracleMessage(data []byte) (llm.Message, *oracleErr) {
	var m llm.Message
	if !json.Valid(data) {
		return m, oerr("")
	}
	if first(data) == 'n' {
		return m, nil
	}
	ms, ok := members(data)
	if !ok {
		return m, oerr("")
	}
	seen := map[string]bool{}
	var role string
	for _, mb := range ms {
		if repeated(seen, mb.key, "role", "content", "tool_calls", "tool_call_id") {
			return m, oerr(mb.key)
		}
		var err *oracleErr
		switch mb.key {
		case "role":
			err = ostring(mb.val, "role", &role)
		case "content":
			m.Content, err = oracleContent(mb.val)
		case "tool_calls":
			m.ToolCalls, err = oracleToolCalls(mb.val)
		case "tool_call_id":
			err = ostring(mb.val, "tool_call_id", &m.ToolCallID)
		}
		if err != nil {
			return m, err
		}
	}
	m.Role = llm.Role(role)
	if !m.Role.Valid() {
		return m, oerr("role")
	}
	return m, nil
}

func oracleContent(raw json.RawMessage) (llm.Content, *oracleErr) {
	switch first(raw) {
	case 'n':
		return llm.Content{}, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			panic(err)
		}
		return llm.Text(s), nil
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			panic(err)
		}
		blocks := make([]llm.Block, len(elems))
		for i, e := range elems {
			var err *oracleErr
			if blocks[i], err = oracleBlock(e); err != nil {
				return llm.Content{}, under(err, "content", i)
			}
		}
		return llm.Blocks(blocks...), nil
	}
	return llm.Content{}, oerr("content")
}

func oracleBlock(raw json.RawMessage) (llm.Block, *oracleErr) {
	ms, ok := members(raw)
	if !ok {
		return llm.Block{}, oerr("")
	}
	seen := map[string]bool{}
	var typ, text, sig, mediaType, detail, data, srcType string
	var src llm.ImageSource
	hasSource := false
	for _, mb := range ms {
		if repeated(seen, mb.key, "type", "text", "signature", "media_type", "detail", "data", "source") {
			return llm.Block{}, oerr(mb.key)
		}
		var err *oracleErr
		switch mb.key {
		case "type":
			err = ostring(mb.val, "type", &typ)
		case "text":
			err = ostring(mb.val, "text", &text)
		case "signature":
			err = ostring(mb.val, "signature", &sig)
		case "media_type":
			err = ostring(mb.val, "media_type", &mediaType)
		case "detail":
			err = ostring(mb.val, "detail", &detail)
		case "data":
			err = ostring(mb.val, "data", &data)
		case "source":
			src, srcType, hasSource = llm.ImageSource{}, "", false
			if first(mb.val) == 'n' {
				break
			}
			hasSource = true
			sms, ok := members(mb.val)
			if !ok {
				return llm.Block{}, oerr("source")
			}
			sseen := map[string]bool{}
			for _, smb := range sms {
				if repeated(sseen, smb.key, "type", "url", "base64_data") {
					return llm.Block{}, oerr("source." + smb.key)
				}
				switch smb.key {
				case "type":
					err = ostring(smb.val, "source.type", &srcType)
				case "url":
					err = ostring(smb.val, "source.url", &src.URL)
				case "base64_data":
					err = ostring(smb.val, "source.base64_data", &src.Base64Data)
				}
				if err != nil {
					return llm.Block{}, err
				}
			}
		}
		if err != nil {
			return llm.Block{}, err
		}
	}
	switch t := llm.BlockType(typ); t {
	case llm.BlockText, llm.BlockThinking:
		return llm.Block{Type: t, Text: text, Signature: sig}, nil
	case llm.BlockImage:
		b := llm.Block{Type: t, MediaType: mediaType, Detail: llm.Detail(detail)}
		if hasSource {
			st := llm.SourceType(srcType)
			if st != llm.SourceURL && st != llm.SourceInline {
				return llm.Block{}, oerr("source.type")
			}
			src.Type = st
			b.Source = src
		}
		return b, nil
	case llm.BlockRedactedThinking:
		return llm.Block{Type: t, Data: data}, nil
	}
	return llm.Block{}, oerr("type")
}

func oracleToolCalls(raw json.RawMessage) ([]llm.ToolCall, *oracleErr) {
	switch first(raw) {
	case 'n':
		return nil, nil
	case '[':
	default:
		return nil, oerr("tool_calls")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		panic(err)
	}
	if len(elems) == 0 {
		return nil, nil
	}
	calls := make([]llm.ToolCall, len(elems))
	for i, e := range elems {
		ms, ok := members(e)
		if !ok {
			return nil, under(oerr(""), "tool_calls", i)
		}
		seen := map[string]bool{}
		for _, mb := range ms {
			if repeated(seen, mb.key, "id", "name", "signature", "arguments") {
				return nil, under(oerr(mb.key), "tool_calls", i)
			}
			var err *oracleErr
			switch mb.key {
			case "id":
				err = ostring(mb.val, "id", &calls[i].ID)
			case "name":
				err = ostring(mb.val, "name", &calls[i].Name)
			case "signature":
				err = ostring(mb.val, "signature", &calls[i].Signature)
			case "arguments":
				calls[i].Arguments = canonical(mb.val)
			}
			if err != nil {
				return nil, under(err, "tool_calls", i)
			}
		}
	}
	return calls, nil
}
