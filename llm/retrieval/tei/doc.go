// Package tei is the HuggingFace Text Embeddings Inference mapping of
// the retrieval-provider capability (§8.1): an [Embedder] speaking POST
// /embed and a [Reranker] speaking POST /rerank, each bound to its own
// TEI instance (TEI serves one model per instance).
//
// Both chunk a call at ChunkSize (TEI's max-client-batch-size, default
// 32): embed inputs are stitched in order, rerank documents are scored
// chunk by chunk, re-based to absolute indices, sorted globally and cut
// to top-k. Input types map to TEI's server-side prompt names
// (PromptNames) or client-side prefixes. truncate stays false (an
// over-length input fails as provider_invalid_request); TEI reports no
// usage, so Usage is always nil.
//
// Providers are safe for concurrent use.
//
//	emb, err := tei.NewEmbedder(tei.Config{BaseURL: "http://localhost:8080",
//		PromptNames: map[retrieval.InputType]string{retrieval.InputQuery: "query", retrieval.InputDocument: "passage"}})
//	resp, err := emb.Embed(ctx, docs, retrieval.EmbeddingConfig{InputType: retrieval.InputDocument})
package tei
