package cohere

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
// /v2 version stays in the routes.
const DefaultBaseURL = "https://api.cohere.com"

// MaxInputs is Cohere's per-request cap of /v2/embed: a longer input
// list is chunked (§8 Batch chunking).
const MaxInputs = 96

// provider is the name of the mapping in errors and logs (and the
// gen_ai.system of its calls). It must not change.
const provider = "cohere"

// wireInputType maps a recognized input type onto Cohere's wire value;
// the absent input type is search_document.
func wireInputType(t retrieval.InputType) (string, bool) {
	switch t {
	case "", retrieval.InputDocument:
		return "search_document", true
	case retrieval.InputQuery:
		return "search_query", true
	case retrieval.InputClassification, retrieval.InputClustering:
		return string(t), true
	}
	return "", false
}

// Config configures an [Embedder] or a [Reranker]. Model is required.
type Config struct {
	// BaseURL is the API origin; "" means [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". It never appears
	// in errors or logs.
	APIKey string
	// Model is the bound model identifier.
	Model string
	// ChunkSize caps the inputs per /v2/embed request; 0 means
	// [MaxInputs].
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
		return fmt.Errorf("%w: cohere: Model is required", retrieval.ErrInvalidConfig)
	case c.ChunkSize < 0:
		return fmt.Errorf("%w: cohere: ChunkSize must not be negative", retrieval.ErrInvalidConfig)
	case c.BaseURL != "" && !httpurl.Valid(c.BaseURL):
		return fmt.Errorf("%w: cohere: BaseURL must be an absolute http(s) URL that parses", retrieval.ErrInvalidConfig)
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
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = MaxInputs
	}
	return base{cfg: cfg, wire: mapping.New(mapping.Config{Provider: provider, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey,
		ExtraHeaders: cfg.ExtraHeaders, HTTPClient: cfg.HTTPClient, Timeout: cfg.Timeout, Logger: cfg.Logger})}, nil
}

// Model returns the bound model identifier.
func (b *base) Model() string { return b.cfg.Model }

// System returns "cohere", the provider's system identifier
// (gen_ai.system, observability §5.5.8 / §5.5.13).
func (b *base) System() string { return "cohere" }

// Ready probes GET /v1/models/{model}: a 404 is provider_invalid_model.
func (b *base) Ready(ctx context.Context) error {
	_, err := b.wire.Get(ctx, "ready", "/v1/models/"+url.PathEscape(b.cfg.Model))
	return err
}

// Embedder is the §8.4 Cohere /v2/embed mapping. It is safe for
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

// Embed posts {model, input_type, texts, embedding_types, truncate:
// "NONE", output_dimension?} to /v2/embed, in chunks of at most
// ChunkSize inputs. input_type is always sent (query: search_query,
// document or absent: search_document, classification, clustering;
// others are provider_invalid_request). An extras embedding_types is
// merged after "float" (a malformed one is ignored); truncate and
// output_dimension (when set) are managed scalars.
func (e *Embedder) Embed(ctx context.Context, input []string, cfg retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if err := retrieval.ValidateEmbed(provider, input, cfg); err != nil {
		return nil, err
	}
	it, ok := wireInputType(cfg.InputType)
	if !ok {
		return nil, retrieval.InvalidInput(provider, "embed", "input_type "+string(cfg.InputType)+" is not query, document, classification or clustering")
	}
	managed := []llm.ManagedField{{Key: "truncate", Value: "NONE"}, {Key: "embedding_types", List: []string{"float"}}}
	fields := map[string]any{"model": e.cfg.Model, "input_type": it, "truncate": "NONE"}
	if cfg.Dimensions > 0 {
		fields["output_dimension"] = cfg.Dimensions
		managed = append(managed, llm.ManagedField{Key: "output_dimension", Value: cfg.Dimensions})
	}
	pass, lists, err := e.wire.Extras("embed", cfg.Extras, managed...)
	if err != nil {
		return nil, err
	}
	fields["embedding_types"] = lists["embedding_types"]
	return e.wire.EmbedChunked(ctx, "embed", input, e.cfg.ChunkSize, func(ctx context.Context, chunk []string) (*retrieval.EmbeddingResponse, error) {
		fields["texts"] = chunk
		body, err := mapping.Body(pass, fields)
		if err != nil {
			return nil, e.wire.Fail("embed", errcat.ProviderInvalidRequest, "cannot encode the request", err)
		}
		data, err := e.wire.Post(ctx, "embed", "/v2/embed", body)
		if err != nil {
			return nil, err
		}
		return DecodeEmbed(data, len(chunk), e.cfg.Model)
	})
}

// billed is Cohere's meta.billed_units.
type billed struct {
	BilledUnits *billedUnits `json:"billed_units"`
}

type billedUnits struct {
	InputTokens json.RawMessage `json:"input_tokens"`
	SearchUnits json.RawMessage `json:"search_units"`
}

// DecodeEmbed reads a /v2/embed response body for n inputs: {id,
// embeddings: {float: [...]}, meta: {billed_units: {input_tokens}}}.
// The model is model (Cohere echoes none).
func DecodeEmbed(data []byte, n int, model string) (*retrieval.EmbeddingResponse, error) {
	return decodeEmbed(data, n, model, true)
}

// embedResponse is the /v2/embed response body; vecs holds
// embeddings.float when the scanner decoded it.
type embedResponse struct {
	ID         json.RawMessage `json:"id"`
	Embeddings *struct {
		Float []json.RawMessage `json:"float"`
	} `json:"embeddings"`
	Meta *billed `json:"meta"`

	vecs [][]float64
}

