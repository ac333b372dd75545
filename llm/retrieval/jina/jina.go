package jina

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/internal/mapping"
)

// DefaultBaseURL is the origin used when Config.BaseURL is empty; the
// /v1 version stays in the routes.
const DefaultBaseURL = "https://api.jina.ai"

// provider is the name of the mapping in errors and logs (and the
// gen_ai.system of its calls). It must not change.
const provider = "jina"

// The wire task values the declared input types realize.
const (
	TaskQuery   = "retrieval.query"
	TaskPassage = "retrieval.passage"
)

// Config configures an [Embedder] or a [Reranker]. Model is required.
type Config struct {
	// BaseURL is the API origin; "" means [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". It never appears
	// in errors or logs.
	APIKey string
	// Model is the bound model identifier.
	Model string
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
		return fmt.Errorf("%w: jina: Model is required", retrieval.ErrInvalidConfig)
	case c.BaseURL != "" && !httpurl.Valid(c.BaseURL):
		return fmt.Errorf("%w: jina: BaseURL must be an absolute http(s) URL that parses", retrieval.ErrInvalidConfig)
	}
	return nil
}

type base struct {
	cfg  Config
	wire *mapping.Client
}

func newBase(cfg Config) (base, error) {
	if err := cfg.Validate(); err != nil {
		return base{}, err
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	return base{cfg: cfg, wire: mapping.New(mapping.Config{Provider: provider, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey,
		ExtraHeaders: cfg.ExtraHeaders, HTTPClient: cfg.HTTPClient, Timeout: cfg.Timeout, Logger: cfg.Logger})}, nil
}

// Model returns the bound model identifier.
func (b *base) Model() string { return b.cfg.Model }

// System returns "jina", the provider's system identifier
// (gen_ai.system, observability §5.5.8 / §5.5.13).
func (b *base) System() string { return "jina" }

// Ready checks the configuration only: Jina has no model-status route,
// so an unknown model surfaces as provider_invalid_model on the first
// call.
func (b *base) Ready(context.Context) error { return nil }

// Embedder is the §8.2 Jina /v1/embeddings mapping. It is safe for
// concurrent use.
type Embedder struct{ base }

var _ retrieval.EmbeddingProvider = (*Embedder)(nil)

// NewEmbedder returns an embedder for cfg.
func NewEmbedder(cfg Config) (*Embedder, error) {
	b, err := newBase(cfg)
	if err != nil {
		return nil, err
	}
	return &Embedder{b}, nil
}

// Embed posts {model, input, task?, dimensions?, truncate: false} to
// /v1/embeddings in one request (Jina batches server-side). input type
// query sends task retrieval.query, document retrieval.passage; other
// input types are provider_invalid_request (task support is
// model-dependent: an extras task carries other values when no input
// type is set). task (while produced), dimensions (when set) and
// truncate are managed.
func (e *Embedder) Embed(ctx context.Context, input []string, cfg retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if err := retrieval.ValidateEmbed(provider, input, cfg); err != nil {
		return nil, err
	}
	fields := map[string]any{"model": e.cfg.Model, "input": input, "truncate": false}
	managed := []llm.ManagedField{{Key: "truncate", Value: false}}
	if cfg.InputType != "" {
		var task string
		switch cfg.InputType {
		case retrieval.InputQuery:
			task = TaskQuery
		case retrieval.InputDocument:
			task = TaskPassage
		default:
			return nil, retrieval.InvalidInput(provider, "embed", "input_type "+string(cfg.InputType)+" is not query or document")
		}
		fields["task"] = task
		managed = append(managed, llm.ManagedField{Key: "task", Value: task})
	}
	if cfg.Dimensions > 0 {
		fields["dimensions"] = cfg.Dimensions
		managed = append(managed, llm.ManagedField{Key: "dimensions", Value: cfg.Dimensions})
	}
	pass, _, err := e.wire.Extras("embed", cfg.Extras, managed...)
	if err != nil {
		return nil, err
	}
	body, err := mapping.Body(pass, fields)
	if err != nil {
		return nil, e.wire.Fail("embed", errcat.ProviderInvalidRequest, "cannot encode the request", err)
	}
	data, err := e.wire.Post(ctx, "embed", "/v1/embeddings", body)
	if err != nil {
		return nil, err
	}
	return DecodeEmbed(data, len(input), e.cfg.Model)
}

// DecodeEmbed reads a /v1/embeddings response body for n inputs:
// {model, usage: {prompt_tokens?, total_tokens}, data: [{index,
// embedding}]}; the input tokens are prompt_tokens, else total_tokens.
func DecodeEmbed(data []byte, n int, model string) (*retrieval.EmbeddingResponse, error) {
	return decodeEmbed(data, n, model, true)
}

// embedResponse is the /v1/embeddings response body.
type embedResponse struct {
	Model string            `json:"model"`
	Data  []mapping.Indexed `json:"data"`
	Usage *embedUsage       `json:"usage"`
}

type embedUsage struct {
	Prompt json.RawMessage `json:"prompt_tokens"`
	Total  json.RawMessage `json:"total_tokens"`
}

// scan is the fast path of decodeEmbed (see [mapping.Scanner]): false
// means decode with encoding/json.
func (w *embedResponse) scan(data []byte) bool {
	s := mapping.NewScanner(data)
	return s.Object(
		mapping.Member{Key: "model", Value: func(s *mapping.Scanner) bool { return s.String(&w.Model) }},
		mapping.Member{Key: "data", Value: func(s *mapping.Scanner) bool { return s.IndexedList(&w.Data) }},
		mapping.Member{Key: "usage", Value: func(s *mapping.Scanner) bool {
			return s.OptionalObject(func() { w.Usage = &embedUsage{} },
				mapping.Member{Key: "prompt_tokens", Value: func(s *mapping.Scanner) bool { return s.RawTo(&w.Usage.Prompt) }},
				mapping.Member{Key: "total_tokens", Value: func(s *mapping.Scanner) bool { return s.RawTo(&w.Usage.Total) }})
		}},
	) && s.End()
}

// decodeEmbed is DecodeEmbed; fast tries the scanner first.
func decodeEmbed(data []byte, n int, model string, fast bool) (*retrieval.EmbeddingResponse, error) {
	d := mapping.Decoder{Provider: provider}
	var w embedResponse
	if !fast || !w.scan(data) {
		w = embedResponse{}
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, d.InvalidCause("embed", "the response is not an embeddings object", err)
		}
	}
	if w.Data == nil {
		return nil, d.Invalid("embed", "the response has no data list")
	}
	vecs, err := d.IndexedVectors("embed", w.Data, n)
	if err != nil {
		return nil, err
	}
	resp := &retrieval.EmbeddingResponse{Vectors: vecs, Model: w.Model, Raw: data}
	if resp.Model == "" {
		resp.Model = model
	}
	if w.Usage != nil {
		t := llm.ParseCounter(w.Usage.Prompt)
		if len(w.Usage.Prompt) == 0 {
			t = llm.ParseCounter(w.Usage.Total)
		}
		if t != nil {
			resp.Usage = &retrieval.EmbeddingUsage{InputTokens: *t}
		}
	}
	return resp, d.Embedding("embed", resp, n)
}

