// Package openai is the OpenAI-compatible embeddings mapping of the
// retrieval-provider capability (§8.3): an [Embedder] speaking POST
// /v1/embeddings to OpenAI, vLLM, LocalAI, Together, TEI's compatible
// route and the like (OpenAI has no rerank API).
//
// Calls over 2 048 inputs are chunked and stitched; embeddings decode by
// shape (an array of numbers, or a base64 float32 string when the
// extras ask for encoding_format base64). The wire is symmetric: an
// input type only selects a configured client-side prefix (for BGE / E5
// models behind a compatible server).
//
// An Embedder is safe for concurrent use.
//
//	emb, err := openai.New(openai.Config{BaseURL: "http://localhost:8000", Model: "BAAI/bge-base-en-v1.5",
//		QueryPrefix: "query: ", DocumentPrefix: "passage: "})
//	resp, err := emb.Embed(ctx, []string{q}, retrieval.EmbeddingConfig{InputType: retrieval.InputQuery})
package openai
