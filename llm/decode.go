package llm

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/internal/jsonvalid"
)

// Decoding is strict about discriminators and lenient about values:
//
//   - Input must be valid JSON. Object keys match exactly (no case
//     folding); unknown keys are ignored; a known key that repeats is an
//     error (as in encoding/json/v2), not a silent override.
//   - A message, block, image source, tool call and tool is a JSON object.
//     String fields take a string or null (null means ""). content takes a
//     string, an array of blocks or null (absent); tool_calls an array of
//     tool calls or null. Tool-call arguments and tool parameters take any
//     JSON value, kept as raw JSON in canonical form (null becomes nil).
//   - An unknown or missing role, block type or image source type (on a
//     source that is present) is an error.
//   - Values that are representable but break a rule (an empty text, an
//     unknown detail hint, arguments that are not an object) decode, and
//     are left to [Message.Validate].
//
// Every error is a *ValidationError naming the offending field, so
// errors.Is(err, ErrInvalidMessage) holds. As encoding/json expects of an
// Unmarshaler, UnmarshalJSON of a JSON null leaves the value unchanged.

// UnmarshalJSON decodes a message in the spec's wire shape.
func (m *Message) UnmarshalJSON(data []byte) error {
	var out Message
	d, ok, err := begin(data)
	if ok {
		err = d.message(&out)
	}
	return finish(m, &out, ok, err)
}

// UnmarshalJSON decodes content: a JSON string, an array of blocks or null
// (absent).
func (c *Content) UnmarshalJSON(data []byte) error {
	var out Content
	d, ok, err := begin(data)
	if ok {
		err = d.content(&out)
	}
	return finish(c, &out, ok, err)
}

// UnmarshalJSON decodes a content block; its "type" must be one of the
// four block types.
func (b *Block) UnmarshalJSON(data []byte) error {
	var out Block
	d, ok, err := begin(data)
	if ok {
		err = d.block(&out)
	}
	return finish(b, &out, ok, err)
}

// UnmarshalJSON decodes a tool call. Arguments are kept as raw JSON in
// canonical form (compact); null arguments decode to nil.
func (tc *ToolCall) UnmarshalJSON(data []byte) error {
	var out ToolCall
	d, ok, err := begin(data)
	if ok {
		err = d.toolCall(&out)
	}
	return finish(tc, &out, ok, err)
}

// UnmarshalJSON decodes a tool definition. Parameters are kept as raw JSON
// in canonical form (compact); null parameters decode to nil.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var out Tool
	d, ok, err := begin(data)
	if ok {
		err = d.tool(&out)
	}
	return finish(t, &out, ok, err)
}

