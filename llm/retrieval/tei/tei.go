package tei

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

// DefaultChunkSize is TEI's default max-client-batch-size: the inputs
// (embed) or documents (rerank) per request.
const DefaultChunkSize = 32

// provider is the name of the mapping in errors and logs (and the
// gen_ai.system of its calls). It must not change.
const provider = "tei"

// Config configures an [Embedder] or a [Reranker]: each binds its own
// TEI instance. BaseURL is required.
type Config struct {
	// BaseURL is the TEI instance's origin, such as
	// "http://localhost:8080".
	BaseURL string
	// Model is the bound model identifier: TEI serves one model per
	// instance, so it is informational (the response model, and the
	// /info check of Ready when non-empty).
	Model string
	// ChunkSize is the instance's max-client-batch-size; 0 means
	// [DefaultChunkSize].
	ChunkSize int
	// PromptNames maps an input type to the name of a prompt configured
	// on the model (sent as prompt_name), e.g. {query: "query",
	// document: "passage"}. Embedder only.
	PromptNames map[retrieval.InputType]string
	// QueryPrefix and DocumentPrefix are prepended client-side to each
	// input when the input type has no prompt name: the fallback for
	// models without configured prompts. Embedder only.
	QueryPrefix, DocumentPrefix string
	// APIKey is sent as a Bearer token when non-empty (a TEI started
	// with --api-key); it never appears in errors or logs.
	APIKey string
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
	case !httpurl.Valid(c.BaseURL):
		return fmt.Errorf("%w: tei: BaseURL must be an absolute http(s) URL that parses", retrieval.ErrInvalidConfig)
	case c.ChunkSize < 0:
		return fmt.Errorf("%w: tei: ChunkSize must not be negative", retrieval.ErrInvalidConfig)
	}
	return nil
}

// base is what both providers hold.
type base struct {
	cfg  Config
	wire *mapping.Client
}

