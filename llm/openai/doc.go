// Package openai is the OpenAI-compatible Chat Completions mapping of the
// OpenArmature LLM provider capability (llm-provider §8.1): one
// [Provider] speaks POST {BaseURL}/chat/completions to the OpenAI API,
// vLLM, Ollama, LM Studio, llama.cpp server and other compatible servers,
// with the base URL configurable.
//
//	p, err := openai.New(openai.Config{
//		BaseURL: "http://localhost:8000/v1", // vLLM; "" means api.openai.com
//		APIKey:  os.Getenv("OPENAI_API_KEY"),
//		Model:   "meta-llama/Llama-3.1-8B-Instruct",
//	})
//	if err != nil { ... }
//	if err := p.Ready(ctx); err != nil { ... } // GET /models probe
//	resp, err := llm.Complete(ctx, p, &llm.Request{Messages: msgs, Stream: true})
//
// It implements [llm.Provider] (Ready: the /models probe; Complete: tools,
// tool choice, runtime config with extras and the §6 managed-field rules,
// structured output natively via response_format json_schema or by the
// prompt fallback ([StructuredPrompt]), content blocks, thinking-block
// strip-on-send, usage with malformed counters not reported, §8.1.3 error
// mapping), [llm.Streamer] (SSE with stream_options.include_usage,
// content, reasoning_content/reasoning and tool-call deltas) and
// [llm.RawAssembler].
//
// # Vendor variants
//
// A refusal (message.refusal, delta.refusal) is the reply's text. Gemini's
// OpenAI-compatible endpoint's tool-call thought signatures
// (extra_content.google.thought_signature) are kept on ToolCall.Signature
// and sent back when the server is Gemini's (its host, or a gemini-*
// model), stripped otherwise (§3.1.7). Streamed tool-call deltas without
// an index are numbered by id. An error object answered with a 200
// (in a stream or a whole body) maps as the same HTTP error would;
// insufficient_quota is provider_authentication; Retry-After and
// retry-after-ms give ProviderError.RetryAfter on any status.
//
// # Wire bytes
//
// Request bodies are built by hand, not with the official SDK
// (github.com/openai/openai-go) or a struct passed to encoding/json:
// §8 requires byte-identical bodies for structurally equal inputs
// (fixture 054), including recursively sorted keys inside user-supplied
// JSON Schemas, tool-call arguments and extras placed at the body root.
// The SDK serializes its own param structs and passes extra fields and
// schemas through in caller order, so it cannot give that guarantee. Root
// keys come in a fixed order, extras follow sorted, and every
// caller-supplied JSON value goes through [llm.CanonicalJSON].
//
// # Secrets
//
// The API key and ExtraHeaders values are sent only as headers; errors
// and log records never include headers, and provider messages and
// transport errors are passed through [llm.Redact] with those values.
//
// # Concurrency
//
// A Provider is safe for concurrent use. Calls are never serialized;
// connections are pooled and reused. Cancelling the context aborts the
// request or stream; a call whose context has no deadline is bounded by
// Config.Timeout.
package openai