// scan is the fast path of decodeEmbed (see [mapping.Scanner]): false
// means decode with encoding/json. A null or absent embeddings.float
// leaves it (the failure is encoding/json's to report).
func (w *embedResponse) scan(data []byte) bool {
	s := mapping.NewScanner(data)
	return s.Object(
		mapping.Member{Key: "id", Value: func(s *mapping.Scanner) bool { return s.RawTo(&w.ID) }},
		mapping.Member{Key: "embeddings", Value: func(s *mapping.Scanner) bool {
			return s.Object(mapping.Member{Key: "float", Value: func(s *mapping.Scanner) bool { return s.Vectors(&w.vecs) }})
		}},
		mapping.Member{Key: "meta", Value: func(s *mapping.Scanner) bool {
			return s.OptionalObject(func() { w.Meta = &billed{} }, mapping.Member{Key: "billed_units", Value: func(s *mapping.Scanner) bool {
				b := &billedUnits{}
				return s.OptionalObject(func() { w.Meta.BilledUnits = b },
					mapping.Member{Key: "input_tokens", Value: func(s *mapping.Scanner) bool { return s.RawTo(&b.InputTokens) }},
					mapping.Member{Key: "search_units", Value: func(s *mapping.Scanner) bool { return s.RawTo(&b.SearchUnits) }})
			}})
		}},
	) && s.End() && w.vecs != nil
}

// decodeEmbed is DecodeEmbed; fast tries the scanner first.
func decodeEmbed(data []byte, n int, model string, fast bool) (*retrieval.EmbeddingResponse, error) {
	d := mapping.Decoder{Provider: provider}
	var w embedResponse
	var vecs [][]float64
	var err error
	if fast && w.scan(data) {
		vecs, err = d.DecodedVectors("embed", w.vecs, n)
	} else {
		w = embedResponse{}
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, d.InvalidCause("embed", "the response is not an embed object", err)
		}
		if w.Embeddings == nil || w.Embeddings.Float == nil {
			return nil, d.Invalid("embed", "the response has no embeddings.float")
		}
		vecs, err = d.Vectors("embed", w.Embeddings.Float, n)
	}
	if err != nil {
		return nil, err
	}
	resp := &retrieval.EmbeddingResponse{Vectors: vecs, Model: model, ResponseID: mapping.ID(w.ID), Raw: data}
	if w.Meta != nil && w.Meta.BilledUnits != nil {
		if t := llm.ParseCounter(w.Meta.BilledUnits.InputTokens); t != nil {
			resp.Usage = &retrieval.EmbeddingUsage{InputTokens: *t}
		}
	}
	return resp, d.Embedding("embed", resp, n)
}

// Reranker is the §8.4 Cohere /v2/rerank mapping. It is safe for
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

// Rerank posts {model, query, documents, top_n?} to /v2/rerank.
// ReturnDocuments is not realized (the wire never echoes documents:
// every Document is nil); Cohere truncates long documents server-side to
// max_tokens_per_doc, which rides the extras.
func (r *Reranker) Rerank(ctx context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	if err := retrieval.ValidateRerank(provider, req); err != nil {
		return nil, err
	}
	fields := map[string]any{"model": r.cfg.Model, "query": req.Query, "documents": req.Documents}
	if req.TopK > 0 {
		fields["top_n"] = req.TopK
	}
	body, err := mapping.Body(req.Config.Extras, fields)
	if err != nil {
		return nil, r.wire.Fail("rerank", errcat.ProviderInvalidRequest, "cannot encode the request", err)
	}
	data, err := r.wire.Post(ctx, "rerank", "/v2/rerank", body)
	if err != nil {
		return nil, err
	}
	return DecodeRerank(data, len(req.Documents), req.TopK, r.cfg.Model)
}

// DecodeRerank reads a /v2/rerank response body for n documents and
// topK (0: none): {id, results: [{index, relevance_score}], meta:
// {billed_units: {search_units}}}. The model is model.
func DecodeRerank(data []byte, n, topK int, model string) (*retrieval.RerankResponse, error) {
	d := mapping.Decoder{Provider: provider}
	var w struct {
		ID      json.RawMessage `json:"id"`
		Results []struct {
			Index json.RawMessage `json:"index"`
			Score json.RawMessage `json:"relevance_score"`
		} `json:"results"`
		Meta *billed `json:"meta"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, d.InvalidCause("rerank", "the response is not a rerank object", err)
	}
	if w.Results == nil {
		return nil, d.Invalid("rerank", "the response has no results list")
	}
	scored := make([]mapping.Scored, len(w.Results))
	for i, x := range w.Results {
		scored[i] = mapping.Scored{Index: x.Index, Score: x.Score}
	}
	results, err := d.Results("rerank", scored, 0, n)
	if err != nil {
		return nil, err
	}
	if results, err = d.Finish("rerank", results, n, topK); err != nil {
		return nil, err
	}
	resp := &retrieval.RerankResponse{Results: results, Model: model, ResponseID: mapping.ID(w.ID), Raw: data}
	if w.Meta != nil && w.Meta.BilledUnits != nil {
		if su := llm.ParseCounter(w.Meta.BilledUnits.SearchUnits); su != nil {
			resp.Usage = &retrieval.RerankUsage{SearchUnits: su}
		}
	}
	return resp, nil
}
