package gemini

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// DefaultBaseURL is the Gemini API root used when Config.BaseURL is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// DefaultAPIVersion is the API version path segment used when
// Config.APIVersion is empty (§8.3: POST /v1beta/models/{model}:generateContent).
const DefaultAPIVersion = "v1beta"

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Minute

// DefaultMaxResponseBytes is the size bound of a reply when
// Config.MaxResponseBytes is 0: 16 MiB.
const DefaultMaxResponseBytes = wire.DefaultMaxResponseBytes

// APIKeyHeader is the request header that carries Config.APIKey. The key
// is never put in a URL, where proxies and access logs would record it.
// It is a wire identifier of the Gemini API and must not change.
const APIKeyHeader = "x-goog-api-key"

// ProviderName is the [llm.ProviderError] Provider value of this mapping.
const ProviderName = "gemini"

// ErrInvalidConfig is matched by the error [New] and [Config.Validate]
// return for an invalid [Config].
var ErrInvalidConfig = errors.New("gemini: invalid config")

// StructuredOutputMode selects how a call with a response schema
// constrains the model (§8.3.5).
type StructuredOutputMode string

// The structured-output paths.
const (
	// StructuredNative sets generationConfig.responseMimeType to
	// "application/json" and generationConfig.responseJsonSchema to the
	// schema (§8.3.5; the default).
	StructuredNative StructuredOutputMode = "native"
	// StructuredPrompt is the §8.3.5.1 prompt-augmentation fallback for
	// models without JSON-Schema-constrained decoding: a directive
	// carrying the schema ([llm.AugmentForSchema]) is appended to the
	// systemInstruction and no response fields are sent. The response
	// is parsed and validated the same way.
	StructuredPrompt StructuredOutputMode = "prompt"
)

// Config configures a [Provider]. Only Model is required; the zero value
// of every other field selects its documented default.
type Config struct {
	// BaseURL is the API root without the version segment; "" means
	// [DefaultBaseURL]. Point it at a proxy or an in-process test server.
	BaseURL string
	// APIVersion is the version path segment; "" means
	// [DefaultAPIVersion].
	APIVersion string
	// APIKey is sent as the [APIKeyHeader] header when non-empty. It never
	// appears in a URL, an error or a log record.
	APIKey string
	// Model is the bound model: an identifier such as "gemini-2.5-flash"
	// (sent as models/gemini-2.5-flash) or a full resource name such as
	// "models/gemini-2.5-flash" or "tunedModels/my-model". Letters,
	// digits, '.', '_', '-' and '/' separators only.
	Model string
	// ExtraHeaders are added to every request (for example
	// x-goog-user-project). Their values never appear in errors or logs.
	ExtraHeaders map[string]string
	// HTTPClient sends the requests; nil means a client with a pooled
	// transport owned by the Provider.
	HTTPClient *http.Client
	// Timeout bounds a call whose context has no deadline; 0 means
	// [DefaultTimeout], a negative value none.
	Timeout time.Duration
	// StructuredOutput selects the structured-output path; "" means
	// [StructuredNative].
	StructuredOutput StructuredOutputMode
	// Logger receives debug records of each exchange (operation, status,
	// duration; never headers, keys or bodies). nil discards.
	Logger *slog.Logger
	// CallNonce returns the per-response part of the ids this provider
	// gives function calls that arrive without one:
	// [ClientCallIDPrefix] + nonce + "-" + index. The ids must be unique
	// in a conversation (another provider may receive its history, and
	// an approval is keyed by the call id), so the default is 12 random
	// characters; inject a deterministic source in tests.
	CallNonce func() string
	// MaxResponseBytes bounds what one call reads of the upstream's
	// reply: a non-streamed body; of a stream, each event and the text,
	// thoughts and function-call arguments it accumulates (and its bytes
	// in total, event framing included, at four times the bound). 0
	// means [DefaultMaxResponseBytes]; set a larger value for larger
	// replies. A reply over the bound fails the call with
	// provider_invalid_response ([llm.ErrResponseTooLarge]) as soon as
	// it is read past the bound. Negative is invalid.
	MaxResponseBytes int64
}

