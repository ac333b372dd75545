package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonexact"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// Error codes of the JSON error envelope. They are wire identifiers and
// must not change.
const (
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeBadRequest       = "invalid_request"
	CodeBodyTooLarge     = "body_too_large"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooManyStreams   = "too_many_streams"
	// CodeLastEventIDUnknown is the code of the error event that ends
	// an event stream resumed from an id the session never had.
	CodeLastEventIDUnknown = "last_event_id_unknown"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal_error"
	// CodeForbidden: the tenant is not authorized for the request (a
	// direct tool request Config.DirectTools does not allow).
	CodeForbidden = "forbidden"
	// CodeRequestTimeout: the request body did not arrive within the
	// server's read timeout (408).
	CodeRequestTimeout = "request_timeout"
)

// Error is an API failure: an HTTP status, a stable code and a safe
// message (never a secret, a stack or an internal error text).
type Error struct {
	Status  int
	Code    string
	Message string
	// Param names the request field the message is about, when it names
	// one (the OpenAI error shape's "param"; the REST envelope has none).
	Param string
	// Err is the cause, logged but never sent.
	Err error
	// RetryAfter, when positive, is sent as the Retry-After header
	// (seconds).
	RetryAfter int
	// Final says that sending the request again cannot help, whatever
	// the status (a resumed turn that failed after its decision took
	// effect: the same decision is refused): the OpenAI endpoints send
	// X-Should-Retry: false and no Retry-After, so that the official
	// SDKs, which retry a 5xx on their own, do not send it again.
	Final bool
}

// Error formats the failure.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("server: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("server: %s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errInvalidConfigf returns a configuration error wrapping
// ErrInvalidConfig.
func errInvalidConfigf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// badParam is badRequest about the request field param.
func badParam(param, format string, args ...any) *Error {
	e := badRequest(format, args...)
	e.Param = param
	return e
}

func notFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// errorBody is the JSON error envelope of the REST API.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// handlerFunc is a handler that returns its failure; serve maps it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// writeError renders err as the JSON error envelope. Errors that are not
// *Error are internal: the client sees a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.apiError(r, err)
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	var body errorBody
	body.Error.Code, body.Error.Message = ae.Code, ae.Message
	writeJSON(w, ae.Status, body)
}

// apiError classifies a handler's failure as an *Error (an internal one
// for anything else, a body-too-large one for an exceeded body limit) and
// logs server-side failures with their cause.
func (s *Server) apiError(r *http.Request, err error) *Error {
	var ae *Error
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, session.ErrUnavailable):
		// A store the server could not reach (its database down or
		// restarting; the stores mark it so): transient, as readiness
		// says meanwhile, never a 500 that reads as a bug and that
		// clients and proxies do not retry.
		ae = &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: retryAfterSeconds,
			Message: "the server's store is unavailable for now: try again in a moment", Err: err}
	default:
		ae = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Err: err}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		ae = &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
			Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
	}
	switch {
	case ae.Status == http.StatusServiceUnavailable && (ae.RetryAfter > 0 || ae.Final):
		// Transient, and the client is told when to retry (a busy
		// session, an upstream that is down for now), or that the
		// failure came after the request took effect (Final): a
		// warning, not an error an operator must act on.
		s.log.WarnContext(r.Context(), "server: request failed, retryable", "path", r.URL.Path, "code", ae.Code, "error", err)
	case ae.Status >= 500:
		s.log.ErrorContext(r.Context(), "server: request failed", "path", r.URL.Path, "code", ae.Code, "error", err)
	}
	return ae
}

// writeJSON writes v as the JSON response body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	answerDeadline(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

var newline = []byte{'\n'}

// answerDeadline gives the response about to be written a write deadline
// of its own (answerWriteTimeout from now): the connection's, set by the
// http.Server's WriteTimeout when the request was read, has passed when
// a turn ran longer than it, and the answer would be lost, the client
// reading an empty reply while the log shows a status.
func answerDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWriteTimeout))
}

// answerWriteTimeout bounds the writing of a JSON response (an SSE
// stream's frames have sseWriteTimeout each).
const answerWriteTimeout = 30 * time.Second

