package anthropic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// DefaultBaseURL is the Anthropic API root used when Config.BaseURL is
// empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is the anthropic-version header sent when
// Config.Version is empty.
const DefaultVersion = "2023-06-01"

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Minute

// Wire paths, relative to the base URL. They are Anthropic API
// identifiers and must not change.
const (
	// MessagesPath is the Messages endpoint (POST).
	MessagesPath = "/v1/messages"
	// ModelsPath is the model catalog; Ready probes ModelsPath+"/<model>".
	ModelsPath = "/v1/models"
)

// Size limits on what is read from the wire.
const (
	maxResponseBody = 64 << 20
	maxErrorBody    = 1 << 20
)

// providerName is the ProviderError.Provider of every failure.
const providerName = "anthropic"

// ErrInvalidConfig is matched by the error [New] returns for an invalid
// [Config].
var ErrInvalidConfig = errors.New("anthropic: invalid config")

// StructuredOutputMode selects how a call with a response schema
// constrains the model (llm-provider §8.2.5).
type StructuredOutputMode string

// The structured-output paths.
const (
	// StructuredNative sends output_config.format = {type: json_schema,
	// schema} and validates the text reply (§8.2.5). The default.
	StructuredNative StructuredOutputMode = "native"
	// StructuredTool is the preferred §8.2.5.1 fallback for models
	// without output_config: a synthetic tool named [SyntheticToolName]
	// whose input_schema is the response schema, forced with tool_choice;
	// its tool_use input becomes the reply. When the caller supplies tools
	// of its own, the call uses [StructuredPrompt] instead (a forced
	// synthetic tool would override the caller's tool intent).
	StructuredTool StructuredOutputMode = "tool"
	// StructuredPrompt is the last-resort §8.2.5.1 fallback: a schema
	// directive appended to the system prompt ([llm.AugmentForSchema]),
	// the request otherwise unmodified.
	StructuredPrompt StructuredOutputMode = "prompt"
)

// SyntheticToolName is the name of the synthetic tool of the
// [StructuredTool] path. It is a wire identifier: it must not change.
const SyntheticToolName = "structured_output"

// syntheticToolDescription is the synthetic tool's description.
const syntheticToolDescription = "Return the final answer as this tool's input, conforming to its input schema."

// Config configures a [Provider]. Only Model is required; the zero value
// of every other field selects the documented default.
type Config struct {
	// BaseURL is the API root without the version segment; "" means
	// [DefaultBaseURL]. Requests go to BaseURL+[MessagesPath].
	BaseURL string
	// APIKey is sent as the x-api-key header when non-empty. It never
	// appears in errors or logs.
	APIKey string
	// Model is the bound model identifier (the wire "model").
	Model string
	// Version is the anthropic-version header; "" means
	// [DefaultVersion].
	Version string
	// ExtraHeaders are added to every request (for example
	// anthropic-beta). Their values never appear in errors or logs.
	ExtraHeaders map[string]string
	// HTTPClient sends the requests; nil means a client with a pooled
	// transport owned by the Provider (connections are reused across
	// calls).
	HTTPClient *http.Client
	// Timeout bounds a call whose context has no deadline; 0 means
	// [DefaultTimeout], a negative value none. A caller's deadline always
	// wins.
	Timeout time.Duration
	// StructuredOutput selects the structured-output path; "" means
	// [StructuredNative].
	StructuredOutput StructuredOutputMode
	// Logger receives debug records of each exchange (operation, path,
	// status, duration; never headers, keys or bodies). nil discards.
	Logger *slog.Logger
}

// Validate reports a configuration error wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.Model == "" {
		return fmt.Errorf("%w: Model is required", ErrInvalidConfig)
	}
	switch c.StructuredOutput {
	case "", StructuredNative, StructuredTool, StructuredPrompt:
	default:
		return fmt.Errorf("%w: unknown StructuredOutput %q", ErrInvalidConfig, c.StructuredOutput)
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: BaseURL must be an absolute http(s) URL", ErrInvalidConfig)
		}
	}
	for k := range c.ExtraHeaders {
		if k == "" {
			return fmt.Errorf("%w: empty ExtraHeaders name", ErrInvalidConfig)
		}
	}
	return nil
}

