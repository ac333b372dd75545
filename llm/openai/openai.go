package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// DefaultBaseURL is the OpenAI API base URL used when Config.BaseURL is
// empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Minute

// DefaultMaxResponseBytes is the size bound of a reply when
// Config.MaxResponseBytes is 0: 16 MiB.
const DefaultMaxResponseBytes = wire.DefaultMaxResponseBytes

// ErrInvalidConfig is matched by the error [New] returns for an invalid
// [Config].
var ErrInvalidConfig = errors.New("openai: invalid config")

// StructuredOutputMode selects how a call with a response schema
// constrains the model (§8.1.5).
type StructuredOutputMode string

// The structured-output paths.
const (
	// StructuredNative sends response_format json_schema (the default).
	StructuredNative StructuredOutputMode = "native"
	// StructuredPrompt is the §8.1.5.1 prompt-augmentation fallback for
	// servers without response_format: a system directive carrying the
	// schema ([llm.AugmentForSchema]) and no response_format.
	StructuredPrompt StructuredOutputMode = "prompt"
)

// Config configures a [Provider]. Only Model is required.
type Config struct {
	// BaseURL is the API root including the version segment, such as
	// "https://api.openai.com/v1" (the default),
	// "http://localhost:8000/v1" (vLLM), "http://localhost:11434/v1"
	// (Ollama) or "http://localhost:8080/v1" (llama.cpp server).
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when non-empty. It
	// never appears in errors or logs.
	APIKey string
	// Model is the bound model identifier (the wire "model").
	Model string
	// ExtraHeaders are added to every request (for example
	// OpenAI-Organization). They never appear in errors or logs.
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
	// Logger receives debug records of each exchange (method, path,
	// status, duration; never headers, keys or bodies). nil discards.
	Logger *slog.Logger
	// System is the provider system identifier observability reports
	// (gen_ai.system, observability §5.5.3); "" means [DefaultSystem].
	// Set it for OpenAI-compatible servers ("vllm", "lm_studio", ...).
	System string
	// MaxResponseBytes bounds what one call reads of the upstream's
	// reply: a non-streamed body; of a stream, each event and the text,
	// reasoning and tool-call arguments it accumulates (and its bytes in
	// total, event framing included, at four times the bound). 0 means
	// [DefaultMaxResponseBytes]; set a larger value for larger replies.
	// A reply over the bound fails the call with
	// provider_invalid_response ([llm.ErrResponseTooLarge]) as soon as
	// it is read past the bound. Negative is invalid.
	MaxResponseBytes int64
}

// DefaultSystem is the gen_ai.system value of a provider whose
// Config.System is empty.
const DefaultSystem = "openai"

// Validate reports a configuration error wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.Model == "" {
		return fmt.Errorf("%w: Model is required", ErrInvalidConfig)
	}
	switch c.StructuredOutput {
	case "", StructuredNative, StructuredPrompt:
	default:
		return fmt.Errorf("%w: unknown StructuredOutput %q", ErrInvalidConfig, c.StructuredOutput)
	}
	if c.BaseURL != "" && !httpurl.Valid(c.BaseURL) {
		return fmt.Errorf("%w: BaseURL must be an absolute http(s) URL that parses", ErrInvalidConfig)
	}
	if c.MaxResponseBytes < 0 {
		return fmt.Errorf("%w: MaxResponseBytes must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Provider is the OpenAI-compatible Chat Completions mapping (§8.1). It
// implements [llm.Provider], [llm.Streamer] and [llm.RawAssembler], and is
// safe for concurrent use: calls go to the wire concurrently over pooled
// connections.
type Provider struct {
	cfg      Config
	base     string
	maxReply int64 // the reply bound (Config.MaxResponseBytes or the default)
	wire     *wire.Client
}

var (
	_ llm.Provider     = (*Provider)(nil)
	_ llm.Streamer     = (*Provider)(nil)
	_ llm.RawAssembler = (*Provider)(nil)
)

// New returns a provider for cfg.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), maxReply: wire.MaxResponseBytes(cfg.MaxResponseBytes)}
	if p.base == "" {
		p.base = DefaultBaseURL
	}
	if p.cfg.StructuredOutput == "" {
		p.cfg.StructuredOutput = StructuredNative
	}
	h := http.Header{}
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	p.wire = wire.New(wire.Config{Provider: providerName, HTTPClient: cfg.HTTPClient, Header: h,
		APIKey: cfg.APIKey, ExtraHeaders: cfg.ExtraHeaders, Logger: cfg.Logger})
	return p, nil
}

// ProviderName returns "openai", the mapping's name in the errors it
// reports ([llm.Namer]).
func (p *Provider) ProviderName() string { return providerName }

// Model returns the bound model identifier.
func (p *Provider) Model() string { return p.cfg.Model }

// System returns the provider system identifier (Config.System or
// [DefaultSystem]).
func (p *Provider) System() string {
	if p.cfg.System == "" {
		return DefaultSystem
	}
	return p.cfg.System
}

func (p *Provider) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return wire.WithTimeout(ctx, p.cfg.Timeout, DefaultTimeout)
}

