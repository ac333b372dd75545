package retrieval

import (
	"context"
	"time"
)

// EmbeddingEvent describes one finished embed call: the typed
// EmbeddingEvent (success) or EmbeddingFailedEvent (Err set) of
// graph-engine §6. Usage and ResponseID are the response's, so a figure
// the provider sent malformed is absent here too (§7).
type EmbeddingEvent struct {
	// Model is the bound model identifier.
	Model string
	// Input is the call's input list.
	Input []string
	// RequestParams holds the declared config fields the caller set
	// (see [EmbeddingConfig.RequestParams]).
	RequestParams map[string]any
	// Response is the call's response; nil when it failed.
	Response *EmbeddingResponse
	// Err is the call's failure; nil when it succeeded.
	Err error
	// Duration is the call's wall time.
	Duration time.Duration
}

// RerankEvent describes one finished rerank call (RerankEvent or, with
// Err set, RerankFailedEvent of graph-engine §6).
type RerankEvent struct {
	// Model is the bound model identifier.
	Model string
	// Request is the call's request.
	Request RerankRequest
	// RequestParams holds the request fields the caller set: top_k,
	// return_documents when true.
	RequestParams map[string]any
	// Response is the call's response; nil when it failed.
	Response *RerankResponse
	// Err is the call's failure; nil when it succeeded.
	Err error
	// Duration is the call's wall time.
	Duration time.Duration
}

// ObserveEmbeddings returns p with fn called after every Embed call,
// on the calling goroutine, with the call's event. fn must not block;
// Model and Ready are p's.
func ObserveEmbeddings(p EmbeddingProvider, fn func(context.Context, EmbeddingEvent)) EmbeddingProvider {
	return &observedEmbedder{EmbeddingProvider: p, fn: fn}
}

type observedEmbedder struct {
	EmbeddingProvider
	fn func(context.Context, EmbeddingEvent)
}

func (o *observedEmbedder) Embed(ctx context.Context, input []string, cfg EmbeddingConfig) (*EmbeddingResponse, error) {
	start := time.Now()
	resp, err := o.EmbeddingProvider.Embed(ctx, input, cfg)
	o.fn(ctx, EmbeddingEvent{Model: o.Model(), Input: input, RequestParams: cfg.RequestParams(), Response: resp, Err: err,
		Duration: time.Since(start)})
	return resp, err
}

// ObserveReranks returns p with fn called after every Rerank call, on
// the calling goroutine, with the call's event. fn must not block.
func ObserveReranks(p RerankProvider, fn func(context.Context, RerankEvent)) RerankProvider {
	return &observedReranker{RerankProvider: p, fn: fn}
}

type observedReranker struct {
	RerankProvider
	fn func(context.Context, RerankEvent)
}

func (o *observedReranker) Rerank(ctx context.Context, req RerankRequest) (*RerankResponse, error) {
	start := time.Now()
	resp, err := o.RerankProvider.Rerank(ctx, req)
	params := map[string]any{}
	if req.TopK > 0 {
		params["top_k"] = req.TopK
	}
	if req.Config.ReturnDocuments {
		params["return_documents"] = true
	}
	o.fn(ctx, RerankEvent{Model: o.Model(), Request: req, RequestParams: params, Response: resp, Err: err,
		Duration: time.Since(start)})
	return resp, err
}
