package harness

import (
	"errors"
	"fmt"

	"github.com/armature-go/armature/errcat"
)

// ErrInvalidConfig is wrapped by configuration errors from [New].
var ErrInvalidConfig = errors.New("harness: invalid config")

// Error is a failure the harness itself reports (harness §10):
// harness_session_id_unresolved, harness_signal_subscription_failed,
// harness_signal_correlation_failed or
// harness_path_classification_ambiguous. Match it with errors.Is against
// its category, or read it with errors.As.
type Error struct {
	Cat errcat.Category
	// Msg says what went wrong, without the category.
	Msg string
	// Err is the cause, if any.
	Err error
}

// newError returns an *Error with a formatted message.
func newError(c errcat.Category, cause error, format string, args ...any) *Error {
	return &Error{Cat: c, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Error formats the failure with its package prefix and category.
func (e *Error) Error() string {
	if e == nil {
		return "harness: <nil>"
	}
	s := "harness: " + string(e.Cat) + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Message returns the error's own message, without prefix, category or
// cause (errcat.Messager: cause chains list the cause separately).
func (e *Error) Message() string {
	if e == nil {
		return ""
	}
	return e.Msg
}

// Category returns the error's category.
func (e *Error) Category() errcat.Category {
	if e == nil {
		return ""
	}
	return e.Cat
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is matches the error's category.
func (e *Error) Is(target error) bool { return e != nil && errcat.Matches(e.Cat, target) }