// Provider is the Anthropic Messages mapping (llm-provider §8.2). It
// implements [llm.Provider]; it does not implement [llm.Streamer] (§8.2
// defines no streaming), so [llm.Complete] rejects stream-set calls
// before sending. A Provider is safe for concurrent use: calls go to the
// wire concurrently over pooled connections, never serialized.
type Provider struct {
	cfg     Config
	base    string
	version string
	client  *http.Client
	secrets []string
	log     *slog.Logger
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg, or an error wrapping
// [ErrInvalidConfig].
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), version: cfg.Version, client: cfg.HTTPClient, log: cfg.Logger}
	if p.base == "" {
		p.base = DefaultBaseURL
	}
	if p.version == "" {
		p.version = DefaultVersion
	}
	if p.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		p.client = &http.Client{Transport: t}
	}
	if p.cfg.StructuredOutput == "" {
		p.cfg.StructuredOutput = StructuredNative
	}
	if cfg.APIKey != "" {
		p.secrets = append(p.secrets, cfg.APIKey)
	}
	for _, v := range cfg.ExtraHeaders {
		p.secrets = append(p.secrets, v)
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Model returns the bound model identifier.
func (p *Provider) Model() string { return p.cfg.Model }

// Ready is the §5 ready() probe: GET {BaseURL}/v1/models/{Model}. A 2xx
// answer means the key is accepted and the model is in the catalog; a
// failure maps like a Complete failure (§8.2.3), so an unknown model is
// provider_invalid_model and a bad key provider_authentication.
func (p *Provider) Ready(ctx context.Context) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	resp, err := p.do(ctx, "ready", http.MethodGet, ModelsPath+"/"+url.PathEscape(p.cfg.Model), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// Complete performs one atomic Messages call (§8.2): it validates req
// (the llm rules, then this mapping's: max_tokens required, seed and the
// penalties unsupported, stream unsupported, managed extras), builds the
// byte-stable body ([Provider.RequestBody]), sends it once and maps the
// answer ([ParseResponse]) or the failure ([ParseError]). With a response
// schema it fills Response.Parsed or fails with a
// *llm.StructuredOutputError. req is not modified.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	b, err := p.build(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	hresp, err := p.do(ctx, "complete", http.MethodPost, MessagesPath, b.body)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, maxResponseBody+1))
	if err != nil {
		return nil, p.transportError(ctx, "complete", err)
	}
	if len(data) > maxResponseBody {
		return nil, p.fail("complete", errcat.ProviderInvalidResponse, hresp.StatusCode, "", "response body too large", nil)
	}
	resp, err := ParseResponse(data)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.Op, pe.StatusCode = "complete", hresp.StatusCode
			pe.Message = llm.Redact(pe.Message, p.secrets...)
		}
		return nil, err
	}
	if b.synthetic {
		unwrapSynthetic(resp)
	}
	if err := llm.ParseStructured(resp, req.ResponseSchema); err != nil {
		return nil, err
	}
	return resp, nil
}

func (p *Provider) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || p.cfg.Timeout < 0 {
		return ctx, func() {}
	}
	d := p.cfg.Timeout
	if d == 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// do sends one request and returns the response when its status is 2xx;
// otherwise it reads the body and returns the mapped error.
func (p *Provider) do(ctx context.Context, op, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return nil, p.fail(op, errcat.ProviderInvalidRequest, 0, "", "cannot build the HTTP request", nil)
	}
	h := hreq.Header
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Accept", "application/json")
	h.Set("anthropic-version", p.version)
	if p.cfg.APIKey != "" {
		h.Set("x-api-key", p.cfg.APIKey)
	}
	for k, v := range p.cfg.ExtraHeaders {
		h.Set(k, v)
	}
	start := time.Now()
	resp, err := p.client.Do(hreq)
	if err != nil {
		return nil, p.transportError(ctx, op, err)
	}
	p.log.DebugContext(ctx, "anthropic: exchange", "op", op, "path", path, "status", resp.StatusCode, "duration", time.Since(start))
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	pe := ParseError(resp.StatusCode, resp.Header, data)
	pe.Op = op
	pe.Message = llm.Redact(pe.Message, p.secrets...)
	var ae *APIError
	if errors.As(pe.Err, &ae) {
		ae.Message = llm.Redact(ae.Message, p.secrets...)
		ae.Body = []byte(llm.Redact(string(ae.Body), p.secrets...))
	}
	return nil, pe
}

// transportError maps a failure to get or read a response: the caller's
// cancellation passes through uncategorized (never retried); anything
// else, including this provider's own default timeout, is
// provider_unavailable.
func (p *Provider) transportError(ctx context.Context, op string, err error) error {
	if cerr := context.Cause(ctx); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return fmt.Errorf("llm: anthropic %s: %w", op, cerr)
	}
	msg := llm.Redact(err.Error(), p.secrets...)
	p.log.DebugContext(ctx, "anthropic: transport failure", "op", op, "error", msg)
	return p.fail(op, errcat.ProviderUnavailable, 0, "", "transport failure", &redactedError{msg: msg, err: transportCause(err)})
}

// fail builds a *llm.ProviderError with a redacted message.
func (p *Provider) fail(op string, cat errcat.Category, status int, code, msg string, cause error) *llm.ProviderError {
	return &llm.ProviderError{Cat: cat, Provider: providerName, Op: op, StatusCode: status, Code: code,
		Message: llm.Redact(msg, p.secrets...), Err: cause}
}

// redactedError stands for a transport error whose text may carry a
// secret (a URL with credentials): Error is the redacted text, Unwrap
// still reaches the net.Error or context error for errors.Is/As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// transportCause keeps the structured cause of a transport error and
// drops the *url.Error wrapper, whose text repeats the URL.
func transportCause(err error) error {
	var ne net.Error
	if errors.As(err, &ne) {
		return ne
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return nil
}