// writeRawJSON writes raw, a value's encoding, as writeJSON writes the
// value (with json.Encoder's trailing newline).
func writeRawJSON(w http.ResponseWriter, status int, raw json.RawMessage) {
	answerDeadline(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
	_, _ = w.Write(newline)
}

// readBody reads the request body (already size-limited). A failed read
// is the client's fault, never a 500: an exceeded limit is returned as
// is (apiError answers 413), anything else as bodyReadError classifies
// it.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyReadError(err)
	}
	return body, nil
}

// discardBody reads and drops the body of a request whose handler takes
// none but may wait (for a session another turn holds): net/http
// notices a client that closes its connection only once the body has
// been read, so without this a client that left while the request
// waited would not cancel it, and the request would still take effect.
func discardBody(r *http.Request) error {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return bodyReadError(err)
	}
	return nil
}

// statusClientClosed is the status counted (nothing is written) for a
// request whose client closed its connection while the request waited,
// and that therefore did nothing: nginx's 499.
const statusClientClosed = 499

// clientGone reports whether err is the failure of a request whose
// client went away while it waited (r's context ended, and err is that
// cancellation): nothing to answer, and not a server failure.
func clientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errcat.Of(err) == errcat.InvocationCancelled)
}

// bodyReadError classifies a failed read of a request body: the
// *http.MaxBytesError of an exceeded limit as is (413); a read that ran
// past the server's read timeout (a body sent too slowly) 408
// request_timeout; anything else (a body shorter than its
// Content-Length, a connection closed while sending it) 400.
func bodyReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return &Error{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout,
			Message: "the request body did not arrive in time", Err: err}
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest,
		Message: "the request body could not be read: it ended before its declared length, or the connection failed", Err: err}
}

// readErrors remembers the error of a failed read (io.EOF aside), so
// that a decoder's failure can be told from the body's.
type readErrors struct {
	r   io.Reader
	err error
}

func (re *readErrors) Read(p []byte) (int, error) {
	n, err := re.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && re.err == nil {
		re.err = err
	}
	return n, err
}

// decodeJSON reads the request body (already size-limited) into v.
// Unknown fields are ignored, as the protocols require, and a key that
// names a field only up to case is one of them (jsonexact).
func decodeJSON(r *http.Request, v any) error {
	body := &readErrors{r: r.Body}
	dec := json.NewDecoder(body)
	// The value as it arrives (a whole body is not waited for: what
	// follows it is checked below, as before), then decoded filtered.
	var raw json.RawMessage
	err := dec.Decode(&raw)
	if err == nil {
		err = json.Unmarshal(jsonexact.Filter(raw, reflect.TypeOf(v)), v)
	}
	if err != nil {
		if body.err != nil {
			return bodyReadError(body.err)
		}
		var ve *llm.ValidationError
		if errors.As(err, &ve) && ve.Field != "" {
			// A message that is JSON but not a message (no role, an
			// unknown block type): say which field, not "malformed".
			return badRequest("invalid message: %s: %s", ve.Field, ve.Reason)
		}
		problem, param := jsonProblem(err)
		return badParam(param, "the body is not valid JSON: %s", problem)
	}
	if dec.More() {
		return badRequest("the body holds more than one JSON value")
	}
	// dec.More stops at the end of what arrived: a body cut short of its
	// Content-Length after a whole JSON value (the client closed the
	// connection) shows only in the read's error.
	if body.err != nil {
		return bodyReadError(body.err)
	}
	return nil
}

// jsonProblem describes a decoding error without echoing input or
// naming Go types: what JSON a field expected, in the API's words.
// param is the field it names ("" for none).
func jsonProblem(err error) (problem, param string) {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset), ""
	case errors.As(err, &te):
		if te.Field == "" {
			return "the body must be a JSON object", ""
		}
		return fmt.Sprintf("%s must be %s", te.Field, jsonKind(te.Type)), te.Field
	}
	return "malformed JSON", ""
}

// jsonKind names the JSON a Go type decodes from ("a string", "an
// array"), for error messages.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

// The request types whose bodies are filtered (jsonexact) before they
// are decoded: the OpenAI endpoints' as their shapes describe them, with
// what is decoded later from raw JSON (messages, input items, content
// parts), so that a field name is exact at every depth.
var (
	completionRequestType = reflect.TypeFor[completionShape]()
	responsesRequestType  = reflect.TypeFor[responsesShape]()
	ohRequestType         = reflect.TypeFor[ohRequest]()
)