// Validate reports a configuration error wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.Model == "" {
		return fmt.Errorf("%w: Model is required", ErrInvalidConfig)
	}
	if !validModel(c.Model) {
		return fmt.Errorf("%w: Model %q has characters outside [A-Za-z0-9._-/] or an empty path segment", ErrInvalidConfig, c.Model)
	}
	switch c.StructuredOutput {
	case "", StructuredNative, StructuredPrompt:
	default:
		return fmt.Errorf("%w: unknown StructuredOutput %q", ErrInvalidConfig, c.StructuredOutput)
	}
	if c.BaseURL != "" && !httpurl.Valid(c.BaseURL) {
		return fmt.Errorf("%w: BaseURL must be an absolute http(s) URL that parses", ErrInvalidConfig)
	}
	if strings.ContainsAny(c.APIVersion, "/?#") {
		return fmt.Errorf("%w: APIVersion must be one path segment", ErrInvalidConfig)
	}
	if c.MaxResponseBytes < 0 {
		return fmt.Errorf("%w: MaxResponseBytes must not be negative", ErrInvalidConfig)
	}
	return nil
}

// callIDs returns the id function of one response: a fresh nonce,
// drawn only if a call needs an id.
func (p *Provider) callIDs() func(i int) string {
	nonce := ""
	return func(i int) string {
		if nonce == "" {
			if p.cfg.CallNonce != nil {
				nonce = p.cfg.CallNonce()
			}
			if nonce == "" {
				nonce = strings.ToLower(rand.Text()[:12])
			}
		}
		return ClientCallIDPrefix + nonce + "-" + strconv.Itoa(i)
	}
}

// validModel accepts model resource names made of safe path segments, so
// the model can be placed in the URL path unescaped.
func validModel(m string) bool {
	for seg := range strings.SplitSeq(m, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for _, r := range seg {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
			if !ok {
				return false
			}
		}
	}
	return true
}

// Provider is the Google Gemini generateContent mapping (§8.3). It
// implements [llm.Provider] and [llm.Streamer] (see the package
// documentation on streaming). A Provider is safe for concurrent use:
// calls go to the wire concurrently over pooled keep-alive connections,
// with no serialization layer (§8.3.4).
type Provider struct {
	cfg      Config
	resource string // "models/<id>" or the full resource name
	base     string // BaseURL + "/" + version
	wire     *wire.Client
	schemas  subsetCache // which tool schemas fit the parameters field
	maxReply int64       // the reply bound (Config.MaxResponseBytes or the default)
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, maxReply: wire.MaxResponseBytes(cfg.MaxResponseBytes)}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	version := cfg.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	p.base = base + "/" + version
	p.resource = cfg.Model
	if !strings.Contains(cfg.Model, "/") {
		p.resource = "models/" + cfg.Model
	}
	if p.cfg.StructuredOutput == "" {
		p.cfg.StructuredOutput = StructuredNative
	}
	h := http.Header{}
	if cfg.APIKey != "" {
		h.Set(APIKeyHeader, cfg.APIKey)
	}
	p.wire = wire.New(wire.Config{Provider: ProviderName, HTTPClient: cfg.HTTPClient, Header: h,
		APIKey: cfg.APIKey, ExtraHeaders: cfg.ExtraHeaders, Logger: cfg.Logger})
	return p, nil
}

// Model returns the bound model as configured.
func (p *Provider) Model() string { return p.cfg.Model }

// System returns the provider system identifier observability reports
// (gen_ai.system): "gemini".
func (p *Provider) System() string { return "gemini" }

// StructuredOutput reports the structured-output path calls with a
// response schema take (§8.3.5.1 asks that it be inspectable).
func (p *Provider) StructuredOutput() StructuredOutputMode { return p.cfg.StructuredOutput }

func (p *Provider) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return wire.WithTimeout(ctx, p.cfg.Timeout, DefaultTimeout)
}

