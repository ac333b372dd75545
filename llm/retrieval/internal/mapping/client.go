// Package mapping is the machinery the retrieval wire mappings
// (llm/retrieval/tei, jina, openai, cohere) share on top of
// llm/internal/wire: sending a JSON request and mapping a failed status
// onto the §7 categories, resolving extras against managed fields,
// decoding vectors, validating and sorting rerank results, and the §8
// batch chunk-and-stitch of embedding calls. Each mapping keeps only its
// wire shapes.
package mapping

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 2 * time.Minute

// maxBody caps a success body: a 2 048-vector response of 3 072
// dimensions is about 150 MB of JSON at worst.
const maxBody = 256 << 20

// Config configures a [Client].
type Config struct {
	Provider     string
	BaseURL      string // origin, no trailing slash needed
	APIKey       string // sent as a Bearer token when non-empty
	ExtraHeaders map[string]string
	HTTPClient   *http.Client
	Timeout      time.Duration
	Logger       *slog.Logger
}

// Client sends the requests of one mapping; its Decoder decodes and
// checks the responses.
type Client struct {
	Decoder
	provider string
	base     string
	timeout  time.Duration
	wire     *wire.Client
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	h := http.Header{}
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	return &Client{Decoder: Decoder{Provider: cfg.Provider}, provider: cfg.Provider, base: strings.TrimRight(cfg.BaseURL, "/"), timeout: cfg.Timeout,
		wire: wire.New(wire.Config{Provider: cfg.Provider, HTTPClient: cfg.HTTPClient, Header: h, APIKey: cfg.APIKey,
			ExtraHeaders: cfg.ExtraHeaders, Logger: cfg.Logger})}
}

// Provider names the mapping.
func (c *Client) Provider() string { return c.provider }

// Post sends body (a JSON document) to base+path and returns the body of
// a 2xx response. A failed status is mapped by [Client.StatusError], a
// transport failure or unreadable body is provider_unavailable, the
// caller's cancellation the context error.
func (c *Client) Post(ctx context.Context, op, path string, body []byte) ([]byte, error) {
	return c.do(ctx, op, http.MethodPost, path, body)
}

// Get sends a GET to base+path and returns the body of a 2xx response.
func (c *Client) Get(ctx context.Context, op, path string) ([]byte, error) {
	return c.do(ctx, op, http.MethodGet, path, nil)
}

func (c *Client) do(ctx context.Context, op, method, path string, body []byte) ([]byte, error) {
	ctx, cancel := wire.WithTimeout(ctx, c.timeout, DefaultTimeout)
	defer cancel()
	hreq, err := c.wire.NewRequest(ctx, method, c.base+path, body, "application/json")
	if err != nil {
		return nil, c.wire.Fail(op, errcat.ProviderInvalidRequest, 0, "", "cannot build the request", c.wire.Redacted(err, nil))
	}
	resp, err := c.wire.Send(ctx, op, hreq, "path", path)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.StatusError(op, resp.StatusCode, resp.Header, wire.ReadErrorBody(resp))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, c.wire.TransportError(ctx, op, err, "path", path)
	}
	return data, nil
}

// StatusError maps a non-2xx answer onto the §7 categories shared by the
// §8 mappings: 401/403 provider_authentication, 404
// provider_invalid_model (the routes are fixed, so a 404 is the unknown
// bound model), 429 provider_rate_limit (with Retry-After), a 503 saying
// the model is loading provider_model_not_loaded, other 5xx and 408
// provider_unavailable, every other status (400, 413, 422, ...)
// provider_invalid_request.
func (c *Client) StatusError(op string, status int, h http.Header, body []byte) *llm.ProviderError {
	code, msg := errorText(body)
	lower := strings.ToLower(code + " " + msg)
	var cat errcat.Category
	switch {
	case status == 401 || status == 403:
		cat = errcat.ProviderAuthentication
	case status == 404:
		cat = errcat.ProviderInvalidModel
	case status == 429:
		cat = errcat.ProviderRateLimit
	case status == 503 && (strings.Contains(lower, "not loaded") || strings.Contains(lower, "not_loaded") || strings.Contains(lower, "loading")):
		cat = errcat.ProviderModelNotLoaded
	case status >= 500 || status == 408:
		cat = errcat.ProviderUnavailable
	default:
		cat = errcat.ProviderInvalidRequest
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := c.wire.Fail(op, cat, status, code, msg, nil)
	if cat == errcat.ProviderRateLimit {
		e.RetryAfter = wire.RetryAfter(h.Get("Retry-After"))
	}
	return e
}

// errorText reads the code and message of the error bodies the mappings
// see: {"error":{"message","type"|"code"}}, {"error":"..."},
// {"message":"..."}, {"detail":"...","code":"..."} (Jina), or text.
func errorText(body []byte) (code, msg string) {
	var w struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Code    json.RawMessage `json:"code"`
		Type    string          `json:"error_type"`
	}
	if json.Unmarshal(body, &w) != nil {
		return "", truncate(strings.TrimSpace(string(body)))
	}
	code = str(w.Code)
	if code == "" {
		code = w.Type
	}
	var inner struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	switch {
	case str(w.Error) != "":
		msg = str(w.Error)
	case json.Unmarshal(w.Error, &inner) == nil && inner.Message != "":
		msg = inner.Message
		if c := str(inner.Code); c != "" {
			code = c
		} else if inner.Type != "" {
			code = inner.Type
		}
	case w.Message != "":
		msg = w.Message
	case str(w.Detail) != "":
		msg = str(w.Detail)
	case len(w.Detail) > 0:
		msg = string(w.Detail)
	}
	return code, truncate(msg)
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func truncate(s string) string {
	if len(s) > 512 {
		return s[:512]
	}
	return s
}

// Fail returns a *llm.ProviderError of this mapping with a redacted
// message.
func (c *Client) Fail(op string, cat errcat.Category, msg string, cause error) *llm.ProviderError {
	return c.wire.Fail(op, cat, 0, "", msg, cause)
}

// Decoder decodes and checks the responses of one mapping; its failures
// are provider_invalid_response errors naming Provider. Their messages
// are the decoder's own text, never the provider's.
type Decoder struct {
	Provider string
}

// Invalid returns the provider_invalid_response failure of op.
func (d Decoder) Invalid(op, format string, args ...any) *llm.ProviderError {
	return d.InvalidCause(op, fmt.Sprintf(format, args...), nil)
}

// InvalidCause returns the provider_invalid_response failure of op with
// a cause.
func (d Decoder) InvalidCause(op, msg string, cause error) *llm.ProviderError {
	return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: d.Provider, Op: op, Message: msg, Err: cause}
}

// Extras resolves a call's extras against the fields the mapping
// manages on this call (llm-provider §6 Managed-field collision): the
// untouched pass-through keys, and the merged list of each list-shaped
// managed field. A conflicting scalar fails pre-send
// (provider_invalid_request, matching llm.ErrManagedField).
func (c *Client) Extras(op string, extras map[string]any, managed ...llm.ManagedField) (map[string]any, map[string][]string, error) {
	pass, lists, err := llm.ResolveExtras(extras, managed)
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		pe.Provider, pe.Op = c.provider, op
	}
	return pass, lists, err
}

// Body encodes a request body: the extras first, then the mapping's own
// fields over them. encoding/json writes the keys sorted, so a body is
// the same bytes for the same call.
func Body(pass map[string]any, fields map[string]any) ([]byte, error) {
	m := make(map[string]any, len(pass)+len(fields))
	for k, v := range pass {
		m[k] = v
	}
	for k, v := range fields {
		m[k] = v
	}
	return json.Marshal(m)
}
