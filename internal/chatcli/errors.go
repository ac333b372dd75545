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
	// ErrInvalidPage reports a page of a history no request can name
	// (see [Client.SessionPage]).
	ErrInvalidPage = errors.New("chatcli: invalid history page")
	// ErrTooLarge matches a [*TooLargeError]: the server sent more than
	// the client reads (see [MaxAnswerBytes] and the other bounds).
	ErrTooLarge = errors.New("chatcli: server sent too much")
)

// TooLargeError reports that something the server sent exceeds one of
// the client's bounds ([MaxAnswerBytes], [MaxHistoryBytes],
// [MaxHistoryMessages], [MaxSessions], [MaxEventBytes],
// [MaxTurnBytes], [MaxTurnRuns]): the client stopped reading it, and
// holds none of it. A server that is broken or hostile (the user may
// point the client at any URL) cannot make the client grow its memory
// without bound. Use errors.Is with [ErrTooLarge] to classify it.
type TooLargeError struct {
	// Op is the request ("GET /v1/sessions/s1") or "event stream";
	// "" for a turn's streamed events.
	Op string
	// What names what exceeded the bound: "the answer", "the session's
	// history", "an event", "the turn's streamed reply".
	What string
	// Limit is the bound, in Unit.
	Limit int64
	// Unit is "bytes", "messages", "sessions", "pages", "runs".
	Unit string
}

// Error says what exceeded which bound.
func (e *TooLargeError) Error() string {
	if e == nil {
		return "chatcli: <nil>"
	}
	return "chatcli: " + e.detail()
}

// detail is the error's text without its package prefix, as the chat
// loop prints it.
func (e *TooLargeError) detail() string {
	limit := fmt.Sprintf("%d %s", e.Limit, e.Unit)
	if e.Unit == "bytes" {
		limit = byteSize(e.Limit)
	}
	s := fmt.Sprintf("%s exceeds %s, the most the client reads", e.What, limit)
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	return s
}

// Is matches [ErrTooLarge].
func (e *TooLargeError) Is(target error) bool { return e != nil && target == ErrTooLarge }

// byteSize formats n bytes in the largest binary unit dividing it.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

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