// do sends one request and returns the response when its status is 2xx;
// otherwise it reads the body and returns the mapped error.
func (p *Provider) do(ctx context.Context, op, method, path string, body []byte, stream bool) (*http.Response, error) {
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	hreq, err := p.wire.NewRequest(ctx, method, p.base+path, body, accept)
	if err != nil {
		return nil, p.fail(op, errcat.ProviderInvalidRequest, 0, "", "cannot build the request", err)
	}
	resp, err := p.wire.Send(ctx, op, hreq, "path", path)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	return nil, p.statusError(op, resp, wire.ReadErrorBody(resp))
}

// readCompletion reads and parses a whole chat completion body, at most
// the reply bound; op names the operation in errors.
func (p *Provider) readCompletion(ctx context.Context, op string, hresp *http.Response) (*llm.Response, error) {
	data, err := wire.ReadBody(hresp, p.maxReply)
	if errors.Is(err, llm.ErrResponseTooLarge) {
		return nil, p.wire.TooLarge(op, hresp.StatusCode, p.maxReply)
	}
	if err != nil {
		if ctx.Err() != nil {
			// The caller's cancellation stays one; this call's timeout
			// (the body stalled) is the provider's failure.
			return nil, p.wire.TransportError(ctx, op, ctx.Err())
		}
		return nil, p.fail(op, errcat.ProviderUnavailable, hresp.StatusCode, "", "reading the response", err)
	}
	resp, err := ParseResponse(data)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.Provider, pe.Op, pe.StatusCode = providerName, op, hresp.StatusCode
			pe.Message = p.wire.Redact(pe.Message)
		}
		return nil, err
	}
	return resp, nil
}

// fail builds a *llm.ProviderError with a redacted message.
func (p *Provider) fail(op string, cat errcat.Category, status int, code, msg string, cause error) *llm.ProviderError {
	return p.wire.Fail(op, cat, status, code, msg, cause)
}

// Ready probes GET {BaseURL}/models (§5 ready()): the bound model must be
// listed; a listing entry with a "status" member other than "loaded",
// "ready" or "available" (a local-server convention) means the model is
// known but not loaded.
func (p *Provider) Ready(ctx context.Context) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	resp, err := p.do(ctx, "ready", http.MethodGet, "/models", nil, false)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := wire.ReadBody(resp, p.maxReply)
	if errors.Is(err, llm.ErrResponseTooLarge) {
		return p.wire.TooLarge("ready", resp.StatusCode, p.maxReply)
	}
	if err != nil {
		return p.fail("ready", errcat.ProviderUnavailable, resp.StatusCode, "", "reading the model list", err)
	}
	var list struct {
		Data []struct {
			ID     string          `json:"id"`
			Status json.RawMessage `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return p.fail("ready", errcat.ProviderInvalidResponse, resp.StatusCode, "", "the model list is not valid JSON", err)
	}
	for _, m := range list.Data {
		if m.ID != p.cfg.Model {
			continue
		}
		var status string
		if len(m.Status) > 0 && json.Unmarshal(m.Status, &status) == nil {
			switch strings.ToLower(status) {
			case "", "loaded", "ready", "available", "serving":
			default:
				return p.fail("ready", errcat.ProviderModelNotLoaded, resp.StatusCode, status, "model "+p.cfg.Model+" is not loaded (status "+status+")", nil)
			}
		}
		return nil
	}
	return p.fail("ready", errcat.ProviderInvalidModel, resp.StatusCode, "", "model "+p.cfg.Model+" is not in the provider's model list", nil)
}

// Complete performs one atomic chat completion (§8.1).
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := p.requestBody(req, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	hresp, err := p.do(ctx, "complete", http.MethodPost, "/chat/completions", body, false)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	resp, err := p.readCompletion(ctx, "complete", hresp)
	if err != nil {
		return nil, err
	}
	if err := llm.ParseStructured(resp, req.ResponseSchema); err != nil {
		return nil, err
	}
	return resp, nil
}

var _ llm.TokenEstimator = (*Provider)(nil)

// EstimateTokens estimates the input tokens m costs on the Chat
// Completions wire (llm.TokenEstimator): 4 bytes of text a token (the
// o200k and cl100k tokenizers on English), 4 tokens of framing a message
// (role and separators, as OpenAI's token-counting guide counts them),
// 765 tokens an image (a high-detail 1024 x 1024 image; low detail costs
// 85). The agent corrects the sum with the prompt tokens reported.
func (p *Provider) EstimateTokens(m *llm.Message) int {
	return llm.TokenRates{BytesPerToken: 4, PerMessage: 4, PerImage: 765}.Estimate(m)
}
