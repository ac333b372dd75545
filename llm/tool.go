package llm

import (
	"encoding/json"
)

// ToolCall is a request, carried by an assistant message, to run a named
// tool with structured arguments (llm-provider §3).
//
// Arguments is kept as raw JSON (a [json.RawMessage]) rather than decoded
// into a map[string]any: the bytes a provider returned are preserved
// verbatim (key order and number precision survive a round trip, which the
// wire-byte-stability rules rely on), decoding is deferred to the tool,
// which unmarshals into its own typed struct with [ToolCall.DecodeArguments],
// and nothing is boxed on the hot path. nil (JSON null) is a legal value: a
// response with finish_reason "error" carries null arguments when the
// provider's bytes could not be parsed. Otherwise Arguments is a JSON
// object.
type ToolCall struct {
	// ID identifies the call within its message; the answering tool
	// message carries it as ToolCallID. Provider-issued IDs are preserved
	// verbatim.
	ID string
	// Name is the tool name.
	Name string
	// Arguments is the JSON object of arguments, or nil for null.
	// Decoded values hold it compact, in canonical form.
	Arguments json.RawMessage
	// Signature is the optional provider-issued reasoning-continuity
	// token (§3.1.7). Preserve it verbatim; never construct or modify it.
	Signature string
}

// DecodeArguments unmarshals the call's arguments into v, as
// [json.Unmarshal] does. Null arguments leave v unchanged.
func (tc ToolCall) DecodeArguments(v any) error {
	if len(tc.Arguments) == 0 {
		return nil
	}
	return json.Unmarshal(tc.Arguments, v)
}

// Tool is a tool definition offered to the model (llm-provider §4).
type Tool struct {
	// Name identifies the tool; it must be non-empty and unique within
	// one call's tools.
	Name string
	// Description describes the tool's behavior to the model.
	Description string
	// Parameters is the JSON Schema of the argument record: a JSON object
	// schema (its "type", when present, is "object").
	Parameters json.RawMessage
}
