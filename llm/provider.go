package llm

import (
	"context"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strconv"
)

// Provider is a model bound to one provider endpoint (llm-provider §5).
// Wire-format mappings (llm/openai, llm/anthropic, llm/gemini) implement
// it. Implementations are safe for concurrent use and never serialize
// concurrent calls.
//
// Callers normally go through the package function [Complete], which adds
// the call-level retry loop (§7.1), structured-output reask and streaming
// assembly on top of any Provider.
type Provider interface {
	// Ready is the §5 ready() pre-flight probe: nil means the next
	// Complete is not expected to fail with provider_authentication,
	// provider_invalid_model, provider_model_not_loaded or
	// provider_unavailable. Complete never calls it.
	Ready(ctx context.Context) error
	// Complete performs one atomic completion call: it validates req
	// (see [Request.Validate] and the mapping's managed fields), sends it
	// once, and maps the answer or failure. It ignores req.Retry,
	// req.Stream and req.OnChunk; [Complete] handles those. When
	// req.ResponseSchema is set it fills Response.Parsed or fails with a
	// *[StructuredOutputError] (see [ParseStructured]). It never mutates
	// req.
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Streamer is the optional streaming capability of a [Provider] (§5
// Streaming, §8.1.6), detected with a type assertion. A mapping without it
// rejects stream-set calls before sending ([ErrStreamUnsupported]).
//
// Stream validates req like Complete, sends it in streaming mode, and
// yields each wire event as a [Chunk] as it arrives. A failure yields
// (nil, err) once and ends the sequence; a pre-send failure yields before
// any request is made. The producer stops and releases the connection
// when yield returns false. Stream ignores req.Retry, req.Stream,
// req.OnChunk and req.ResponseSchema validation: [Complete] assembles the
// chunks ([Accumulator]) and validates structured output.
type Streamer interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[*Chunk, error]
}

// RawAssembler is an optional capability of a [Streamer]: it builds the
// Response.Raw of a streamed call from the wire events in order and the
// assembled response (§6 Streaming assembly, raw). Without it the
// [Accumulator] default applies.
type RawAssembler interface {
	AssembleRaw(events []json.RawMessage, resp *Response) json.RawMessage
}

// Namer is an optional capability of a [Provider]: the mapping's name
// ("openai"), which [Complete] writes into the [ProviderError.Provider] of
// a failure it reports for the provider itself, such as a streamed
// response whose assembled tool-call arguments are not a JSON object.
type Namer interface {
	ProviderName() string
}

// Request is the argument record of one complete() call (§5).
//
// A Request is read-only to everything it is passed to: providers and
// [Complete] never modify it or the slices and maps it holds. The
// [CallObserver] of a call may keep Messages (not a copy) in the events
// it reports after the call returns, so a caller does not modify the
// messages of a request it has passed to Complete: a history it appends
// to, as a chat session's, is fine.
//
// The conversation is System followed by Messages. A caller that keeps a
// long conversation (a chat session's history) passes it as it is, with
// its system prompt in System: nothing on the way to the wire copies or
// re-reads the list, and only the wire mapping's encoder walks it, once.
// Asides in Messages (see [AsideFilter]) are left out of the wire
// request.
type Request struct {
	// System, when non-empty, is the system prompt: it is sent first, as
	// a leading system message of Messages would be, byte for byte. When
	// it is set, Messages holds no system message and may begin with an
	// assistant message.
	System string
	// Messages is the conversation, non-empty; see [ValidateMessages].
	// It may be a stored history as it is, asides included.
	Messages []Message
	// Tools are the tools the model may call, names unique.
	Tools []Tool
	// ToolChoice constrains tool calling; the zero value omits it from
	// the wire (the provider's default applies).
	ToolChoice ToolChoice
	// Config holds the sampling parameters and extras (§6).
	Config Config
	// ResponseSchema, when non-nil, is the JSON Schema (an object
	// schema) the model's content must conform to (§5 structured
	// output).
	ResponseSchema json.RawMessage
	// Retry, when non-nil, makes [Complete] retry per §7.1.
	Retry *RetryPolicy
	// Stream makes [Complete] consume the provider's streaming response
	// ([Streamer]); the result is still one atomic Response.
	Stream bool
	// OnChunk, when Stream is set, is called by [Complete] with every
	// chunk as it arrives (the §5 per-chunk token events), from the
	// calling goroutine. It must not retain or modify the chunk.
	OnChunk func(*Chunk)
}

// Validate checks the provider-independent pre-send rules: the message
// list and tools ([ValidateMessages]), the tool choice against the tools
// ([ToolChoice.Validate]) and that ResponseSchema, when set, is a JSON
// object schema. It returns nil or an error in the provider_invalid_request
// category. Mappings call it before anything mapping-specific.
func (r *Request) Validate() error {
	if err := validateConversation(r.System, r.Messages, r.Tools); err != nil {
		return err
	}
	if err := r.ToolChoice.validate(r.Tools); err != nil {
		return err
	}
	if r.ResponseSchema != nil {
		if err := checkObjectSchema(r.ResponseSchema); err != nil {
			return err
		}
	}
	return nil
}

// clone returns a shallow copy of r whose slices and maps are fresh copies
// of the top level (elements are shared values), except Messages, which
// is clipped rather than copied (a conversation can be long): appending
// to the copy's Messages never writes into r's.
func (r *Request) clone() *Request {
	c := *r
	c.Messages = slices.Clip(r.Messages)
	c.Tools = slices.Clone(r.Tools)
	c.Config = r.Config.Clone()
	return &c
}

// ToolChoiceMode is the kind of a [ToolChoice] (§5 tool_choice). The
// constants are wire identifiers from the OpenArmature specification; they
// must not change.
type ToolChoiceMode string

// The tool-choice modes.
const (
	// ToolChoiceAuto lets the model decide.
	ToolChoiceAuto ToolChoiceMode = "auto"
	// ToolChoiceRequired makes the model call at least one tool; Tools
	// must be non-empty.
	ToolChoiceRequired ToolChoiceMode = "required"
	// ToolChoiceNone forbids tool calls.
	ToolChoiceNone ToolChoiceMode = "none"
	// ToolChoiceTool forces the tool named by [ToolChoice.Name], which
	// must be among Tools.
	ToolChoiceTool ToolChoiceMode = "tool"
)

// ToolChoice is the §5 tool_choice constraint. The zero value is absent:
// the wire field is omitted.
type ToolChoice struct {
	// Mode is the constraint; "" means absent.
	Mode ToolChoiceMode
	// Name is the forced tool's name when Mode is [ToolChoiceTool].
	Name string
}

// ForceTool returns the tool choice that forces the named tool.
func ForceTool(name string) ToolChoice { return ToolChoice{Mode: ToolChoiceTool, Name: name} }

// IsZero reports whether the tool choice is absent.
func (tc ToolChoice) IsZero() bool { return tc == ToolChoice{} }

// Validate checks the tool choice against tools (§5 rules 1-2 and the
// shape); it returns nil or a *[ValidationError].
func (tc ToolChoice) Validate(tools []Tool) error { return orNil(tc.validate(tools)) }

func (tc ToolChoice) validate(tools []Tool) *ValidationError {
	switch tc.Mode {
	case "":
		if tc.Name != "" {
			return invalid("tool_choice", "a tool name needs mode \"tool\"")
		}
	case ToolChoiceAuto, ToolChoiceNone:
		if tc.Name != "" {
			return invalid("tool_choice.name", "only mode \"tool\" names a tool")
		}
	case ToolChoiceRequired:
		if tc.Name != "" {
			return invalid("tool_choice.name", "only mode \"tool\" names a tool")
		}
		if len(tools) == 0 {
			return invalid("tool_choice", "tool_choice \"required\" needs a non-empty tools list")
		}
	case ToolChoiceTool:
		if tc.Name == "" {
			return invalid("tool_choice.name", "a forced tool choice needs a tool name")
		}
		if len(tools) == 0 {
			return invalid("tool_choice", "a forced tool choice needs a non-empty tools list")
		}
		for i := range tools {
			if tools[i].Name == tc.Name {
				return nil
			}
		}
		return invalid("tool_choice.name", "tool "+strconv.Quote(tc.Name)+" is not among the supplied tools")
	default:
		return invalid("tool_choice.type", "unknown tool choice mode "+strconv.Quote(string(tc.Mode)))
	}
	return nil
}

// Config is the §6 RuntimeConfig: declared sampling fields (nil means
// unset and is omitted from the wire, §6 null-skip) plus Extras, the
// undeclared pass-through fields a mapping forwards untouched (subject to
// its managed fields, see [ResolveExtras]).
//
// In Go 1.26 a pointer field is set with new(value):
//
//	llm.Config{Temperature: new(0.2), MaxTokens: new(256)}
type Config struct {
	Temperature      *float64
	MaxTokens        *int
	TopP             *float64
	Seed             *int64
	FrequencyPenalty *float64
	PresencePenalty  *float64
	// StopSequences are the stop sequences, in order; nil means unset.
	StopSequences []string
	// Extras are undeclared fields, keyed by wire name; values are any
	// JSON-encodable value (a json.RawMessage passes through verbatim).
	Extras map[string]any
}

// Clone returns a copy of c that shares no slice or map with it.
func (c Config) Clone() Config {
	c.StopSequences = slices.Clone(c.StopSequences)
	c.Extras = maps.Clone(c.Extras)
	return c
}

// Merge returns c with every field set in o replacing c's (§7.1
// per_attempt_override: a shallow per-key overlay; an unset field in o
// inherits c's, extras merge key by key). Neither c nor o is modified.
func (c Config) Merge(o Config) Config {
	c = c.Clone()
	if o.Temperature != nil {
		c.Temperature = o.Temperature
	}
	if o.MaxTokens != nil {
		c.MaxTokens = o.MaxTokens
	}
	if o.TopP != nil {
		c.TopP = o.TopP
	}
	if o.Seed != nil {
		c.Seed = o.Seed
	}
	if o.FrequencyPenalty != nil {
		c.FrequencyPenalty = o.FrequencyPenalty
	}
	if o.PresencePenalty != nil {
		c.PresencePenalty = o.PresencePenalty
	}
	if o.StopSequences != nil {
		c.StopSequences = slices.Clone(o.StopSequences)
	}
	if len(o.Extras) > 0 {
		if c.Extras == nil {
			c.Extras = make(map[string]any, len(o.Extras))
		}
		for k, v := range o.Extras {
			if v != nil {
				c.Extras[k] = v
			}
		}
	}
	return c
}

// FinishReason says why the model stopped (§6). The constants are wire
// identifiers from the OpenArmature specification; they must not change.
type FinishReason string

// The finish reasons.
const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
	// FinishError: the provider failed mid-response; the response is
	// degraded but parseable (tool call arguments may be null).
	FinishError FinishReason = "error"
)

