package chatcli

import (
	"errors"
	"fmt"
	"net/http"
)

var (
	// ErrInvalidConfig reports an unusable configuration.
	ErrInvalidConfig = errors.New("chatcli: invalid configuration")
	// ErrNotFound matches an [*APIError] with status 404.
	ErrNotFound = errors.New("chatcli: not found")
	// ErrUnauthorized matches an [*APIError] with status 401.
	ErrUnauthorized = errors.New("chatcli: unauthorized")
	// ErrInvalidSessionID reports a session id no request can name: "",
	// "." or "..".
	ErrInvalidSessionID = errors.New("chatcli: invalid session id")
)

// APIError is an error answer of the server: its HTTP status and the
// code and message of its JSON error envelope. Use errors.As to read it,
// errors.Is with [ErrNotFound] or [ErrUnauthorized] to classify it.
type APIError struct {
	Status  int
	Code    string
	Message string
	// outcome is the errored turn outcome the answer carried, if any
	// (a refused signal).
	outcome *Outcome
}

// Error formats the answer as the server gave it.
func (e *APIError) Error() string {
	if e == nil {
		return "chatcli: <nil>"
	}
	if e.Code != "" {
		return fmt.Sprintf("chatcli: server answered %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("chatcli: server answered %d: %s", e.Status, e.Message)
}

// Is matches [ErrNotFound] and [ErrUnauthorized] by status.
func (e *APIError) Is(target error) bool {
	if e == nil {
		return false
	}
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	}
	return false
}
