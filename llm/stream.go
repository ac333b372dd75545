package llm

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/armature-go/armature/errcat"
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
}

// Add folds one chunk in.
func (a *Accumulator) Add(c *Chunk) {
	a.content.WriteString(c.Content)
	a.reasoning.WriteString(c.Reasoning)
	for _, d := range c.ToolCalls {
		i := slices.IndexFunc(a.calls, func(x *ToolCallDelta) bool { return x.Index == d.Index })
		if i < 0 {
			cp := d
			a.calls = append(a.calls, &cp)
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
	if len(t) > 0 && t[0] == '{' && json.Valid([]byte(t)) {
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
func OverlayJSON(events []json.RawMessage) json.RawMessage {
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
