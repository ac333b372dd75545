// Package anthropic is the Anthropic Messages wire mapping of the
// OpenArmature LLM provider capability (llm-provider §8.2): a
// [llm.Provider] that talks to POST /v1/messages with net/http and
// encoding/json.
//
//	p, err := anthropic.New(anthropic.Config{
//		APIKey: os.Getenv("ANTHROPIC_API_KEY"),
//		Model:  "claude-sonnet-4-5",
//	})
//	if err != nil {
//		return err
//	}
//	resp, err := llm.Complete(ctx, p, &llm.Request{
//		Messages: []llm.Message{llm.SystemText("Be terse."), llm.UserText("Hi")},
//		Config:   llm.Config{MaxTokens: new(256)},
//	})
//
// # Mapping
//
// System messages leave the message list and become the top-level system
// field (several join with "\n\n"); tool calls become tool_use entries of
// the assistant message and each run of tool messages one user message of
// tool_result entries ([DecodeMessages] is the receive direction); tools
// carry their schema as input_schema; tool_choice "required" is
// {"type":"any"}. Image blocks map to base64 or url sources (the detail
// hint is dropped); thinking and redacted-thinking blocks round-trip with
// their signatures. Anthropic signs thinking blocks only, so signatures
// on text blocks and tool calls, and thinking blocks without a signature,
// come from another provider and are stripped before sending (§3.1.7).
//
// max_tokens is required: a call without Config.MaxTokens fails before
// sending, as does one setting Seed, FrequencyPenalty or PresencePenalty,
// which the Messages API does not have. Config.Extras are sent at the
// body root, except keys the mapping manages (see the list in the
// source, request.go): stop_sequences merges after the declared ones; a
// conflicting model, messages, system, tools, tool_choice, output_config,
// max_tokens, temperature or top_p fails before sending, as does a
// stream that contradicts the call (true on an atomic call, false on a
// streamed one). (Anthropic's disable_parallel_tool_use lives
// inside tool_choice: leave Request.ToolChoice unset and pass the whole
// tool_choice object as an extra.)
//
// # Streaming
//
// The Provider is an [llm.Streamer]: a stream-set call ([llm.Complete]
// with Request.Stream) sends "stream": true and reads Anthropic's
// server-sent events (message_start, content_block_start/_delta/_stop,
// message_delta, message_stop, ping, error). Text, thinking and tool_use
// input deltas reach Request.OnChunk as they arrive; the Response is
// assembled from the events exactly as [ParseResponse] maps the
// equivalent atomic body, thinking signatures and redacted thinking
// included, so streamed and atomic calls are indistinguishable (§6
// Streaming assembly). An error event mid-stream maps like an HTTP error;
// a stream cut before message_stop is provider_unavailable. §8.2 of the
// spec defines no streaming yet (its §5 has non-streaming mappings reject
// stream-set calls "until their streaming wire handling lands in
// follow-ons"): this is that follow-on, on Anthropic's documented event
// stream.
//
// # Structured output
//
// [Config].StructuredOutput selects the path of a call with a response
// schema. [StructuredNative] (the default) sends output_config.format
// {type: json_schema}. [StructuredTool] is the §8.2.5.1 fallback for
// older models: a synthetic tool named [SyntheticToolName] whose input
// is the answer, forced with tool_choice; when the caller passes tools of
// its own the call uses [StructuredPrompt] instead, a schema directive in
// the system prompt. In every case the reply is validated against the
// schema and lands on Response.Parsed, or the call fails with
// *llm.StructuredOutputError.
//
// # Responses and errors
//
// [ParseResponse] maps a response body (stop_reason to finish reason,
// usage input_tokens and output_tokens to the prompt and completion
// counters and their sum, nil when either is malformed; Raw verbatim).
// [ParseError] maps HTTP failures to the §7 categories (*llm.ProviderError
// wrapping an *[APIError]); transport failures and this package's own
// default timeout are provider_unavailable, while a cancelled or expired
// caller context is returned as the context error, uncategorized. The API
// key and ExtraHeaders values never appear in an error or a log record.
//
// # Byte stability
//
// Request bodies are written by hand: every object the mapping builds has
// its keys in lexicographic order, and tool schemas, tool_use inputs, the
// response schema and extras values go through [llm.CanonicalJSON] (keys
// sorted recursively, number literals as written), so structurally equal
// requests give byte-identical bodies (§8; [Provider.RequestBody] returns
// them). The official Go SDK (github.com/anthropics/anthropic-sdk-go) was
// considered and not used: its typed parameter structs fix their own
// field order, untyped members (tool input, schemas) are encoded as the
// caller built them, extra body fields are applied as JSON-path patches
// in option order, and its request loop retries failed calls twice by
// default, which a §5 provider must not do.
//
// # Concurrency
//
// A [Provider] is safe for concurrent use. Calls are not serialized; they
// share one HTTP client whose pooled keep-alive connections are reused
// across calls. Every call honors its context: cancelling it aborts the
// exchange. A default timeout ([Config].Timeout) applies only when the
// context has no deadline.
package anthropic