// Ready probes GET /{version}/{model} (§5 ready()): a 2xx answer means the
// key is valid and the model is in the catalog; a model whose
// supportedGenerationMethods omits generateContent cannot serve Complete
// and is reported as provider_invalid_model. Failures map as for
// Complete (§8.3.3).
func (p *Provider) Ready(ctx context.Context) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	data, status, err := p.exchange(ctx, "ready", http.MethodGet, "/"+p.resource, nil)
	if err != nil {
		return err
	}
	var info struct {
		Methods *[]string `json:"supportedGenerationMethods"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return p.fail("ready", errcat.ProviderInvalidResponse, status, "", "the model description is not a JSON object", err)
	}
	if info.Methods != nil && len(*info.Methods) > 0 {
		for _, m := range *info.Methods {
			if m == "generateContent" {
				return nil
			}
		}
		return p.fail("ready", errcat.ProviderInvalidModel, status, "", "model "+p.cfg.Model+" does not support generateContent", nil)
	}
	return nil
}

// Complete performs one atomic generateContent call (§8.3): it validates
// req, maps it to the wire (§8.3.1), sends it once, and maps the answer
// (§8.3.2), the failure (§8.3.3) and, with a response schema, the
// structured output (§8.3.5). It ignores req.Retry, req.Stream and
// req.OnChunk ([llm.Complete] handles those).
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := p.requestBody(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	data, status, err := p.exchange(ctx, "complete", http.MethodPost, "/"+p.resource+":generateContent", body)
	if err != nil {
		return nil, err
	}
	resp, err := parseResponse(data, p.callIDs())
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.StatusCode = status
		}
		return nil, err
	}
	if err := checkToolCalls(resp, req.Tools); err != nil {
		return nil, err
	}
	if err := llm.ParseStructured(resp, req.ResponseSchema); err != nil {
		return nil, err
	}
	return resp, nil
}

// exchange sends one request and returns the body of a 2xx answer (at
// most the reply bound); otherwise the mapped error. The body is read to
// the end and closed so the connection returns to the pool, except past
// the reply bound, where reading stops at once.
func (p *Provider) exchange(ctx context.Context, op, method, path string, body []byte) ([]byte, int, error) {
	hreq, err := p.wire.NewRequest(ctx, method, p.base+path, body, "application/json")
	if err != nil {
		return nil, 0, p.fail(op, errcat.ProviderInvalidRequest, 0, "", "cannot build the request", p.wire.Redacted(err, nil))
	}
	hresp, err := p.wire.Send(ctx, op, hreq)
	if err != nil {
		return nil, 0, err
	}
	drain := true
	defer func() {
		if drain {
			_, _ = io.Copy(io.Discard, io.LimitReader(hresp.Body, wire.MaxErrorBody))
		}
		_ = hresp.Body.Close()
	}()
	if hresp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(hresp.Body, wire.MaxErrorBody))
		pe := ParseError(hresp.StatusCode, hresp.Header, data)
		pe.Op = op
		pe.Message = p.wire.Redact(pe.Message)
		return nil, hresp.StatusCode, pe
	}
	data, err := wire.ReadBody(hresp, p.maxReply)
	if errors.Is(err, llm.ErrResponseTooLarge) {
		drain = false
		return nil, hresp.StatusCode, p.wire.TooLarge(op, hresp.StatusCode, p.maxReply)
	}
	if err != nil {
		return nil, hresp.StatusCode, p.wire.TransportError(ctx, op, err)
	}
	return data, hresp.StatusCode, nil
}

// fail builds a *llm.ProviderError with a redacted message.
func (p *Provider) fail(op string, cat errcat.Category, status int, code, msg string, cause error) *llm.ProviderError {
	return p.wire.Fail(op, cat, status, code, msg, cause)
}

var _ llm.TokenEstimator = (*Provider)(nil)

// EstimateTokens estimates the input tokens m costs on the
// generateContent wire (llm.TokenEstimator): 4 bytes of text a token (as
// Google's guide counts them), 3 tokens of framing a content, 258 tokens
// an image (what Gemini charges an image up to 384 pixels a side, and
// each 768 x 768 tile of a larger one). The agent corrects the sum with
// the prompt tokens reported.
func (p *Provider) EstimateTokens(m *llm.Message) int {
	return llm.TokenRates{BytesPerToken: 4, PerMessage: 3, PerImage: 258}.Estimate(m)
}