func newBase(cfg Config) (base, error) {
	if err := cfg.Validate(); err != nil {
		return base{}, err
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	return base{cfg: cfg, wire: mapping.New(mapping.Config{Provider: provider, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey,
		ExtraHeaders: cfg.ExtraHeaders, HTTPClient: cfg.HTTPClient, Timeout: cfg.Timeout, Logger: cfg.Logger})}, nil
}

// Model returns the bound model identifier.
func (b *base) Model() string { return b.cfg.Model }

// System returns "tei", the provider's system identifier
// (gen_ai.system, observability §5.5.8 / §5.5.13).
func (b *base) System() string { return "tei" }

// Ready probes GET /info; when Model is set, the instance's model_id
// must be it (else provider_invalid_model).
func (b *base) Ready(ctx context.Context) error {
	data, err := b.wire.Get(ctx, "ready", "/info")
	if err != nil {
		return err
	}
	var info struct {
		ModelID string `json:"model_id"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return b.wire.InvalidCause("ready", "the /info answer is not a JSON object", err)
	}
	if b.cfg.Model != "" && info.ModelID != b.cfg.Model {
		return b.wire.Fail("ready", errcat.ProviderInvalidModel, "the instance serves "+info.ModelID+", not "+b.cfg.Model, nil)
	}
	return nil
}

// Embedder is the §8.1 TEI /embed mapping. It is safe for concurrent
// use.
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

// Embed posts {inputs[, prompt_name][, dimensions]} to /embed, in
// chunks of at most ChunkSize inputs. The input type selects a prompt
// name (PromptNames) or else a client-side prefix; an input type with
// neither is provider_invalid_request unless it is query or document
// (then the call is symmetric). TEI reports no usage: Usage is nil.
// truncate is managed: TEI's default false is relied on, an extras
// truncate other than false is rejected.
func (e *Embedder) Embed(ctx context.Context, input []string, cfg retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if err := retrieval.ValidateEmbed(provider, input, cfg); err != nil {
		return nil, err
	}
	fields := map[string]any{}
	managed := []llm.ManagedField{{Key: "truncate", Value: false}}
	prefix := ""
	if cfg.InputType != "" {
		if name, ok := e.cfg.PromptNames[cfg.InputType]; ok {
			fields["prompt_name"] = name
			managed = append(managed, llm.ManagedField{Key: "prompt_name", Value: name})
		} else {
			switch cfg.InputType {
			case retrieval.InputQuery:
				prefix = e.cfg.QueryPrefix
			case retrieval.InputDocument:
				prefix = e.cfg.DocumentPrefix
			default:
				return nil, retrieval.InvalidInput(provider, "embed", "input_type "+string(cfg.InputType)+" has no prompt name")
			}
		}
	}
	if cfg.Dimensions > 0 {
		fields["dimensions"] = cfg.Dimensions
		managed = append(managed, llm.ManagedField{Key: "dimensions", Value: cfg.Dimensions})
	}
	pass, _, err := e.wire.Extras("embed", cfg.Extras, managed...)
	if err != nil {
		return nil, err
	}
	return e.wire.EmbedChunked(ctx, "embed", input, e.cfg.ChunkSize, func(ctx context.Context, chunk []string) (*retrieval.EmbeddingResponse, error) {
		fields["inputs"] = prefixed(prefix, chunk)
		body, err := mapping.Body(pass, fields)
		if err != nil {
			return nil, e.wire.Fail("embed", errcat.ProviderInvalidRequest, "cannot encode the request", err)
		}
		data, err := e.wire.Post(ctx, "embed", "/embed", body)
		if err != nil {
			return nil, err
		}
		return DecodeEmbed(data, len(chunk), e.cfg.Model)
	})
}

func prefixed(prefix string, in []string) []string {
	if prefix == "" {
		return in
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = prefix + s
	}
	return out
}

// DecodeEmbed reads an /embed response body for n inputs: a bare array
// of vectors in input order. The response model is model (TEI echoes
// none), the usage nil. A malformed body fails with
// provider_invalid_response.
func DecodeEmbed(data []byte, n int, model string) (*retrieval.EmbeddingResponse, error) {
	return decodeEmbed(data, n, model, true)
}

// decodeEmbed is DecodeEmbed; fast tries the scanner first (see
// [mapping.Scanner]).
func decodeEmbed(data []byte, n int, model string, fast bool) (*retrieval.EmbeddingResponse, error) {
	d := mapping.Decoder{Provider: provider}
	var vecs [][]float64
	var err error
	if s := mapping.NewScanner(data); fast && s.Vectors(&vecs) && s.End() {
		vecs, err = d.DecodedVectors("embed", vecs, n)
	} else {
		var raw []json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
			return nil, d.InvalidCause("embed", "the response is not an array of vectors", err)
		}
		vecs, err = d.Vectors("embed", raw, n)
	}
	if err != nil {
		return nil, err
	}
	resp := &retrieval.EmbeddingResponse{Vectors: vecs, Model: model, Raw: data}
	return resp, d.Embedding("embed", resp, n)
}

// Reranker is the §8.1 TEI /rerank mapping. It is safe for concurrent
// use.
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

// Rerank posts {query, texts, truncate: false, return_text} to /rerank,
// in chunks of at most ChunkSize documents (a cross-encoder scores each
// pair independently), re-bases each chunk's indices to the documents'
// positions, sorts all results by score and keeps the TopK best. TEI
// reports no usage: Usage is nil. Raw is the response array, or the
// array of the per-chunk arrays when the call was chunked.
func (r *Reranker) Rerank(ctx context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	if err := retrieval.ValidateRerank(provider, req); err != nil {
		return nil, err
	}
	pass, _, err := r.wire.Extras("rerank", req.Config.Extras, llm.ManagedField{Key: "truncate", Value: false})
	if err != nil {
		return nil, err
	}
	fields := map[string]any{"query": req.Query, "truncate": false, "return_text": req.Config.ReturnDocuments}
	ranges := mapping.Chunks(len(req.Documents), r.cfg.ChunkSize)
	var results []retrieval.ScoredDocument
	raws := make([]json.RawMessage, 0, len(ranges))
	for _, rg := range ranges {
		fields["texts"] = req.Documents[rg[0]:rg[1]]
		body, err := mapping.Body(pass, fields)
		if err != nil {
			return nil, r.wire.Fail("rerank", errcat.ProviderInvalidRequest, "cannot encode the request", err)
		}
		data, err := r.wire.Post(ctx, "rerank", "/rerank", body)
		if err != nil {
			return nil, err
		}
		part, err := decodeRerank(r.wire.Decoder, data, rg[0], rg[1]-rg[0])
		if err != nil {
			return nil, err
		}
		results = append(results, part...)
		raws = append(raws, data)
	}
	results, err = r.wire.Finish("rerank", results, len(req.Documents), 0)
	if err != nil {
		return nil, err
	}
	if req.TopK > 0 && len(results) > req.TopK {
		results = results[:req.TopK]
	}
	resp := &retrieval.RerankResponse{Results: results, Model: r.cfg.Model, Raw: raws[0]}
	if len(raws) > 1 {
		resp.Raw = mapping.RawList(raws)
	}
	return resp, nil
}

// DecodeRerank reads a single /rerank response body for n documents:
// [{index, score, text?}] validated (§6) and sorted by score. The model
// is model, the usage nil.
func DecodeRerank(data []byte, n int, model string) (*retrieval.RerankResponse, error) {
	d := mapping.Decoder{Provider: provider}
	results, err := decodeRerank(d, data, 0, n)
	if err != nil {
		return nil, err
	}
	if results, err = d.Finish("rerank", results, n, 0); err != nil {
		return nil, err
	}
	return &retrieval.RerankResponse{Results: results, Model: model, Raw: data}, nil
}

func decodeRerank(d mapping.Decoder, data []byte, base, n int) ([]retrieval.ScoredDocument, error) {
	var w []struct {
		Index json.RawMessage `json:"index"`
		Score json.RawMessage `json:"score"`
		Text  json.RawMessage `json:"text"`
	}
	if err := json.Unmarshal(data, &w); err != nil || w == nil {
		return nil, d.InvalidCause("rerank", "the response is not an array of results", err)
	}
	scored := make([]mapping.Scored, len(w))
	for i, x := range w {
		scored[i] = mapping.Scored{Index: x.Index, Score: x.Score, Document: x.Text}
	}
	return d.Results("rerank", scored, base, n)
}
