package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/internal/mapping"
)

// DefaultBaseURL is the origin used when Config.BaseURL is empty; the
// /v1 version stays in the route.
const DefaultBaseURL = "https://api.openai.com"

// MaxInputs is OpenAI's per-request input cap: a longer input list is
// chunked (§8 Batch chunking).
const MaxInputs = 2048

// provider is the name of the mapping in errors and logs (and the
// gen_ai.system of its calls). It must not change.
const provider = "openai"

// Config configures an [Embedder]. Only Model is required.
type Config struct {
	// BaseURL is the server origin, such as "https://api.openai.com"
	// (the default) or "http://localhost:8000" (vLLM); requests go to
	// BaseURL + "/v1/embeddings".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when non-empty.
	// It never appears in errors or logs.
	APIKey string
	// Model is the bound embedding model (the wire "model").
	Model string
	// QueryPrefix and DocumentPrefix are prepended client-side to every
	// input of a call whose InputType is query or document: the only
	// way to drive an asymmetric model (BGE, E5) behind this symmetric
	// wire. Empty means none.
	QueryPrefix, DocumentPrefix string
	// ChunkSize caps the inputs per request; 0 means [MaxInputs].
	ChunkSize int
	// ExtraHeaders are added to every request; they never appear in
	// errors or logs.
	ExtraHeaders map[string]string
	// HTTPClient sends the requests; nil means a pooled default client.
	HTTPClient *http.Client
	// Timeout bounds a call whose context has no deadline; 0 means two
	// minutes, a negative value none.
	Timeout time.Duration
	// Logger receives debug records of each exchange; nil discards.
	Logger *slog.Logger
}

// Validate reports a configuration error wrapping
// [retrieval.ErrInvalidConfig].
func (c Config) Validate() error {
	switch {
	case c.Model == "":
		return fmt.Errorf("%w: openai: Model is required", retrieval.ErrInvalidConfig)
	case c.ChunkSize < 0:
		return fmt.Errorf("%w: openai: ChunkSize must not be negative", retrieval.ErrInvalidConfig)
	case c.BaseURL != "" && !httpurl.Valid(c.BaseURL):
		return fmt.Errorf("%w: openai: BaseURL must be an absolute http(s) URL that parses", retrieval.ErrInvalidConfig)
	}
	return nil
}

// Embedder is the §8.3 OpenAI-compatible embeddings mapping. It is safe
// for concurrent use.
type Embedder struct {
	cfg  Config
	wire *mapping.Client
}

var _ retrieval.EmbeddingProvider = (*Embedder)(nil)

// New returns an embedder for cfg.
func New(cfg Config) (*Embedder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = MaxInputs
	}
	return &Embedder{cfg: cfg, wire: mapping.New(mapping.Config{Provider: provider, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey,
		ExtraHeaders: cfg.ExtraHeaders, HTTPClient: cfg.HTTPClient, Timeout: cfg.Timeout, Logger: cfg.Logger})}, nil
}

// Model returns the bound model identifier.
func (e *Embedder) Model() string { return e.cfg.Model }

// System returns "openai", the provider's system identifier
// (gen_ai.system, observability §5.5.8 / §5.5.13).
func (e *Embedder) System() string { return "openai" }

// Ready probes GET /v1/models/{model}: a 404 is provider_invalid_model.
func (e *Embedder) Ready(ctx context.Context) error {
	_, err := e.wire.Get(ctx, "ready", "/v1/models/"+url.PathEscape(e.cfg.Model))
	return err
}

