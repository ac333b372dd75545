// Package cohere is the Cohere mapping of the retrieval-provider
// capability (§8.4): an [Embedder] speaking POST /v2/embed and a
// [Reranker] speaking POST /v2/rerank, authenticated with a Bearer key.
//
// Embed always sends input_type (query: search_query; document or none:
// search_document; classification; clustering), embedding_types with
// "float" first (extras precisions merged after it, readable on Raw),
// truncate "NONE" (fail loud), output_dimension for Dimensions, and
// chunks calls over 96 inputs. Rerank never echoes documents (every
// Document is nil, whatever ReturnDocuments says) and reports search
// units.
//
// Providers are safe for concurrent use.
//
//	rr, err := cohere.NewReranker(cohere.Config{APIKey: key, Model: "rerank-v3.5"})
//	resp, err := rr.Rerank(ctx, retrieval.RerankRequest{Query: q, Documents: docs})
package cohere
