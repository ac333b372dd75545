package llm

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
)

// Accumulator assembles streamed [Chunk]s into the atomic [Response] (§6
// Streaming assembly): content deltas concatenate into the text, reasoning
// deltas into a leading thinking block, tool-call deltas reassemble by
// index in first-seen order, and the finish reason and usage come from the
// chunks that carry them (the last wins). The zero value is ready to use;
// an Accumulator is not safe for concurrent use.
type Accumulator struct {
	// AssembleRaw, if set, builds Response.Raw from the events; the
	// default overlays the top-level members of the events in order
	// (later members win, except that an empty array or null does not
	// replace a value) so the terminal chunk's usage survives verbatim.
	AssembleRaw func(events []json.RawMessage, resp *Response) json.RawMessage

	content, reasoning strings.Builder
	calls              []*ToolCallDelta
	finish             FinishReason
	usage              *Usage
	events             []json.RawMessage
	// pos maps a tool call's index to its place in calls once there are
	// more than linearCalls of them: a stream of deltas each opening a
	// call (hundreds of thousands fit in a stream's bound) then costs
	// linear time, not quadratic (minutes of CPU).
	pos map[int]int
}

// Add folds one chunk in.
func (a *Accumulator) Add(c *Chunk) {
	a.content.WriteString(c.Content)
	a.reasoning.WriteString(c.Reasoning)
	for _, d := range c.ToolCalls {
		i := a.find(d.Index)
		if i < 0 {
			cp := d
			a.calls = append(a.calls, &cp)
			switch {
			case a.pos != nil:
				a.pos[d.Index] = len(a.calls) - 1
			case len(a.calls) > linearCalls:
				a.pos = make(map[int]int, 2*len(a.calls))
				for j, t := range a.calls {
					a.pos[t.Index] = j
				}
			}
			continue
		}
		t := a.calls[i]
		if d.ID != "" {
			t.ID = d.ID
		}
		if d.Name != "" {
			t.Name = d.Name
		}
		if d.Signature != "" {
			t.Signature = d.Signature
		}
		t.Arguments += d.Arguments
	}
	if c.FinishReason != "" {
		a.finish = c.FinishReason
	}
	if c.Usage != nil {
		u := *c.Usage
		a.usage = &u
	}
	if len(c.Raw) > 0 {
		a.events = append(a.events, c.Raw)
	}
}

// linearCalls is how many tool calls an Accumulator looks through before
// it indexes them.
const linearCalls = 16

// find returns the place in a.calls of the call with the given index, or
// -1.
func (a *Accumulator) find(index int) int {
	if a.pos != nil {
		if i, ok := a.pos[index]; ok {
			return i
		}
		return -1
	}
	return slices.IndexFunc(a.calls, func(x *ToolCallDelta) bool { return x.Index == index })
}

// Response returns the assembled response. Tool-call arguments that do
// not parse as a JSON object are null under finish_reason "error" and
// otherwise fail the call with provider_invalid_response, as in the
// atomic case.
func (a *Accumulator) Response() (*Response, error) {
	r := &Response{Message: Message{Role: RoleAssistant}, FinishReason: a.finish}
	if r.FinishReason == "" {
		r.FinishReason = FinishError
	}
	text := a.content.String()
	switch {
	case a.reasoning.Len() > 0:
		blocks := []Block{ThinkingBlock(a.reasoning.String(), "")}
		if text != "" {
			blocks = append(blocks, TextBlock(text))
		}
		r.Message.Content = Blocks(blocks...)
	case text != "":
		r.Message.Content = Text(text)
	}
	for _, d := range a.calls {
		args, err := ToolArguments(d.Arguments, r.FinishReason)
		if err != nil {
			return nil, err
		}
		r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: d.ID, Name: d.Name, Arguments: args, Signature: d.Signature})
	}
	if a.usage != nil {
		r.Usage = *a.usage
	}
	if a.AssembleRaw != nil {
		r.Raw = a.AssembleRaw(a.events, r)
	} else {
		r.Raw = OverlayJSON(a.events)
	}
	return r, nil
}

