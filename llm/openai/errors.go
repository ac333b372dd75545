package openai

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// wireError is what an error body says: the members of
// {"error":{"code","type","param","message","status"}} (or
// {"error":"message"}, {"message":...}, a one-element array of either,
// or the plain text of a body that is not JSON).
type wireError struct {
	code, typ, param, msg, status string
}

// maxPlainError bounds the message taken from an error body that is not
// JSON.
const maxPlainError = 512

// statusError maps a non-2xx response to its §7 category (§8.1.3). A
// Retry-After (seconds or an HTTP date) or retry-after-ms header gives
// RetryAfter whatever the status.
func (p *Provider) statusError(op string, resp *http.Response, body []byte) error {
	f := errorFields(body)
	status := resp.StatusCode
	cat := errorCategory(status, f)
	msg := f.msg
	if msg == "" {
		msg = http.StatusText(status)
	}
	code := f.code
	if code == "" {
		code = f.typ
	}
	e := p.fail(op, cat, status, code, msg, nil)
	e.RetryAfter = retryAfter(resp.Header)
	return e
}

// errorCategory maps an error's HTTP status (the response's, or the one
// an in-band error object names) and its fields onto a §7 category.
// Status 0 (an in-band error naming no status) is provider_unavailable.
func errorCategory(status int, f wireError) errcat.Category {
	lower := strings.ToLower(f.code + " " + f.typ + " " + f.msg)
	switch {
	case isQuota(f):
		// An account out of credit (OpenAI's 429 insufficient_quota,
		// OpenRouter's 402): an account-level access failure, as §8.2.3
		// maps Anthropic's billing_error; retrying cannot succeed.
		return errcat.ProviderAuthentication
	case status == 401 || status == 402 || status == 403:
		return errcat.ProviderAuthentication
	case status == 404 && strings.Contains(lower, "model"):
		return errcat.ProviderInvalidModel
	case status == 404:
		return errcat.ProviderUnavailable
	case status == 429:
		return errcat.ProviderRateLimit
	case status == 503 && (strings.Contains(lower, "not_loaded") || strings.Contains(lower, "not loaded") ||
		strings.Contains(lower, "loading") || strings.Contains(lower, "model_not_ready")):
		return errcat.ProviderModelNotLoaded
	case status >= 500 || status == 408 || status == 0:
		return errcat.ProviderUnavailable
	case status == 400 && contentBlockRejection(f):
		return errcat.ProviderUnsupportedContentBlock
	}
	return errcat.ProviderInvalidRequest
}

// isQuota reports whether an error says the account is out of quota or
// credit (not a transient rate limit).
func isQuota(f wireError) bool {
	for _, s := range []string{f.code, f.typ} {
		switch strings.ToLower(s) {
		case "insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "insufficient_credits":
			return true
		}
	}
	return false
}

// inbandError maps an error object answered inside a 200 (a stream's
// data event, or a non-streamed body holding "error") as the same error
// answered with an HTTP status would be: the status comes from a numeric
// code, a gRPC-style status, or a known code or type; an error naming
// none of these is provider_unavailable.
func inbandError(data []byte, op string) *llm.ProviderError {
	f := errorFields(data)
	status := inbandStatus(f)
	msg := f.msg
	if msg == "" {
		msg = "the provider reported an error"
		if status != 0 {
			msg += " (" + strconv.Itoa(status) + " " + http.StatusText(status) + ")"
		}
	}
	code := f.code
	if code == "" {
		code = f.typ
	}
	return &llm.ProviderError{Cat: errorCategory(status, f), Provider: providerName, Op: op, Code: code, Message: msg}
}

// inbandStatus is the HTTP status an in-band error object stands for, or
// 0 when it names none.
func inbandStatus(f wireError) int {
	if n, err := strconv.Atoi(strings.TrimSpace(f.code)); err == nil && n >= 400 && n <= 599 {
		return n
	}
	switch strings.ToUpper(f.status) {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return 400
	case "UNAUTHENTICATED":
		return 401
	case "PERMISSION_DENIED":
		return 403
	case "NOT_FOUND":
		return 404
	case "RESOURCE_EXHAUSTED":
		return 429
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return 500
	case "UNAVAILABLE":
		return 503
	case "DEADLINE_EXCEEDED":
		return 504
	}
	for _, s := range []string{f.code, f.typ} {
		switch strings.ToLower(s) {
		case "rate_limit_exceeded", "rate_limit_error", "ratelimiterror", "tokens", "requests":
			return 429
		case "invalid_request_error", "badrequesterror", "context_length_exceeded", "string_above_max_length",
			"invalid_value", "invalid_prompt", "unprocessableentityerror":
			return 400
		case "authentication_error", "invalid_api_key", "authenticationerror":
			return 401
		case "permission_error", "permissiondeniederror":
			return 403
		case "model_not_found", "notfounderror":
			return 404
		case "server_error", "internal_error", "internalservererror", "api_error", "apierror":
			return 500
		case "overloaded_error", "service_unavailable", "serviceunavailableerror":
			return 503
		case "timeout", "timeout_error", "apitimeouterror":
			return 504
		}
	}
	return 0
}