// Embed posts {model, input[, dimensions]} to /v1/embeddings, in chunks
// of at most ChunkSize inputs. The input type is realized only by the
// configured client-side prefixes. A response embedding is decoded by
// its shape: an array of numbers, or (extras encoding_format "base64") a
// base64 string of little-endian float32 values.
func (e *Embedder) Embed(ctx context.Context, input []string, cfg retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if err := retrieval.ValidateEmbed(provider, input, cfg); err != nil {
		return nil, err
	}
	prefix := ""
	switch cfg.InputType {
	case retrieval.InputQuery:
		prefix = e.cfg.QueryPrefix
	case retrieval.InputDocument:
		prefix = e.cfg.DocumentPrefix
	}
	var managed []llm.ManagedField
	fields := map[string]any{"model": e.cfg.Model}
	if cfg.Dimensions > 0 {
		managed = append(managed, llm.ManagedField{Key: "dimensions", Value: cfg.Dimensions})
		fields["dimensions"] = cfg.Dimensions
	}
	pass, _, err := e.wire.Extras("embed", cfg.Extras, managed...)
	if err != nil {
		return nil, err
	}
	return e.wire.EmbedChunked(ctx, "embed", input, e.cfg.ChunkSize, func(ctx context.Context, chunk []string) (*retrieval.EmbeddingResponse, error) {
		if prefix != "" {
			p := make([]string, len(chunk))
			for i, s := range chunk {
				p[i] = prefix + s
			}
			chunk = p
		}
		fields["input"] = chunk
		body, err := mapping.Body(pass, fields)
		if err != nil {
			return nil, e.wire.Fail("embed", errcat.ProviderInvalidRequest, "cannot encode the request", err)
		}
		data, err := e.wire.Post(ctx, "embed", "/v1/embeddings", body)
		if err != nil {
			return nil, err
		}
		return Decode(data, len(chunk), e.cfg.Model)
	})
}

// Decode reads a /v1/embeddings response body for n inputs: the vectors
// in input order (by each entry's index), usage.prompt_tokens as the
// input tokens, a top-level id (some compatible servers send one) as the
// response id, model (the bound one when absent). A malformed body fails
// with provider_invalid_response.
func Decode(data []byte, n int, model string) (*retrieval.EmbeddingResponse, error) {
	return decode(data, n, model, true)
}

// wireResponse is the /v1/embeddings response body.
type wireResponse struct {
	ID    json.RawMessage   `json:"id"`
	Model string            `json:"model"`
	Data  []mapping.Indexed `json:"data"`
	Usage *wireUsage        `json:"usage"`
}

type wireUsage struct {
	Prompt json.RawMessage `json:"prompt_tokens"`
}

// scan is the fast path of decode (see [mapping.Scanner]): false means
// decode with encoding/json.
func (w *wireResponse) scan(data []byte) bool {
	s := mapping.NewScanner(data)
	return s.Object(
		mapping.Member{Key: "id", Value: func(s *mapping.Scanner) bool { return s.RawTo(&w.ID) }},
		mapping.Member{Key: "model", Value: func(s *mapping.Scanner) bool { return s.String(&w.Model) }},
		mapping.Member{Key: "data", Value: func(s *mapping.Scanner) bool { return s.IndexedList(&w.Data) }},
		mapping.Member{Key: "usage", Value: func(s *mapping.Scanner) bool {
			return s.OptionalObject(func() { w.Usage = &wireUsage{} },
				mapping.Member{Key: "prompt_tokens", Value: func(s *mapping.Scanner) bool { return s.RawTo(&w.Usage.Prompt) }})
		}},
	) && s.End()
}

// decode is Decode; fast tries the scanner first.
func decode(data []byte, n int, model string, fast bool) (*retrieval.EmbeddingResponse, error) {
	c := mapping.Decoder{Provider: provider}
	var w wireResponse
	if !fast || !w.scan(data) {
		w = wireResponse{}
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, c.InvalidCause("embed", "the response is not an embeddings object", err)
		}
	}
	if w.Data == nil {
		return nil, c.Invalid("embed", "the response has no data list")
	}
	vecs, err := c.IndexedVectors("embed", w.Data, n)
	if err != nil {
		return nil, err
	}
	resp := &retrieval.EmbeddingResponse{Vectors: vecs, Model: w.Model, ResponseID: mapping.ID(w.ID), Raw: data}
	if resp.Model == "" {
		resp.Model = model
	}
	if w.Usage != nil {
		if t := llm.ParseCounter(w.Usage.Prompt); t != nil {
			resp.Usage = &retrieval.EmbeddingUsage{InputTokens: *t}
		}
	}
	return resp, c.Embedding("embed", resp, n)
}