// ToolArguments converts a tool call's wire arguments string into
// [ToolCall.Arguments]: a JSON object gives its compact form; "" or
// unparseable text gives nil (JSON null) when finish is "error" (§3
// Validation under finish_reason "error"), and otherwise an error in
// provider_invalid_response. Mappings use it for atomic and streamed
// responses alike.
func ToolArguments(s string, finish FinishReason) (json.RawMessage, error) {
	t := strings.TrimSpace(s)
	if len(t) > 0 && t[0] == '{' && jsonvalid.Valid([]byte(t)) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(t)); err == nil {
			return buf.Bytes(), nil
		}
	}
	if finish == FinishError {
		return nil, nil
	}
	if t == "" || t == "null" {
		return nil, &ProviderError{Cat: errcat.ProviderInvalidResponse, Message: "tool call arguments are missing"}
	}
	return nil, &ProviderError{Cat: errcat.ProviderInvalidResponse, Message: "tool call arguments are not a JSON object"}
}

// OverlayJSON merges JSON objects member by member in order: a later
// member replaces an earlier one, except that an empty array or null does
// not replace an existing value. Keys are emitted sorted. Non-object
// events are skipped.
//
// It reads the events in place (a stream has an event per token): only
// events whose keys need decoding (an escape or a non-ASCII byte) or that
// repeat a key are decoded into maps.
func OverlayJSON(events []json.RawMessage) json.RawMessage {
	if b, ok := overlayFast(events); ok {
		return b
	}
	return overlayDecoded(events)
}

// overlayDecoded is OverlayJSON by decoding every event into a map.
func overlayDecoded(events []json.RawMessage) json.RawMessage {
	merged := map[string]json.RawMessage{}
	for _, e := range events {
		var m map[string]json.RawMessage
		if json.Unmarshal(e, &m) != nil {
			continue
		}
		for k, v := range m {
			t := bytes.TrimSpace(v)
			if _, ok := merged[k]; ok && (string(t) == "null" || string(t) == "[]") {
				continue
			}
			merged[k] = v
		}
	}
	b, _ := json.Marshal(merged)
	return b
}

// overlayFast is OverlayJSON scanning the events' top-level members in
// place; ok is false when an event needs overlayDecoded's semantics (a
// key with an escape or a non-ASCII byte, whose raw bytes are not its
// decoded form, or a key repeated within an event).
func overlayFast(events []json.RawMessage) (out json.RawMessage, ok bool) {
	type member struct{ key, val []byte }
	var merged []member // in first-seen order; sorted at the end
	index := map[string]int{}
	var seen []int // the members of the current event, by index
	for _, e := range events {
		if !jsonvalid.Valid(e) {
			continue
		}
		obj := bytes.TrimSpace(e)
		if len(obj) == 0 || obj[0] != '{' {
			continue
		}
		seen = seen[:0]
		ok := scanMembers(obj, func(key, val []byte) bool {
			i, found := index[string(key)]
			if found && slices.Contains(seen, i) {
				return false // a repeated key: the last one wins, as decoded
			}
			switch {
			case !found:
				i = len(merged)
				index[string(key)] = i
				merged = append(merged, member{key, val})
			case string(val) != "null" && string(val) != "[]":
				merged[i].val = val
			}
			seen = append(seen, i)
			return true
		})
		if !ok {
			return nil, false
		}
	}
	slices.SortFunc(merged, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range merged {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('"')
		buf.Write(m.key)
		buf.WriteString(`":`)
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	// As json.Marshal writes a RawMessage: compact, HTML-escaped.
	var compact bytes.Buffer
	if json.Compact(&compact, buf.Bytes()) != nil {
		return nil, false
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.Bytes(), true
}

// scanMembers calls f with the raw key (between its quotes) and value of
// each top-level member of obj, a valid JSON object, in order, until f
// returns false. It returns false when f did, or when a key holds an
// escape or a non-ASCII byte.
func scanMembers(obj []byte, f func(key, val []byte) bool) bool {
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		// obj[i] is the key's opening quote.
		start := i + 1
		j := start
		for ; obj[j] != '"'; j++ {
			if obj[j] == '\\' || obj[j] >= 0x80 {
				return false
			}
		}
		key := obj[start:j]
		i = skipSpace(obj, skipSpace(obj, j+1)+1) // past the colon
		end := valueEnd(obj, i)
		if !f(key, obj[i:end]) {
			return false
		}
		i = skipSpace(obj, end)
		if obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // past the comma
	}
	return true
}

// valueEnd returns the index just past the JSON value starting at i in
// the valid JSON b.
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// skipSpace returns the index of the first non-whitespace byte of b at or
// after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
