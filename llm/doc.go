// Package llm is the OpenArmature LLM provider capability: the message
// model (llm-provider §3, §3.1, §4: message roles, content as text or an
// ordered sequence of content blocks, tool calls and tool definitions,
// their JSON wire shape, the pre-send validation rules) and the
// [Provider] contract (§5-§7) that the wire-format mappings in the
// sub-packages (llm/openai, ...) implement.
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
// # Providers
//
// A [Provider] has two methods: Ready, the pre-flight probe, and Complete,
// one atomic wire exchange for a [Request] (messages, tools, [ToolChoice],
// [Config] with extras, response schema). Streaming is the optional
// [Streamer] capability (iter.Seq2 of [Chunk]s). Callers use the package
// function [Complete], which adds what every mapping shares:
//
//	resp, err := llm.Complete(ctx, provider, &llm.Request{
//		Messages:       msgs,
//		ResponseSchema: schema,
//		Retry: &llm.RetryPolicy{MaxAttempts: 3, Reask: func(e *llm.StructuredOutputError) string {
//			return "That was not valid: " + e.ErrorMessage + ". Reply with corrected JSON only."
//		}},
//	})
//	switch {
//	case errors.Is(err, errcat.ProviderRateLimit): // *llm.ProviderError, RetryAfter set
//	case errors.Is(err, errcat.StructuredOutputInvalid): // *llm.StructuredOutputError
//	}
//
// A long conversation, such as a chat session's history, goes into a
// Request as it is stored: the system prompt in [Request.System] rather
// than prepended, approval requests and other asides ([AsideFilter])
// left in place. Nothing between the caller and the wire copies or
// re-reads it; the mapping's encoder walks it once, sending System first
// and leaving the asides out, so a model call costs in proportion to what
// it sends, never more ([Request.Transcript] shows the list as sent).
//
// The call-level retry loop (§7.1, [RetryPolicy]) with per-attempt config
// overrides and structured-output reask; stream assembly ([Accumulator]);
// structured-output parsing and validation ([ParseStructured], a built-in
// JSON Schema validator); managed-field collision rules for extras
// ([ResolveExtras]); canonical JSON for byte-stable request bodies
// ([CanonicalJSON]); usage counters ([ParseCounter]) and secret redaction
// ([Redact]) are shared helpers, so a mapping supplies only its wire
// shapes. Failures carry a §7 category: *[ProviderError],
// *[StructuredOutputError] or *[ValidationError]. The llmtest package
// offers a scripted fake Provider.
//
// Observation. [Complete] reports each call to the [CallObserver] of its
// context (the graph engine's typed LLM events). A context may also bind
// the active prompt ([WithActivePrompt], [WithActivePromptGroup]; package
// prompt's Activate does it for a rendered prompt): its identity
// ([PromptIdentity]) and [TokenBudget] ride the call's events, and
// [TokenBudget.Evaluate] compares the budget with the call's usage,
// skipping any bound whose counter was not reported.
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
// Providers are safe for concurrent use and never serialize calls;
// [Complete] holds no shared state, and calls observers (OnChunk,
// OnAttempt, OnRetry, Reask) from the calling goroutine. The package has
// no mutable state. Messages, blocks, tool calls and tools
// are plain values, immutable by convention: once a value is shared, no
// one modifies it or the slices it holds (constructors such as [Blocks]
// do not copy their arguments). Under that convention any value may be
// read, validated and encoded from any number of goroutines at once.
package llm