// Reranker is the §8.2 Jina /v1/rerank mapping. It is safe for
// concurrent use.
type Reranker struct{ base }

var _ retrieval.RerankProvider = (*Reranker)(nil)

// NewReranker returns a reranker for cfg.
func NewReranker(cfg Config) (*Reranker, error) {
	b, err := newBase(cfg)
	if err != nil {
		return nil, err
	}
	return &Reranker{b}, nil
}

// Rerank posts {model, query, documents, top_n?, return_documents,
// truncation: false} to /v1/rerank (return_documents always explicit:
// Jina's default is true, the config's false). truncation is managed.
func (r *Reranker) Rerank(ctx context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	if err := retrieval.ValidateRerank(provider, req); err != nil {
		return nil, err
	}
	pass, _, err := r.wire.Extras("rerank", req.Config.Extras, llm.ManagedField{Key: "truncation", Value: false})
	if err != nil {
		return nil, err
	}
	fields := map[string]any{"model": r.cfg.Model, "query": req.Query, "documents": req.Documents,
		"return_documents": req.Config.ReturnDocuments, "truncation": false}
	if req.TopK > 0 {
		fields["top_n"] = req.TopK
	}
	body, err := mapping.Body(pass, fields)
	if err != nil {
		return nil, r.wire.Fail("rerank", errcat.ProviderInvalidRequest, "cannot encode the request", err)
	}
	data, err := r.wire.Post(ctx, "rerank", "/v1/rerank", body)
	if err != nil {
		return nil, err
	}
	return DecodeRerank(data, len(req.Documents), req.TopK, r.cfg.Model)
}

// DecodeRerank reads a /v1/rerank response body for n documents and
// topK (0: none): {model, usage: {total_tokens}, results: [{index,
// relevance_score, document?}]}; total_tokens is the usage's input
// tokens, a document echo is a string, a {text} object or an {image}
// object (nil).
func DecodeRerank(data []byte, n, topK int, model string) (*retrieval.RerankResponse, error) {
	d := mapping.Decoder{Provider: provider}
	var w struct {
		Model   string `json:"model"`
		Results []struct {
			Index    json.RawMessage `json:"index"`
			Score    json.RawMessage `json:"relevance_score"`
			Document json.RawMessage `json:"document"`
		} `json:"results"`
		Usage *struct {
			Total json.RawMessage `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, d.InvalidCause("rerank", "the response is not a rerank object", err)
	}
	if w.Results == nil {
		return nil, d.Invalid("rerank", "the response has no results list")
	}
	scored := make([]mapping.Scored, len(w.Results))
	for i, x := range w.Results {
		scored[i] = mapping.Scored{Index: x.Index, Score: x.Score, Document: x.Document}
	}
	results, err := d.Results("rerank", scored, 0, n)
	if err != nil {
		return nil, err
	}
	if results, err = d.Finish("rerank", results, n, topK); err != nil {
		return nil, err
	}
	resp := &retrieval.RerankResponse{Results: results, Model: w.Model, Raw: data}
	if resp.Model == "" {
		resp.Model = model
	}
	if w.Usage != nil {
		if t := llm.ParseCounter(w.Usage.Total); t != nil {
			resp.Usage = &retrieval.RerankUsage{InputTokens: t}
		}
	}
	return resp, nil
}