// Usage is the §6 token accounting. A nil counter is not reported: the
// provider sent none, or sent a malformed one (§7 Malformed usage
// counter; see [ParseCounter]).
type Usage struct {
	PromptTokens     *int
	CompletionTokens *int
	TotalTokens      *int
	// CachedTokens is the count of input tokens served from a prefix
	// cache; 0 is a reported miss.
	CachedTokens *int
	// CacheCreationTokens is the count of input tokens written to the
	// cache.
	CacheCreationTokens *int
}

// Reported reports whether any of the three baseline counters is set.
func (u Usage) Reported() bool {
	return u.PromptTokens != nil || u.CompletionTokens != nil || u.TotalTokens != nil
}

// ParseCounter reads one usage counter from its raw JSON value: a
// non-negative integer literal gives its value; anything else (absent,
// null, a string, a boolean, a negative or fractional number) is not
// reported and gives nil. It never repairs a value (§7).
func ParseCounter(raw json.RawMessage) *int {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return nil
	}
	return &n
}

// Response is the §6 result of a completion call.
type Response struct {
	// Message is the assistant message (role assistant); its content may
	// hold thinking blocks when the mapping surfaces reasoning.
	Message Message
	// FinishReason is the normalized finish reason.
	FinishReason FinishReason
	// Usage is the normalized token accounting.
	Usage Usage
	// Raw is the provider's response body verbatim (for a streamed call,
	// the mapping's assembly of the events). Always set on success.
	Raw json.RawMessage
	// Parsed is the structured value (compact JSON) when the request had
	// a ResponseSchema and the model returned conforming content; nil
	// otherwise (always nil when FinishReason is tool_calls).
	Parsed json.RawMessage
}

