// Package gemini is the Google Gemini wire mapping of the OpenArmature LLM
// provider capability (llm-provider §8.3): an [llm.Provider] that speaks
// the generateContent API (POST /v1beta/models/{model}:generateContent)
// over net/http and encoding/json.
//
//	p, err := gemini.New(gemini.Config{
//		APIKey: os.Getenv("GEMINI_API_KEY"), // sent as x-goog-api-key, never in a URL
//		Model:  "gemini-2.5-flash",
//	})
//	if err != nil { ... }
//	resp, err := llm.Complete(ctx, p, &llm.Request{
//		Messages: []llm.Message{llm.SystemText("Be brief."), llm.UserText("Weather in SF?")},
//		Config:   llm.Config{MaxTokens: new(256)},
//	})
//
// # Request mapping (§8.3.1)
//
// System messages join (with a blank line between them) into
// systemInstruction; user messages become user Contents, assistant
// messages model Contents, and each run of consecutive tool messages one
// user Content of functionResponse parts whose response is
// {"result": <content>} and whose name is that of the tool call answered.
// Text blocks become text parts, inline images inlineData (PNG, JPEG,
// WebP, HEIC, HEIF; others are refused before sending with
// provider_unsupported_content_block), URL images fileData with the media
// type inferred from the URL ([InferMediaType]); the detail hint is
// dropped. Tool calls become functionCall parts {name, id, args}.
// Tools become tools[0].functionDeclarations, tool_choice becomes
// toolConfig.functionCallingConfig (auto AUTO, required ANY, none NONE,
// a forced tool ANY with allowedFunctionNames).
//
// The seven declared [llm.Config] fields go under generationConfig as
// temperature, topP, maxOutputTokens, stopSequences, seed,
// frequencyPenalty and presencePenalty, and so do the undeclared extras,
// untouched. While a declared field is set its wire key is managed (§6
// Managed-field collision): an extras stopSequences merges after the
// declared sequences (de-duplicated; a malformed one is ignored), an
// extras value of a scalar key equal to the declared one is a no-op and a
// different one is refused before sending ([llm.ErrManagedField],
// provider_invalid_request). On the native structured-output path the
// mapping also manages responseMimeType and responseJsonSchema, which its
// response parsing depends on. Because extras land under
// generationConfig, a root-level field such as toolConfig (Gemini's
// VALIDATED mode) cannot be supplied as an extra.
//
// # Reasoning round-trip (§8.3.1.1, §8.3.2, §3.1.7)
//
// A thought part (thought: true) comes back as a thinking block without a
// signature; a thoughtSignature on a functionCall part is kept as
// [llm.ToolCall].Signature and on a text part as the text block's
// Signature, and each is reattached to its part when the assistant
// message is sent back. Reasoning another provider issued is stripped on
// send: redacted-thinking blocks and thinking blocks that carry a
// signature of their own (Gemini's summaries never do). A functionCall
// that arrives without an id is given [ClientCallIDPrefix] + a nonce
// fresh for each response + "-" + index ([ParseResponse], a pure
// function, leaves the nonce out), which is never sent back. The nonce
// keeps ids unique in a conversation: the Gemini API restarts its
// ID-less calls in every response, while another provider given the
// history (Anthropic rejects duplicate tool_use ids) and the chat
// harness's approvals (keyed by call id) need them unique.
//
// # Responses and errors (§8.3.2, §8.3.3)
//
// [ParseResponse] maps candidates[0] (a response whose parts are all
// plain text has string content; otherwise blocks), the finish reason (a
// functionCall part makes it tool_calls) and usageMetadata, and keeps the
// body as Response.Raw. Under a non-error finish every tool call must
// name a declared tool and its arguments must validate against the
// tool's parameters, or the call fails with provider_invalid_response.
// [ParseError] maps failures to the §7 categories; the error's Code is
// Gemini's error.status, and the API key and header values are redacted
// from every message ([llm.Redact]). Transport failures and timeouts are
// provider_unavailable; a cancelled context is returned as
// context.Canceled (wrapped).
//
// # Structured output (§8.3.5)
//
// With [StructuredNative] (the default) a call with a response schema
// sets generationConfig.responseMimeType "application/json" and
// generationConfig.responseJsonSchema to the schema (the full-JSON-Schema
// field, not the OpenAPI-subset responseSchema). With [StructuredPrompt],
// for models without JSON-Schema-constrained decoding, a schema directive
// is appended to the systemInstruction ([llm.AugmentForSchema]) and no
// response fields are sent. Either way the text is parsed and validated
// into Response.Parsed ([llm.ParseStructured]); [Provider.StructuredOutput]
// reports the path.
//
// # Streaming
//
// The Provider is an [llm.Streamer]: a stream-set call sends the same
// body to streamGenerateContent?alt=sse and yields each event's text,
// thought and functionCall parts as they arrive; the Response is
// assembled from the events as [ParseResponse] maps the equivalent
// atomic body (adjacent text parts joined, signatures and call ids kept),
// so streamed and atomic calls are indistinguishable (§6 Streaming
// assembly). An error event maps like an HTTP error, a stream cut before
// its finishReason is provider_unavailable. §8.3 of the spec defines no
// streaming yet (§5 has non-streaming mappings reject stream-set calls
// "until their streaming wire handling lands in follow-ons"): this is
// that follow-on, on Gemini's documented SSE endpoint.
//
// # Wire-byte stability
//
// Equal requests encode to equal bytes (§8): the fields of every wire
// object are emitted in a fixed order, generationConfig's keys sorted,
// and caller-supplied JSON (tool parameters, function-call args, the
// response schema, extras) is canonicalized with sorted keys
// ([llm.CanonicalJSON]). HTML characters are not escaped.
//
// # Why not the SDK
//
// The official google.golang.org/genai SDK builds requests from its own
// typed structs and applies its own defaults, retries and error types.
// The §8.3 contract needs exact control of the body (undeclared extras
// placed verbatim under generationConfig, managed-field collision rules,
// byte-stable encoding, thoughtSignature placement, responseJsonSchema),
// of the error mapping to the §7 categories and of where the key travels,
// so the mapping speaks HTTP itself and adds no dependency.
//
// # Concurrency
//
// A [Provider] is immutable after [New] and safe for concurrent use.
// Calls are sent concurrently, with no serialization layer (§8.3.4), over
// the pooled keep-alive connections of one http.Client; response bodies
// are read to the end so connections are reused. Every call honours its
// context; [Config].Timeout applies only when the context has no
// deadline.
package gemini
