// Package llm is the message model of the OpenArmature LLM provider
// capability (llm-provider §3, §3.1, §4): message roles, content as text
// or an ordered sequence of content blocks (text, image, thinking,
// redacted thinking), tool calls and tool definitions, their JSON wire
// shape, and the pre-send validation rules.
//
// A [Message] has a [Role], a [Content] (absent, a string, or blocks), and
// on assistant messages [ToolCall]s or on tool messages a ToolCallID. The
// constructors cover the common shapes:
//
//	msgs := []llm.Message{
//		llm.SystemText("You are terse."),
//		llm.UserText("Weather in SF?"),
//		llm.AssistantToolCalls(llm.ToolCall{ID: "call_1", Name: "get_weather",
//			Arguments: json.RawMessage(`{"city":"SF"}`)}),
//		llm.ToolResult("call_1", "72F sunny"),
//	}
//	if err := llm.ValidateMessages(msgs, tools); err != nil {
//		// errors.Is(err, llm.ErrInvalidMessage) and
//		// errors.Is(err, errcat.ProviderInvalidRequest) both hold;
//		// errors.As(err, &ve) gives the *llm.ValidationError with the
//		// offending message index and JSON path.
//	}
//
// # Validation
//
// [Message.Validate] checks the rules over one message (per-role content,
// block rules, tool-call shape); [ValidateMessages] checks a whole
// complete() request (every message, list ordering, tool_call_id
// correlation, unique tool names). Both report the first broken rule as a
// *[ValidationError] in the provider_invalid_request category, and do not
// allocate on a valid, typical request.
//
// # JSON
//
// Every type encodes to and decodes from the spec's wire shape with
// hand-written, allocation-light codecs. Encoding is canonical and matches
// encoding/json byte for byte, so decoding and re-encoding any accepted
// document yields its canonical form, and re-encoding that is stable.
// Decoding rejects unknown roles, block types and image source types with
// a *ValidationError and never panics.
//
// # Concurrency
//
// The package has no mutable state. Messages, blocks, tool calls and tools
// are plain values, immutable by convention: once a value is shared, no
// one modifies it or the slices it holds (constructors such as [Blocks]
// do not copy their arguments). Under that convention any value may be
// read, validated and encoded from any number of goroutines at once.
package llm
