package llm

import (
	"errors"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
)

// ErrInvalidMessage is the sentinel every [ValidationError] matches with
// [errors.Is]: the message list, a message, a content block, a tool call or
// a tool definition is malformed (or its JSON could not be decoded into the
// message model).
var ErrInvalidMessage = errors.New("llm: invalid message")

// ValidationError reports the first rule a message, message list or tool
// definition breaks (llm-provider §3, §3.1, §4, §5), or why its JSON could
// not be decoded. Its category is [errcat.ProviderInvalidRequest]: the
// request is malformed before it reaches a provider.
//
// Both errors.Is(err, llm.ErrInvalidMessage) and
// errors.Is(err, errcat.ProviderInvalidRequest) hold for it; use
// [errors.As] to read the fields.
type ValidationError struct {
	// Index is the index of the offending message in the list given to
	// [ValidateMessages], or -1 when the error is not about one message of
	// a list ([Message.Validate], a tool definition, a decoding error).
	Index int
	// Field is the JSON path of the offending field, such as
	// "messages[2].content[0].source.media_type" (from [ValidateMessages])
	// or "content[0].source.media_type" (from [Message.Validate]).
	Field string
	// Reason says what is wrong with the field.
	Reason string
	// Err is the underlying cause, if any (a JSON decoding error).
	Err error
}

var _ errcat.Categorized = (*ValidationError)(nil)

// Error formats the error as "llm: <field>: <reason>[: <cause>]".
func (e *ValidationError) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := "llm: "
	if e.Field != "" {
		s += e.Field + ": "
	}
	s += e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Diagnostic is the failure as the user who sent the message may read
// it (errcat.Diagnoser): "<field>: <reason>[: <cause>]", without the
// "llm: " prefix Error carries for logs.
func (e *ValidationError) Diagnostic() string {
	if e == nil {
		return ""
	}
	return strings.TrimPrefix(e.Error(), "llm: ")
}

// Category reports [errcat.ProviderInvalidRequest].
func (e *ValidationError) Category() errcat.Category {
	if e == nil {
		return ""
	}
	return errcat.ProviderInvalidRequest
}

// Is reports whether target is [ErrInvalidMessage] or denotes the
// provider_invalid_request category.
func (e *ValidationError) Is(target error) bool {
	if e == nil {
		return false
	}
	return target == ErrInvalidMessage || errcat.Matches(e.Category(), target)
}

// Unwrap returns the underlying cause, if any.
func (e *ValidationError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// invalid returns a *ValidationError for field with no message index.
func invalid(field, reason string) *ValidationError {
	return &ValidationError{Index: -1, Field: field, Reason: reason}
}

// under prefixes e's field with the path of element i of the list named
// name ("content", 2 turns "type" into "content[2].type") and returns e.
// An i below zero names the field itself.
func (e *ValidationError) under(name string, i int) *ValidationError {
	prefix := name
	if i >= 0 {
		prefix += "[" + strconv.Itoa(i) + "]"
	}
	if e.Field == "" {
		e.Field = prefix
	} else if e.Field[0] == '[' {
		e.Field = prefix + e.Field
	} else {
		e.Field = prefix + "." + e.Field
	}
	return e
}

// orNil converts a *ValidationError result for an exported function,
// keeping a nil pointer from becoming a non-nil error.
func orNil(err *ValidationError) error {
	if err != nil {
		return err
	}
	return nil
}
