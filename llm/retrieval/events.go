package retrieval

import (
	"context"
	"time"

	"github.com/armature-go/armature/llm"
)

// EmbeddingEvent describes one finished embed call: the typed
// EmbeddingEvent (success) or EmbeddingFailedEvent (Err set) of
// graph-engine §6. Usage and ResponseID are the response's, so a figure
// the provider sent malformed is absent here too (§7).
type EmbeddingEvent struct {
	// Provider is the provider's system identifier (gen_ai.system): its
	// System() when it has one ([llm.Systemer]), else "".
	Provider string
	// Model is the bound model identifier.
	Model string
	// Input is the call's input list.
	Input []string
	// RequestParams holds the declared config fields the caller set
	// (see [EmbeddingConfig.RequestParams]).
	RequestParams map[string]any
	// Extras are the config's extras (EmbeddingConfig.Extras).
	Extras map[string]any
	// Response is the call's response; nil when it failed.
	Response *EmbeddingResponse
	// Err is the call's failure; nil when it succeeded.
	Err error
	// Start is when the call started; Duration its wall time.
	Start    time.Time
	Duration time.Duration
}

// RerankEvent describes one finished rerank call (RerankEvent or, with
// Err set, RerankFailedEvent of graph-engine §6).
type RerankEvent struct {
	// Provider is the provider's system identifier (gen_ai.system), as
	// on EmbeddingEvent.
	Provider string
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
	// Start is when the call started; Duration its wall time.
	Start    time.Time
	Duration time.Duration
}

// CallObserverKey is the context key under which [Embed] and [Rerank]
// look up the [CallObserver] of the calls made under a context. A context
// implementation (such as the graph engine's node context) may answer it
// from its Value method directly; others use [WithCallObserver].
type CallObserverKey struct{}

// CallObserver observes the calls [Embed] and [Rerank] make: the hook
// behind the graph engine's typed embedding and rerank events
// (graph-engine §6 EmbeddingEvent, EmbeddingFailedEvent, RerankEvent,
// RerankFailedEvent). Each method runs once per call, on the calling
// goroutine, after the provider returned and before the call returns;
// it must not block or keep ctx.
type CallObserver interface {
	ObserveEmbed(ctx context.Context, ev *EmbeddingEvent)
	ObserveRerank(ctx context.Context, ev *RerankEvent)
}

// WithCallObserver returns ctx carrying o for the [Embed] and [Rerank]
// calls made under it.
func WithCallObserver(ctx context.Context, o CallObserver) context.Context {
	return context.WithValue(ctx, CallObserverKey{}, o)
}

// Embed calls p.Embed, reporting the call to the [CallObserver] of ctx
// when it carries one: inside a graph node, the call's typed embedding
// event reaches the invocation's observers. Without one it costs one
// context lookup more than p.Embed.
func Embed(ctx context.Context, p EmbeddingProvider, input []string, cfg EmbeddingConfig) (*EmbeddingResponse, error) {
	o, ok := ctx.Value(CallObserverKey{}).(CallObserver)
	if !ok || o == nil {
		return p.Embed(ctx, input, cfg)
	}
	start := time.Now()
	resp, err := p.Embed(ctx, input, cfg)
	ev := embedEvent(p, input, cfg, resp, err, start)
	o.ObserveEmbed(ctx, &ev)
	return resp, err
}

// Rerank calls p.Rerank, reporting the call to the [CallObserver] of ctx
// when it carries one (see [Embed]).
func Rerank(ctx context.Context, p RerankProvider, req RerankRequest) (*RerankResponse, error) {
	o, ok := ctx.Value(CallObserverKey{}).(CallObserver)
	if !ok || o == nil {
		return p.Rerank(ctx, req)
	}
	start := time.Now()
	resp, err := p.Rerank(ctx, req)
	ev := rerankEvent(p, req, resp, err, start)
	o.ObserveRerank(ctx, &ev)
	return resp, err
}

func system(p any) string {
	if s, ok := p.(llm.Systemer); ok {
		return s.System()
	}
	return ""
}

func embedEvent(p EmbeddingProvider, input []string, cfg EmbeddingConfig, resp *EmbeddingResponse, err error, start time.Time) EmbeddingEvent {
	return EmbeddingEvent{Provider: system(p), Model: p.Model(), Input: input, RequestParams: cfg.RequestParams(),
		Extras: cfg.Extras, Response: resp, Err: err, Start: start, Duration: time.Since(start)}
}

func rerankEvent(p RerankProvider, req RerankRequest, resp *RerankResponse, err error, start time.Time) RerankEvent {
	params := map[string]any{}
	if req.TopK > 0 {
		params["top_k"] = req.TopK
	}
	if req.Config.ReturnDocuments {
		params["return_documents"] = true
	}
	return RerankEvent{Provider: system(p), Model: p.Model(), Request: req, RequestParams: params, Response: resp, Err: err,
		Start: start, Duration: time.Since(start)}
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

// System returns the wrapped provider's system identifier.
func (o *observedEmbedder) System() string { return system(o.EmbeddingProvider) }

func (o *observedEmbedder) Embed(ctx context.Context, input []string, cfg EmbeddingConfig) (*EmbeddingResponse, error) {
	start := time.Now()
	resp, err := o.EmbeddingProvider.Embed(ctx, input, cfg)
	o.fn(ctx, embedEvent(o.EmbeddingProvider, input, cfg, resp, err, start))
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

// System returns the wrapped provider's system identifier.
func (o *observedReranker) System() string { return system(o.RerankProvider) }

func (o *observedReranker) Rerank(ctx context.Context, req RerankRequest) (*RerankResponse, error) {
	start := time.Now()
	resp, err := o.RerankProvider.Rerank(ctx, req)
	o.fn(ctx, rerankEvent(o.RerankProvider, req, resp, err, start))
	return resp, err
}
