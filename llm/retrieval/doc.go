// Package retrieval is the OpenArmature retrieval-provider capability:
// the embedding and rerank contracts that sit beside LLM completion
// ([EmbeddingProvider], §3; [RerankProvider], §5), their response and
// usage shapes (§4, §6), and the pre-send validation every mapping
// shares.
//
// Layout. The wire mappings of §8 live in sub-packages, one per vendor
// surface: [github.com/armature-go/armature/llm/retrieval/tei],
// [github.com/armature-go/armature/llm/retrieval/jina],
// [github.com/armature-go/armature/llm/retrieval/openai] (embeddings
// only) and [github.com/armature-go/armature/llm/retrieval/cohere]. They
// sit under llm/ because they share the HTTP plumbing of the LLM
// providers (llm/internal/wire: the pooled client, timeouts, transport
// error mapping and secret redaction) through
// llm/retrieval/internal/mapping, which adds what the retrieval mappings
// share: the §7 status mapping, managed-extras resolution, vector
// decoding, rerank validation and sorting, and the §8 batch
// chunk-and-stitch.
//
// Errors. Every failure is a *[llm.ProviderError] in one of the §7
// categories of [errcat] (the llm-provider enumeration, inherited):
// match it with errors.Is(err, errcat.ProviderRateLimit) or read it with
// errors.As. Pre-send rejections also match [ErrInvalidInput] or
// [llm.ErrManagedField]. A figure the provider sends malformed in usage
// or the response id is treated as not reported, never as a failure.
// Providers do not retry: compose retry above them (the error's
// Retryable and RetryAfter say when).
//
// Concurrency. Providers are safe for concurrent use and keep no state
// between calls. [ObserveEmbeddings] and [ObserveReranks] wrap a
// provider to report each call's typed event.
//
// Observation. Call providers through [Embed] and [Rerank] (as LLM calls
// go through llm.Complete): they report each call to the [CallObserver]
// of the context, so an embedding or rerank made from a graph node
// reaches the invocation's observers as a typed event
// (graph.EmbeddingEvent, graph.RerankEvent and their failed variants)
// and, with the OTel observer, as an openarmature.embedding.complete /
// openarmature.rerank.complete span. Every mapping names its
// gen_ai.system ([llm.Systemer]).
//
// Determinism (§9). Vectors and scores may differ slightly between
// calls for the same input; results with equal scores keep the
// provider's order, which providers do not promise either.
//
// Usage:
//
//	emb, err := openai.New(openai.Config{APIKey: key, Model: "text-embedding-3-small"})
//	if err != nil { ... }
//	resp, err := emb.Embed(ctx, []string{"alpha", "beta"}, retrieval.EmbeddingConfig{InputType: retrieval.InputDocument})
//	if errors.Is(err, errcat.ProviderRateLimit) { ... }
//	fmt.Println(len(resp.Vectors), resp.Dimensions)
package retrieval
