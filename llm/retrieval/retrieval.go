package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// ErrInvalidConfig is matched by the error a mapping's constructor
// returns for an invalid construction config.
var ErrInvalidConfig = errors.New("retrieval: invalid config")

// ErrInvalidInput is matched (with [errors.Is]) by the pre-send
// validation failure of a call (§7 provider_invalid_request): an empty
// input list, an empty query or document list, a negative top-k or
// dimensions, an input type the mapping does not recognize. The error is
// a *[llm.ProviderError] in provider_invalid_request; no request is sent.
var ErrInvalidInput = errors.New("retrieval: invalid input")

// EmbeddingProvider is the §3 embedding contract: it turns a list of
// strings into one vector per string, bound to one embedding model.
//
// Implementations are stateless and safe for concurrent use; they never
// retry, loop or fall back (retry composes above them). Every failure is
// a *[llm.ProviderError] carrying a §7 category (match it with
// errors.Is(err, errcat.ProviderRateLimit) and the like), except the
// caller's own cancellation, which comes back as the context error.
type EmbeddingProvider interface {
	// Model returns the bound model identifier.
	Model() string
	// Ready verifies the provider can serve the bound model (§3
	// ready()): provider_invalid_model when the backend does not know
	// it, provider_model_not_loaded when it is known but not usable.
	// It is idempotent.
	Ready(ctx context.Context) error
	// Embed returns one vector per input string, in input order (§3
	// embed()). input must be non-empty.
	Embed(ctx context.Context, input []string, cfg EmbeddingConfig) (*EmbeddingResponse, error)
}

// RerankProvider is the §5 rerank contract: it scores candidate
// documents against a query and returns them most relevant first, bound
// to one rerank model. The concurrency, retry and error contract is
// [EmbeddingProvider]'s.
type RerankProvider interface {
	// Model returns the bound model identifier.
	Model() string
	// Ready verifies the provider can serve the bound model (§5
	// ready()). It is idempotent.
	Ready(ctx context.Context) error
	// Rerank scores req.Documents against req.Query and returns them
	// sorted by relevance, descending (§5 rerank()).
	Rerank(ctx context.Context, req RerankRequest) (*RerankResponse, error)
}

// InputType declares what embedded text is for (§2): a query or a
// document. The empty value is the symmetric default. Mappings may
// recognize further values (Cohere: classification, clustering).
type InputType string

// The well-known input types.
const (
	InputQuery          InputType = "query"
	InputDocument       InputType = "document"
	InputClassification InputType = "classification"
	InputClustering     InputType = "clustering"
)

// EmbeddingConfig is the §2 embedding runtime config. Its zero value
// asks for the model's defaults.
type EmbeddingConfig struct {
	// Dimensions asks for output vectors of this size (Matryoshka
	// models); 0 means the model's default. A negative value is invalid.
	Dimensions int
	// InputType selects the query or document treatment of an
	// asymmetric model; "" means symmetric.
	InputType InputType
	// Extras are undeclared, vendor-specific request fields, forwarded
	// to the wire body untouched, except where they collide with a
	// field the mapping manages (llm-provider §6 Managed-field
	// collision): a conflicting scalar is rejected pre-send, a
	// list-shaped field is merged.
	Extras map[string]any
}

// RequestParams returns the declared fields the caller set, keyed by
// their spec names (dimensions, input_type): the request_params of the
// typed embedding event, where absence is meaningful.
func (c EmbeddingConfig) RequestParams() map[string]any {
	p := map[string]any{}
	if c.Dimensions != 0 {
		p["dimensions"] = c.Dimensions
	}
	if c.InputType != "" {
		p["input_type"] = string(c.InputType)
	}
	return p
}

// RerankConfig is the §2 rerank runtime config. Its zero value asks for
// no document echoes.
type RerankConfig struct {
	// ReturnDocuments asks the provider to echo each document's text on
	// its result (ScoredDocument.Document). Mappings whose wire cannot
	// echo (Cohere) ignore it.
	ReturnDocuments bool
	// Extras are undeclared, vendor-specific request fields; see
	// EmbeddingConfig.Extras.
	Extras map[string]any
}

