package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// DefaultBaseURL is the Anthropic API root used when Config.BaseURL is
// empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is the anthropic-version header sent when
// Config.Version is empty.
const DefaultVersion = "2023-06-01"

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Minute

// DefaultMaxResponseBytes is the size bound of a reply when
// Config.MaxResponseBytes is 0: 16 MiB.
const DefaultMaxResponseBytes = wire.DefaultMaxResponseBytes

// Wire paths, relative to the base URL. They are Anthropic API
// identifiers and must not change.
const (
	// MessagesPath is the Messages endpoint (POST).
	MessagesPath = "/v1/messages"
	// ModelsPath is the model catalog; Ready probes ModelsPath+"/<model>".
	ModelsPath = "/v1/models"
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
	// MaxResponseBytes bounds what one call reads of the upstream's
	// reply: a non-streamed body; of a stream, each event and the text,
	// thinking and tool input it accumulates (and its bytes in total,
	// event framing included, at four times the bound). 0 means
	// [DefaultMaxResponseBytes]; set a larger value for larger replies.
	// A reply over the bound fails the call with
	// provider_invalid_response ([llm.ErrResponseTooLarge]) as soon as
	// it is read past the bound. Negative is invalid.
	MaxResponseBytes int64
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
	if c.BaseURL != "" && !httpurl.Valid(c.BaseURL) {
		return fmt.Errorf("%w: BaseURL must be an absolute http(s) URL", ErrInvalidConfig)
	}
	for k := range c.ExtraHeaders {
		if k == "" {
			return fmt.Errorf("%w: empty ExtraHeaders name", ErrInvalidConfig)
		}
	}
	if c.MaxResponseBytes < 0 {
		return fmt.Errorf("%w: MaxResponseBytes must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Provider is the Anthropic Messages mapping (llm-provider §8.2). It
// implements [llm.Provider] and [llm.Streamer] (see the package
// documentation on streaming). A Provider is safe for concurrent use: calls go to the
// wire concurrently over pooled connections, never serialized.
type Provider struct {
	cfg      Config
	base     string
	maxReply int64 // the reply bound (Config.MaxResponseBytes or the default)
	wire     *wire.Client
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg, or an error wrapping
// [ErrInvalidConfig].
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), maxReply: wire.MaxResponseBytes(cfg.MaxResponseBytes)}
	if p.base == "" {
		p.base = DefaultBaseURL
	}
	version := cfg.Version
	if version == "" {
		version = DefaultVersion
	}
	if p.cfg.StructuredOutput == "" {
		p.cfg.StructuredOutput = StructuredNative
	}
	h := http.Header{}
	h.Set("anthropic-version", version)
	if cfg.APIKey != "" {
		h.Set("x-api-key", cfg.APIKey)
	}
	// CancelCause: a caller's cancellation is reported with its
	// context.Cause.
	p.wire = wire.New(wire.Config{Provider: providerName, HTTPClient: cfg.HTTPClient, Header: h,
		APIKey: cfg.APIKey, ExtraHeaders: cfg.ExtraHeaders, Logger: cfg.Logger, CancelCause: true})
	return p, nil
}

// Model returns the bound model identifier.
func (p *Provider) Model() string { return p.cfg.Model }

// System returns the provider system identifier observability reports
// (gen_ai.system): "anthropic".
func (p *Provider) System() string { return "anthropic" }

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
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, wire.MaxErrorBody))
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
	b, err := p.build(req, false)
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
	data, err := wire.ReadBody(hresp, p.maxReply)
	if errors.Is(err, llm.ErrResponseTooLarge) {
		return nil, p.wire.TooLarge("complete", hresp.StatusCode, p.maxReply)
	}
	if err != nil {
		return nil, p.wire.TransportError(ctx, "complete", err)
	}
	resp, err := ParseResponse(data)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.Op, pe.StatusCode = "complete", hresp.StatusCode
			pe.Message = p.wire.Redact(pe.Message)
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
	return wire.WithTimeout(ctx, p.cfg.Timeout, DefaultTimeout)
}

// do sends one request and returns the response when its status is 2xx;
// otherwise it reads the body and returns the mapped error.
func (p *Provider) do(ctx context.Context, op, method, path string, body []byte) (*http.Response, error) {
	hreq, err := p.wire.NewRequest(ctx, method, p.base+path, body, "application/json")
	if err != nil {
		return nil, p.fail(op, errcat.ProviderInvalidRequest, 0, "", "cannot build the HTTP request", nil)
	}
	resp, err := p.wire.Send(ctx, op, hreq, "path", path)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	pe := ParseError(resp.StatusCode, resp.Header, wire.ReadErrorBody(resp))
	pe.Op = op
	pe.Message = p.wire.Redact(pe.Message)
	var ae *APIError
	if errors.As(pe.Err, &ae) {
		ae.Message = p.wire.Redact(ae.Message)
		ae.Body = []byte(p.wire.Redact(string(ae.Body)))
	}
	return nil, pe
}

// fail builds a *llm.ProviderError with a redacted message.
func (p *Provider) fail(op string, cat errcat.Category, status int, code, msg string, cause error) *llm.ProviderError {
	return p.wire.Fail(op, cat, status, code, msg, cause)
}

var _ llm.TokenEstimator = (*Provider)(nil)

// EstimateTokens estimates the input tokens m costs on the Messages wire
// (llm.TokenEstimator): 3.5 bytes of text a token (Claude's tokenizer
// counts more tokens than OpenAI's on the same text), 5 tokens of framing
// a message, 1 600 tokens an image (about a 1.15 megapixel image, the
// size Anthropic scales larger ones down to). The agent corrects the sum
// with the prompt tokens reported.
func (p *Provider) EstimateTokens(m *llm.Message) int {
	return llm.TokenRates{BytesPerToken: 3.5, PerMessage: 5, PerImage: 1600}.Estimate(m)
}
