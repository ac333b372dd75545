package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// MaxErrorBody caps how much of an error response is read.
const MaxErrorBody = 1 << 20

// maxIdleConnsPerHost is the keep-alive pool size of [HTTPClient]'s
// default transport: calls go to one API host concurrently.
const maxIdleConnsPerHost = 64

// Config configures a [Client]. Provider is required; the zero value of
// every other field selects its documented default.
type Config struct {
	// Provider is the ProviderError.Provider of every failure and the
	// prefix of every log message and cancellation error.
	Provider string
	// HTTPClient sends the requests; nil means a client over a clone of
	// http.DefaultTransport whose pool keeps 64 idle connections per
	// host.
	HTTPClient *http.Client
	// Header is set on every request after Content-Type and Accept: the
	// key header and other fixed headers of the mapping.
	Header http.Header
	// APIKey is redacted from every error message and log record; wire
	// does not send it (put it in Header).
	APIKey string
	// ExtraHeaders are set on every request after Header, overriding it,
	// Content-Type and Accept. Their values are redacted like APIKey.
	ExtraHeaders map[string]string
	// Logger receives debug records of each exchange; nil discards.
	Logger *slog.Logger
	// CancelCause reports a caller's cancellation with context.Cause
	// rather than ctx.Err (and treats a cause other than
	// DeadlineExceeded as a cancellation).
	CancelCause bool
}

// Client sends the requests of one provider mapping.
type Client struct {
	provider    string
	http        *http.Client
	header      http.Header
	extra       map[string]string
	secrets     []string
	log         *slog.Logger
	cancelCause bool
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	c := &Client{provider: cfg.Provider, http: cfg.HTTPClient, header: cfg.Header, extra: cfg.ExtraHeaders,
		log: cfg.Logger, cancelCause: cfg.CancelCause}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = maxIdleConnsPerHost
		c.http = &http.Client{Transport: t}
	}
	if cfg.APIKey != "" {
		c.secrets = append(c.secrets, cfg.APIKey)
	}
	for _, v := range cfg.ExtraHeaders {
		c.secrets = append(c.secrets, v)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// WithTimeout bounds ctx by d when ctx has no deadline: d == 0 means def,
// a negative d no bound. A caller's deadline always wins.
func WithTimeout(ctx context.Context, d, def time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d < 0 {
		return ctx, func() {}
	}
	if d == 0 {
		d = def
	}
	return context.WithTimeout(ctx, d)
}

// NewRequest builds a request for url with body (a JSON body when
// non-nil), the given Accept header, Config.Header and
// Config.ExtraHeaders. It returns the error of
// http.NewRequestWithContext unmapped.
func (c *Client) NewRequest(ctx context.Context, method, url string, body []byte, accept string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", accept)
	for k, v := range c.header {
		hreq.Header[k] = slices.Clone(v)
	}
	for k, v := range c.extra {
		hreq.Header.Set(k, v)
	}
	return hreq, nil
}

// Send sends hreq and returns the response, whatever its status, after a
// debug record of the exchange (op, the attrs, status, duration). A
// failure to get a response is mapped by [Client.TransportError]; attrs
// then go to its log record too.
func (c *Client) Send(ctx context.Context, op string, hreq *http.Request, attrs ...any) (*http.Response, error) {
	start := time.Now()
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, c.TransportError(ctx, op, err, attrs...)
	}
	c.log.DebugContext(ctx, c.provider+": exchange", logArgs(op, attrs, "status", resp.StatusCode, "duration", time.Since(start))...)
	return resp, nil
}

// ReadErrorBody reads at most [MaxErrorBody] bytes of a failed
// response's body and closes it.
func ReadErrorBody(resp *http.Response) []byte {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return data
}

// TransportError maps a failure to get or read a response. The caller's
// own cancellation comes back as the context error, wrapped as
// "llm: <provider> <op>: ..." and uncategorized, so callers and the retry
// loop see it; anything else, this call's timeouts included, is a
// *llm.ProviderError in provider_unavailable whose cause has the redacted
// text of err and still unwraps to its net.Error or context error. The
// failure is logged (op, the attrs, the redacted error).
func (c *Client) TransportError(ctx context.Context, op string, err error, attrs ...any) error {
	cerr := ctx.Err()
	if c.cancelCause {
		cerr = context.Cause(ctx)
	}
	if cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return fmt.Errorf("llm: %s %s: %w", c.provider, op, cerr)
	}
	msg := c.Redact(err.Error())
	c.log.DebugContext(ctx, c.provider+": transport failure", logArgs(op, attrs, "error", msg)...)
	return c.Fail(op, errcat.ProviderUnavailable, 0, "", "transport failure", &redactedError{msg: msg, err: transportCause(err)})
}

// Fail builds a *llm.ProviderError of this provider with a redacted
// message.
func (c *Client) Fail(op string, cat errcat.Category, status int, code, msg string, cause error) *llm.ProviderError {
	return &llm.ProviderError{Cat: cat, Provider: c.provider, Op: op, StatusCode: status, Code: code,
		Message: c.Redact(msg), Err: cause}
}

// Redact replaces every secret in s.
func (c *Client) Redact(s string) string { return llm.Redact(s, c.secrets...) }

// Redacted returns an error whose text is err's with the secrets redacted
// and which unwraps to cause (nil for none).
func (c *Client) Redacted(err, cause error) error {
	return &redactedError{msg: c.Redact(err.Error()), err: cause}
}

func logArgs(op string, attrs []any, more ...any) []any {
	args := make([]any, 0, 2+len(attrs)+len(more))
	args = append(args, "op", op)
	args = append(args, attrs...)
	return append(args, more...)
}

// redactedError stands for an error whose text may carry a secret: Error
// is the redacted text, Unwrap still reaches timeouts and net errors for
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// transportCause keeps the structured cause of a transport error: the
// first net.Error of its chain (a *url.Error is one), else what err
// wraps.
func transportCause(err error) error {
	var ne net.Error
	if errors.As(err, &ne) {
		return ne
	}
	return errors.Unwrap(err)
}

// MaxRetryAfter bounds the wait a Retry-After may ask for: a longer one
// is clamped to it, so that a caller told to wait "a very long time"
// hears that (a day), never that it may retry at once.
const MaxRetryAfter = 24 * time.Hour

// RetryAfter parses a Retry-After header value (RFC 9110 §10.2.3):
// delay seconds (digits, possibly with a fraction) or an HTTP date. A
// wait over [MaxRetryAfter] (however large, or a date that far ahead) is
// MaxRetryAfter. An empty or unreadable value (a sign, an exponent, Inf,
// NaN, words), zero, or a date not in the future gives 0: no wait asked.
func RetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if delaySeconds(v) {
		// Digits only: ParseFloat fails at most with ErrRange (+Inf) for
		// hundreds of digits. Compared in seconds before the conversion,
		// which would overflow time.Duration (to a negative wait).
		n, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return 0
		case n > MaxRetryAfter.Seconds():
			return MaxRetryAfter
		case n > 0:
			return time.Duration(n * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return min(d, MaxRetryAfter)
		}
	}
	return 0
}

// delaySeconds reports whether v is digits with an optional fraction
// ("7", "1.5"): the delay-seconds form, leniently.
func delaySeconds(v string) bool {
	intPart, frac, dot := strings.Cut(v, ".")
	return allDigits(intPart) && (!dot || allDigits(frac))
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