// DecodeParsed unmarshals the structured value into v. It does nothing
// when Parsed is nil.
func (r *Response) DecodeParsed(v any) error {
	if len(r.Parsed) == 0 {
		return nil
	}
	return json.Unmarshal(r.Parsed, v)
}

// Chunk is one streamed wire event, normalized (§6 Streaming assembly).
// Any combination of fields may be set; most chunks carry one delta.
type Chunk struct {
	// Content is a content text delta (a "content" token event).
	Content string
	// Reasoning is a reasoning/thinking text delta (a "reasoning" token
	// event).
	Reasoning string
	// ToolCalls are tool-call deltas, reassembled by index; they are not
	// token events.
	ToolCalls []ToolCallDelta
	// FinishReason is set on the chunk that reports it.
	FinishReason FinishReason
	// Usage is set on the chunk that carries usage (usually the last).
	Usage *Usage
	// Raw is the wire event's JSON verbatim.
	Raw json.RawMessage
	// Response, when set (on a stream's last chunk), is the response the
	// mapping assembled from its own events, with everything the deltas
	// cannot carry (reasoning signatures, redacted reasoning, the
	// atomic mapping's validation); [Complete] returns it instead of the
	// [Accumulator]'s. Mappings that leave it nil get the Accumulator.
	Response *Response
}

// ToolCallDelta is a fragment of a streamed tool call. Fragments with the
// same Index belong to one call; ID and Name arrive once, Arguments is
// concatenated.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
	// Signature is a provider reasoning-continuity token, if any.
	Signature string
}
