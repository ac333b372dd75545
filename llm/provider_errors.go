package llm

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
)

// ErrStreamUnsupported is matched (with [errors.Is]) by the error a
// stream-set call fails with when the provider does not implement
// [Streamer] (§5 Provider streaming support). Its category is
// provider_invalid_request; no request is sent.
var ErrStreamUnsupported = errors.New("llm: the provider mapping does not support streaming")

// ErrManagedField is matched by the error a call fails with when a
// Config.Extras key conflicts with a field the mapping manages (§6
// Managed-field collision). Its category is provider_invalid_request; no
// request is sent.
var ErrManagedField = errors.New("llm: extras value conflicts with a managed field")

// ErrResponseTooLarge is matched (with [errors.Is]) by the error a call
// fails with when the upstream's reply exceeds the mapping's size bound
// (each mapping's Config.MaxResponseBytes): a non-streamed body, one
// stream event, or a stream's accumulated text, reasoning and tool-call
// arguments. Its category is provider_invalid_response; the mapping
// stops reading at the bound and closes the connection, and the error
// carries none of the reply.
var ErrResponseTooLarge = errors.New("llm: the upstream reply exceeds the size bound")

// ProviderError is a failure of a provider call in one of the §7
// categories: a provider's HTTP error, a transport failure, an
// unparseable response or a mapping's pre-send rejection.
//
// It never carries API keys or request headers: mappings pass provider
// messages through [Redact]. Use [errors.As] to read it;
// errors.Is(err, errcat.ProviderRateLimit) matches on the category.
type ProviderError struct {
	// Cat is the §7 category.
	Cat errcat.Category
	// Provider names the mapping ("openai", "anthropic", "gemini").
	Provider string
	// Op is the operation: "complete", "stream" or "ready".
	Op string
	// StatusCode is the HTTP status, or 0 when no response was received.
	StatusCode int
	// Code is the provider's error type or code, if it gave one.
	Code string
	// Message is the provider's (redacted) error message or the
	// mapping's description of the failure.
	Message string
	// RetryAfter is the wait the provider asked for (Retry-After), or 0.
	RetryAfter time.Duration
	// Err is the underlying cause (a transport or decoding error, or a
	// sentinel such as [ErrStreamUnsupported]), if any.
	Err error
}

var _ errcat.Categorized = (*ProviderError)(nil)

// Error formats the error as
// "llm: <provider> <op>: <category> (HTTP <status>): <message>: <cause>".
func (e *ProviderError) Error() string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString("llm: ")
	if e.Provider != "" {
		b.WriteString(e.Provider)
		b.WriteByte(' ')
	}
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(string(e.Cat))
	if e.StatusCode != 0 {
		b.WriteString(" (HTTP ")
		b.WriteString(strconv.Itoa(e.StatusCode))
		b.WriteByte(')')
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Diagnostic is the failure as the user who sent the turn may read it
// (errcat.Diagnoser, harness-chat §10.3): the provider's message, or,
// when it gave none, a cause of this package's own (ErrResponseTooLarge
// and the like, "llm: " trimmed); "" otherwise (a transport's or a
// decoder's error stays in the log: the reply quotes the category). It
// leaves out the "llm: <provider> <op>: <category> (HTTP <status>)"
// prefix that Error carries for logs.
func (e *ProviderError) Diagnostic() string {
	switch {
	case e == nil:
		return ""
	case e.Message != "":
		return e.Message
	case e.Err != nil && strings.HasPrefix(e.Err.Error(), "llm: "):
		return strings.TrimPrefix(e.Err.Error(), "llm: ")
	}
	return ""
}

// Category reports the §7 category.
func (e *ProviderError) Category() errcat.Category {
	if e == nil {
		return ""
	}
	return e.Cat
}

// Retryable reports whether the category is transient (§7 Retry
// classification): provider_unavailable, provider_rate_limit,
// provider_model_not_loaded.
func (e *ProviderError) Retryable() bool { return e != nil && e.Cat.Transient() }

// Transient is Retryable under the name graph's retry classifier reads.
func (e *ProviderError) Transient() bool { return e.Retryable() }

// Is reports whether target denotes the error's category.
func (e *ProviderError) Is(target error) bool {
	if e == nil {
		return false
	}
	return errcat.Matches(e.Cat, target)
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// StructuredOutputError is the §7 structured_output_invalid failure: the
// request had a ResponseSchema and the model's content did not parse as
// JSON or did not validate. It carries what the §7.1 reask builder needs.
type StructuredOutputError struct {
	// Schema is the requested response schema.
	Schema json.RawMessage
	// OutputContent is the model's content, verbatim.
	OutputContent string
	// ErrorMessage describes the parse or validation failure.
	ErrorMessage string
	// FinishReason and Usage are those of the received response.
	FinishReason FinishReason
	Usage        Usage
	// Response is the received response (Parsed nil).
	Response *Response
	// Err is the parse or validation error.
	Err error
}

var _ errcat.Categorized = (*StructuredOutputError)(nil)

// Error formats the error as "llm: structured_output_invalid: <message>".
func (e *StructuredOutputError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return "llm: structured_output_invalid: " + e.ErrorMessage
}

// Category reports [errcat.StructuredOutputInvalid].
func (e *StructuredOutputError) Category() errcat.Category {
	if e == nil {
		return ""
	}
	return errcat.StructuredOutputInvalid
}

// Is reports whether target denotes structured_output_invalid.
func (e *StructuredOutputError) Is(target error) bool {
	return e != nil && errcat.Matches(errcat.StructuredOutputInvalid, target)
}

// Unwrap returns the parse or validation error.
func (e *StructuredOutputError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Redact returns s with every occurrence of each non-empty secret
// replaced by "[REDACTED]", and any "Bearer <token>" credential masked.
// Mappings apply it to every provider message and transport error text
// they put in an error or a log.
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	for i := 0; ; {
		j := strings.Index(s[i:], "Bearer ")
		if j < 0 {
			break
		}
		start := i + j + len("Bearer ")
		end := start
		for end < len(s) && s[end] != ' ' && s[end] != '"' && s[end] != '\'' && s[end] != ',' {
			end++
		}
		if end > start && s[start:end] != "[REDACTED]" {
			s = s[:start] + "[REDACTED]" + s[end:]
		}
		i = start
	}
	return s
}