// retryAfter reads the wait an error response asks for: retry-after-ms
// (milliseconds, Azure OpenAI and the OpenAI SDKs) first, then
// Retry-After (seconds or an HTTP date, see [wire.RetryAfter]); 0 when
// neither gives a positive wait. A wait over [wire.MaxRetryAfter] is
// clamped to it.
func retryAfter(h http.Header) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e300 {
			if ms/1000 > wire.MaxRetryAfter.Seconds() {
				return wire.MaxRetryAfter
			}
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return wire.RetryAfter(h.Get("Retry-After"))
}

// contentBlockRejection reports whether a 400 error says the model
// rejected a content block (an image, audio or media type, or a source
// variant). It goes by the error's code and param and by content words
// in the message standing as words outside quotes: an error about a tool
// or schema (param tools[...], a function or schema code, "Invalid
// schema for function 'describe_image'") is not one, whatever the names
// it quotes.
func contentBlockRejection(f wireError) bool {
	code, param := strings.ToLower(f.code+" "+f.typ), strings.ToLower(f.param)
	msg := strings.ToLower(f.msg)
	for _, p := range []string{"tools", "functions", "tool_choice", "response_format"} {
		if strings.HasPrefix(param, p) {
			return false
		}
	}
	for _, k := range []string{"function", "schema", "tool"} {
		if strings.Contains(code, k) {
			return false
		}
	}
	if strings.HasPrefix(msg, "invalid schema") {
		return false
	}
	for _, k := range []string{"image", "audio", "media", "mime", "multimodal", "vision", "modality", "content_block"} {
		if strings.Contains(code, k) || strings.Contains(param, k) {
			return true
		}
	}
	msg = unquoted(msg)
	for _, k := range []string{"image", "images", "image_url", "input_audio", "audio", "media type", "media_type",
		"mime", "mime type", "content block", "content_block", "multimodal", "multi-modal", "vision"} {
		if hasWord(msg, k) {
			return true
		}
	}
	return false
}

// unquoted returns s without its quoted spans ('...', "...", `...`):
// the names an error quotes (a function's, a field's) are not its words.
func unquoted(s string) string {
	var b strings.Builder
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '`':
			quote = r
		case r == '\'':
			// An apostrophe inside a word ("model's", "doesn't") opens
			// no quote.
			if i > 0 && isWordByte(s[i-1]) {
				b.WriteRune(r)
				continue
			}
			quote = r
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// hasWord reports whether w occurs in s not joined to a letter, digit or
// underscore on either side.
func hasWord(s, w string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(w)
		if (i == 0 || !isWordByte(s[i-1])) && (j == len(s) || !isWordByte(s[j])) {
			return true
		}
		off = i + 1
	}
}

// errorFields reads an error body: {"error":{"code","type","param",
// "message","status"}}, {"error":"message"} or {"message":...}, or a
// one-element array of these (Gemini's OpenAI-compatible endpoint). A
// body that is not JSON gives its plain text ([plainErrorText]).
func errorFields(body []byte) wireError {
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(t, &arr) == nil && len(arr) > 0 {
			t = arr[0]
		}
	}
	var w struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(t, &w) != nil {
		return wireError{msg: plainErrorText(body)}
	}
	var e struct {
		Code    json.RawMessage `json:"code"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Message string          `json:"message"`
		Status  string          `json:"status"`
	}
	if json.Unmarshal(w.Error, &e) == nil {
		var param string
		_ = json.Unmarshal(e.Param, &param)
		return wireError{code: rawScalar(e.Code), typ: e.Type, param: param, msg: e.Message, status: e.Status}
	}
	var s string
	if json.Unmarshal(w.Error, &s) == nil {
		return wireError{msg: s}
	}
	return wireError{msg: w.Message}
}

// rawScalar reads a code given as a string or a number; null is "".
func rawScalar(raw json.RawMessage) string {
	var c string
	if json.Unmarshal(raw, &c) == nil {
		return c
	}
	c = string(bytes.TrimSpace(raw))
	if c == "null" {
		return ""
	}
	return c
}

// plainErrorText is the message of an error body that is not JSON: an
// HTML page (a proxy's) gives its <title>, or "" (the caller then uses
// the status text); other text gives its first [maxPlainError] bytes with
// whitespace collapsed, cut on a character boundary. The result is
// always valid UTF-8.
func plainErrorText(body []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "<") {
		if i := strings.Index(lower, "<title"); i >= 0 {
			if j := strings.IndexByte(lower[i:], '>'); j >= 0 {
				rest := s[i+j+1:]
				if k := strings.Index(strings.ToLower(rest), "</title"); k >= 0 {
					return bounded(html.UnescapeString(rest[:k]), 200)
				}
			}
		}
		return ""
	}
	return bounded(s, maxPlainError)
}

// bounded collapses the whitespace of s and cuts it to at most n bytes on
// a character boundary.
func bounded(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD")
}