// DecodeMessages decodes a JSON array of messages (null decodes to nil),
// each as [Message.UnmarshalJSON] decodes it, in one pass after one
// validity check: encoding/json would check the whole array, then scan
// each element to find its end, then hand it to UnmarshalJSON to check
// again. A history read back from a store goes through here
// (chat.Messages decodes with it). An error is a *ValidationError with,
// as from [ValidateMessages], the element's Index and a Field such as
// "messages[3].role".
func DecodeMessages(data []byte) ([]Message, error) {
	if !jsonvalid.Valid(data) {
		return nil, invalid("", "malformed JSON")
	}
	d := decoder{b: data}
	var out []Message
	if err := d.array("messages", func(n int) {
		if n >= 0 {
			out = make([]Message, n)
		}
	}, func(i int) *ValidationError {
		if d.peek() == 'n' { // as UnmarshalJSON: null leaves the zero message
			d.i += 4
			return nil
		}
		if err := d.message(&out[i]); err != nil {
			err = err.under("messages", i)
			err.Index = i
			return err
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// begin checks data and returns a decoder positioned on its value, with ok
// false when there is nothing to decode: the value is JSON null (which,
// as encoding/json expects of an Unmarshaler, leaves the target
// unchanged) or the data is not valid JSON (err).
func begin(data []byte) (d decoder, ok bool, err *ValidationError) {
	if !jsonvalid.Valid(data) {
		return d, false, invalid("", "malformed JSON")
	}
	d = decoder{b: data}
	return d, d.peek() != 'n', nil
}

// finish stores a successfully decoded *out in *dst.
func finish[T any](dst, out *T, ok bool, err *ValidationError) error {
	if err != nil {
		return err
	}
	if ok {
		*dst = *out
	}
	return nil
}

// decoder reads one JSON document already checked with json.Valid, so it
// can trust the syntax and only has to check kinds.
type decoder struct {
	b []byte
	i int
}

// peek skips white space and returns the first byte of the next token.
func (d *decoder) peek() byte {
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return c
		}
	}
	return 0
}

// kind describes the next value for an error message.
func (d *decoder) kind() string {
	switch d.peek() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// wrongKind returns the error for a value of the wrong kind at field.
func (d *decoder) wrongKind(field, want string) *ValidationError {
	return invalid(field, "must be "+want+", not "+d.kind())
}

// skip skips the next value.
func (d *decoder) skip() {
	switch d.peek() {
	case '"':
		d.skipString()
	case '{', '[':
		depth := 0
		for {
			switch d.b[d.i] {
			case '"':
				d.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			d.i++
			if depth == 0 {
				return
			}
		}
	default:
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			d.i++
		}
	}
}

// skipString skips the string at d.i and reports whether it holds a
// backslash escape or a non-ASCII byte.
func (d *decoder) skipString() (special bool) {
	d.i++
	for {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return special
		case c == '\\':
			special = true
			d.i += 2
		case c >= utf8.RuneSelf:
			special = true
			d.i++
		default:
			d.i++
		}
	}
}

// raw returns the next value's bytes.
func (d *decoder) raw() []byte {
	d.peek()
	start := d.i
	d.skip()
	return d.b[start:d.i]
}

// str reads the string or null (as "") at d.i into *s.
func (d *decoder) str(s *string) {
	if d.peek() == 'n' {
		d.i += 4
		*s = ""
		return
	}
	start := d.i
	special := d.skipString()
	body := d.b[start+1 : d.i-1]
	if !special || (!hasByte(body, '\\') && utf8.Valid(body)) {
		*s = string(body)
	} else {
		*s = unquote(body)
	}
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// enumField reads a string field named name whose value is usually one
// of known: a match is stored as the constant from known, without
// allocating.
func (d *decoder) enumField(name string, known []string, s *string) *ValidationError {
	if d.peek() == '"' {
		start := d.i
		if !d.skipString() {
			body := d.b[start+1 : d.i-1]
			for _, k := range known {
				if string(body) == k {
					*s = k
					return nil
				}
			}
		}
		d.i = start
	}
	return d.strField(name, s)
}

var (
	roles       = []string{string(RoleSystem), string(RoleUser), string(RoleAssistant), string(RoleTool)}
	blockTypes  = []string{string(BlockText), string(BlockImage), string(BlockThinking), string(BlockRedactedThinking)}
	sourceTypes = []string{string(SourceURL), string(SourceInline)}
	details     = []string{string(DetailAuto), string(DetailLow), string(DetailHigh)}
	mediaTypes  = []string{MediaTypePNG, MediaTypeJPEG, MediaTypeWebP, MediaTypeGIF}
)

// strField reads a string field named name.
func (d *decoder) strField(name string, s *string) *ValidationError {
	if d.peek() != '"' && d.peek() != 'n' {
		err := d.wrongKind(name, "a string")
		d.skip()
		return err
	}
	d.str(s)
	return nil
}

// object reads an object, calling field for each key with the decoder
// positioned on the value; field must consume the value. A value that is
// not an object is an error about name.
func (d *decoder) object(name string, field func(key []byte) *ValidationError) *ValidationError {
	if d.peek() != '{' {
		err := d.wrongKind(name, "an object")
		d.skip()
		return err
	}
	d.i++
	for {
		switch d.peek() {
		case '}':
			d.i++
			return nil
		case ',':
			d.i++
			d.peek()
		}
		start := d.i
		special := d.skipString()
		key := d.b[start+1 : d.i-1]
		if special && hasByte(key, '\\') {
			key = []byte(unquote(key))
		}
		d.peek() // ':'
		d.i++
		if err := field(key); err != nil {
			return err
		}
	}
}

// array reads an array or null, calling elem for each element with the
// decoder positioned on it and its index; elem must consume the value.
// start is called first with the number of elements, or -1 for null. A
// value that is neither is an error about name.
func (d *decoder) array(name string, start func(n int), elem func(i int) *ValidationError) *ValidationError {
	switch d.peek() {
	case 'n':
		d.i += 4
		start(-1)
		return nil
	case '[':
	default:
		err := d.wrongKind(name, "an array")
		d.skip()
		return err
	}
	start(d.count())
	d.i++
	for i := 0; ; i++ {
		switch d.peek() {
		case ']':
			d.i++
			return nil
		case ',':
			d.i++
		}
		if err := elem(i); err != nil {
			return err
		}
	}
}

// count returns the number of elements of the array at d.i, without
// consuming it.
func (d *decoder) count() int {
	save := d.i
	defer func() { d.i = save }()
	d.i++
	n := 0
	for {
		switch d.peek() {
		case ']':
			return n
		case ',':
			d.i++
		}
		d.skip()
		n++
	}
}

// fields reads an object whose known keys are names (at most eight),
// calling read with the index of each known key and the decoder positioned
// on its value; read must consume the value. Unknown keys are skipped; a
// repeated known key is an error about prefix+key.
func (d *decoder) fields(name, prefix string, names []string, read func(k int) *ValidationError) *ValidationError {
	var seen uint8
	return d.object(name, func(key []byte) *ValidationError {
		for k, n := range names {
			if string(key) != n {
				continue
			}
			if seen&(1<<k) != 0 {
				return invalid(prefix+n, "repeated key")
			}
			seen |= 1 << k
			return read(k)
		}
		d.skip()
		return nil
	})
}

var messageKeys = []string{"role", "content", "tool_calls", "tool_call_id"}

func (d *decoder) message(m *Message) *ValidationError {
	var role string
	err := d.fields("", "", messageKeys, func(k int) *ValidationError {
		switch k {
		case 0:
			return d.enumField("role", roles, &role)
		case 1:
			return d.content(&m.Content)
		case 2:
			return d.toolCalls(&m.ToolCalls)
		}
		return d.strField("tool_call_id", &m.ToolCallID)
	})
	if err != nil {
		return err
	}
	m.Role = Role(role)
	if !m.Role.Valid() {
		if role == "" {
			return invalid("role", "missing role")
		}
		return invalid("role", "unknown role "+strconv.Quote(role))
	}
	return nil
}

func (d *decoder) toolCalls(calls *[]ToolCall) *ValidationError {
	return d.array("tool_calls", func(n int) {
		if n > 0 {
			*calls = make([]ToolCall, n)
		}
	}, func(i int) *ValidationError {
		if err := d.toolCall(&(*calls)[i]); err != nil {
			return err.under("tool_calls", i)
		}
		return nil
	})
}

func (d *decoder) content(c *Content) *ValidationError {
	switch d.peek() {
	case 'n':
		d.i += 4
		return nil
	case '"':
		*c = Content{kind: contentText}
		d.str(&c.text)
		return nil
	case '[':
		*c = Content{kind: contentBlocks}
		return d.array("content", func(n int) {
			c.blocks = make([]Block, n)
		}, func(i int) *ValidationError {
			if err := d.block(&c.blocks[i]); err != nil {
				return err.under("content", i)
			}
			return nil
		})
	}
	err := d.wrongKind("content", "a string, an array of content blocks or null")
	d.skip()
	return err
}

// blockKeys are a block's known keys: the string fields, in the order of
// blockEnums, then source.
var blockKeys = []string{"type", "text", "signature", "media_type", "detail", "data", "source"}

// blockEnums are the usual values of the block's string keys, by index.
var blockEnums = [6][]string{0: blockTypes, 3: mediaTypes, 4: details}

func (d *decoder) block(b *Block) *ValidationError {
	var (
		vals      [6]string // type, text, signature, media_type, detail, data
		source    ImageSource
		srcType   string
		hasSource bool
	)
	err := d.fields("", "", blockKeys, func(k int) *ValidationError {
		if k < len(vals) {
			return d.enumField(blockKeys[k], blockEnums[k], &vals[k])
		}
		if d.peek() == 'n' {
			d.i += 4
			return nil
		}
		hasSource = true
		return d.source(&source, &srcType)
	})
	if err != nil {
		return err
	}
	typ, text, signature, mediaType, detail, data := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	switch t := BlockType(typ); t {
	case BlockText, BlockThinking:
		*b = Block{Type: t, Text: text, Signature: signature}
	case BlockImage:
		*b = Block{Type: t, MediaType: mediaType, Detail: Detail(detail)}
		if hasSource {
			switch st := SourceType(srcType); st {
			case SourceURL, SourceInline:
				b.Source = source
				b.Source.Type = st
			case "":
				return invalid("source.type", "missing image source type")
			default:
				return invalid("source.type", "unknown image source type "+strconv.Quote(srcType))
			}
		}
	case BlockRedactedThinking:
		*b = Block{Type: t, Data: data}
	case "":
		return invalid("type", "missing block type")
	default:
		return invalid("type", "unknown block type "+strconv.Quote(typ))
	}
	return nil
}

var sourceKeys = []string{"type", "url", "base64_data"}

func (d *decoder) source(s *ImageSource, typ *string) *ValidationError {
	return d.fields("source", "source.", sourceKeys, func(k int) *ValidationError {
		switch k {
		case 0:
			return d.enumField("source.type", sourceTypes, typ)
		case 1:
			return d.strField("source.url", &s.URL)
		}
		return d.strField("source.base64_data", &s.Base64Data)
	})
}

var toolCallKeys = []string{"id", "name", "arguments", "signature"}

func (d *decoder) toolCall(tc *ToolCall) *ValidationError {
	return d.fields("", "", toolCallKeys, func(k int) *ValidationError {
		switch k {
		case 0:
			return d.strField("id", &tc.ID)
		case 1:
			return d.strField("name", &tc.Name)
		case 2:
			tc.Arguments = canonicalRaw(d.raw())
			return nil
		}
		return d.strField("signature", &tc.Signature)
	})
}

var toolKeys = []string{"name", "description", "parameters"}

func (d *decoder) tool(t *Tool) *ValidationError {
	return d.fields("", "", toolKeys, func(k int) *ValidationError {
		switch k {
		case 0:
			return d.strField("name", &t.Name)
		case 1:
			return d.strField("description", &t.Description)
		}
		t.Parameters = canonicalRaw(d.raw())
		return nil
	})
}

// canonicalRaw returns the valid JSON value raw in canonical form, or nil
// for null.
func canonicalRaw(raw []byte) json.RawMessage {
	if len(raw) == 0 || raw[0] == 'n' {
		return nil
	}
	return jsonstr.AppendCompact(make([]byte, 0, len(raw)), raw)
}

// unquote decodes the body of a valid JSON string literal as encoding/json
// does: invalid UTF-8 and unpaired surrogates become U+FFFD.
func unquote(s []byte) string {
	var b strings.Builder
	b.Grow(len(s))
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != utf8.RuneError {
							b.WriteRune(dec)
							r += 6
							continue
						}
					}
					rr = utf8.RuneError
				}
				b.WriteRune(rr)
				continue
			default: // '"', '\\', '/'
				b.WriteByte(s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b.WriteRune(rr)
			r += size
		}
	}
	return b.String()
}

// hex4 decodes the four hex digits at the start of s (valid JSON
// guarantees them).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