// RerankRequest is one rerank call (§5 rerank()).
type RerankRequest struct {
	// Query is the text the documents are scored against; required.
	Query string
	// Documents are the candidates; at least one is required.
	Documents []string
	// TopK caps the number of results; 0 means all (the spec's None).
	// A negative value is invalid.
	TopK int
	// Config is the runtime config.
	Config RerankConfig
}

// EmbeddingResponse is the §4 result of an embed call.
type EmbeddingResponse struct {
	// Vectors holds one vector per input string, in input order.
	Vectors [][]float64
	// Model is the model identifier the provider returned, or the bound
	// one when the wire echoes none.
	Model string
	// Usage is the provider's usage record, nil when it reported none
	// (or a malformed one; §7 Malformed ancillary figures).
	Usage *EmbeddingUsage
	// ResponseID is the provider's response identifier, "" when it sent
	// none, a malformed or an empty one.
	ResponseID string
	// Dimensions is the length of every vector.
	Dimensions int
	// Raw is the verbatim JSON of the provider's response; for a
	// chunked call, a JSON array of the per-request responses in
	// request order.
	Raw json.RawMessage
}

// EmbeddingUsage is the §4 usage record of an embed call.
type EmbeddingUsage struct {
	// InputTokens is the number of tokens billed.
	InputTokens int
}

// RerankResponse is the §6 result of a rerank call.
type RerankResponse struct {
	// Results are sorted by RelevanceScore, descending.
	Results []ScoredDocument
	// Model is the model identifier the provider returned, or the bound
	// one when the wire echoes none.
	Model string
	// Usage is the provider's usage record, nil when it reported no
	// figure.
	Usage *RerankUsage
	// ResponseID is the provider's response identifier, or "".
	ResponseID string
	// Raw is the verbatim JSON of the provider's response; for a
	// chunked call (TEI), a JSON array of the per-request responses.
	Raw json.RawMessage
}

// ScoredDocument is one §6 rerank result.
type ScoredDocument struct {
	// Index is the document's position in RerankRequest.Documents.
	Index int
	// RelevanceScore is the provider's score; higher is more relevant.
	// Its scale is provider-specific.
	RelevanceScore float64
	// Document is the provider's echo of the document text, nil when it
	// echoed none (or a non-text object). It is never filled in from
	// the request.
	Document *string
}

// RerankUsage is the §6 usage record of a rerank call; each figure is
// nil when the provider did not report it.
type RerankUsage struct {
	SearchUnits *int
	InputTokens *int
}

// ValidateEmbed is the §7 pre-send validation of an embed call shared by
// every mapping: a non-empty input list and non-negative dimensions.
// provider and the failure's Op ("embed") name the error.
func ValidateEmbed(provider string, input []string, cfg EmbeddingConfig) error {
	switch {
	case len(input) == 0:
		return InvalidInput(provider, "embed", "the input list is empty")
	case cfg.Dimensions < 0:
		return InvalidInput(provider, "embed", "dimensions must be positive, got "+strconv.Itoa(cfg.Dimensions))
	}
	return nil
}

// ValidateRerank is the §7 pre-send validation of a rerank call shared by
// every mapping: a non-empty query and document list, a non-negative
// top-k.
func ValidateRerank(provider string, req RerankRequest) error {
	switch {
	case req.Query == "":
		return InvalidInput(provider, "rerank", "the query is empty")
	case len(req.Documents) == 0:
		return InvalidInput(provider, "rerank", "the document list is empty")
	case req.TopK < 0:
		return InvalidInput(provider, "rerank", "top_k must be positive, got "+strconv.Itoa(req.TopK))
	}
	return nil
}

// InvalidInput returns the provider_invalid_request failure of a call
// rejected before sending; it matches [ErrInvalidInput].
func InvalidInput(provider, op, msg string) *llm.ProviderError {
	return &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: provider, Op: op, Message: msg, Err: ErrInvalidInput}
}
