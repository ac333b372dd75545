// Package jsonstr writes JSON strings byte for byte as encoding/json
// does, without reflection: for the encoders on hot paths (wire
// mappings, run events).
package jsonstr

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/jsonvalid"
)

const hexDigits = "0123456789abcdef"

// Append appends s to dst as a JSON string exactly as encoding/json
// encodes it: HTML-sensitive characters, control characters, U+2028 and
// U+2029 are escaped and invalid UTF-8 is replaced by U+FFFD.
func Append(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendStrings appends ss as a JSON array of strings, each as Append
// writes it (json.Marshal's bytes for a []string that is not nil).
func AppendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = Append(dst, s)
	}
	return append(dst, ']')
}

// AppendRaw appends the JSON text raw as json.Marshal encodes a
// json.RawMessage: compact and HTML-escaped (AppendCompact), or null
// when raw is empty. It reports false, appending nothing, when raw is
// not valid JSON.
func AppendRaw(dst, raw []byte) ([]byte, bool) {
	if len(raw) == 0 {
		return append(dst, "null"...), true
	}
	if !jsonvalid.Valid(raw) {
		return dst, false
	}
	return AppendCompact(dst, raw), true
}

// AppendCompact appends the valid JSON text src with insignificant white
// space removed and <, >, &, U+2028 and U+2029 escaped, as encoding/json
// compacts the output of a Marshaler. Those characters can occur only
// inside strings in valid JSON, so they are escaped wherever they appear.
func AppendCompact(dst, src []byte) []byte {
	inString, escaped := false, false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			i += 2
			start = i + 1
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// Array is the JSON array of items (each a JSON value), in one
// allocation.
func Array(items []json.RawMessage) json.RawMessage {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
