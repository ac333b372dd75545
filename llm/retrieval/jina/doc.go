// Package jina is the Jina AI mapping of the retrieval-provider
// capability (§8.2): an [Embedder] speaking POST /v1/embeddings and a
// [Reranker] speaking POST /v1/rerank against https://api.jina.ai (or a
// gateway), authenticated with a Bearer key.
//
// Input types query and document become Jina's task retrieval.query and
// retrieval.passage (other tasks ride the extras when no input type is
// set); truncate / truncation are sent false so an over-length input
// fails loud; return_documents is always explicit (Jina's default is
// true). Rerank echoes that are {text} objects surface their text,
// {image} objects nil. Jina batches server-side: no client chunking.
//
// Providers are safe for concurrent use.
//
//	rr, err := jina.NewReranker(jina.Config{APIKey: key, Model: "jina-reranker-v2-base-multilingual"})
//	resp, err := rr.Rerank(ctx, retrieval.RerankRequest{Query: q, Documents: docs, TopK: 3})
package jina
