package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm/retrieval"
)

// errNoDocuments is returned when the document set holds no passage.
var errNoDocuments = errors.New("rag: no documents to index (want non-empty *.txt or *.md files)")

// passage is one paragraph of a document: what is embedded, ranked and
// quoted.
type passage struct {
	// Source names the passage: the file name and its paragraph number,
	// such as "warranty.txt#2".
	Source string
	// Text is the paragraph.
	Text string
}

// hit is a passage found for a query, with its score: the reranker's
// relevance when there is a reranker, else the cosine similarity.
type hit struct {
	passage
	Score float64
}

// loadPassages reads every *.txt and *.md file of fsys, in lexical path
// order, and splits each into paragraphs (separated by blank lines).
func loadPassages(fsys fs.FS) ([]passage, error) {
	var out []passage
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := path.Ext(p); ext != ".txt" && ext != ".md" {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		n := 0
		for para := range strings.SplitSeq(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n\n") {
			if para = strings.Join(strings.Fields(para), " "); para != "" {
				n++
				out = append(out, passage{Source: p + "#" + strconv.Itoa(n), Text: para})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rag: reading the documents: %w", err)
	}
	if len(out) == 0 {
		return nil, errNoDocuments
	}
	return out, nil
}

// index holds the passages and their vectors in memory. It is immutable
// once built and safe for concurrent use.
type index struct {
	emb      retrieval.EmbeddingProvider
	rerank   retrieval.RerankProvider // nil: rank by cosine similarity only
	passages []passage
	vectors  [][]float64 // vectors[i] embeds passages[i]
}

// newIndex embeds the passages (as documents) with emb; rerank may be
// nil.
func newIndex(ctx context.Context, emb retrieval.EmbeddingProvider, rerank retrieval.RerankProvider, passages []passage) (*index, error) {
	if len(passages) == 0 {
		return nil, errNoDocuments
	}
	texts := make([]string, len(passages))
	for i, p := range passages {
		texts[i] = p.Text
	}
	resp, err := emb.Embed(ctx, texts, retrieval.EmbeddingConfig{InputType: retrieval.InputDocument})
	if err != nil {
		return nil, fmt.Errorf("rag: embedding the documents: %w", err)
	}
	return &index{emb: emb, rerank: rerank, passages: passages, vectors: resp.Vectors}, nil
}

// search embeds query, keeps the candidates passages nearest to it by
// cosine similarity, reranks them when the index has a reranker, and
// returns the topK best, most relevant first.
func (ix *index) search(ctx context.Context, query string, candidates, topK int) ([]hit, error) {
	resp, err := ix.emb.Embed(ctx, []string{query}, retrieval.EmbeddingConfig{InputType: retrieval.InputQuery})
	if err != nil {
		return nil, fmt.Errorf("embedding the query: %w", err)
	}
	q := resp.Vectors[0]
	hits := make([]hit, len(ix.passages))
	for i, p := range ix.passages {
		hits[i] = hit{passage: p, Score: cosine(q, ix.vectors[i])}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Compare(b.Score, a.Score) })
	hits = hits[:min(candidates, len(hits))]
	if ix.rerank == nil {
		return hits[:min(topK, len(hits))], nil
	}
	docs := make([]string, len(hits))
	for i, h := range hits {
		docs[i] = h.Text
	}
	rr, err := ix.rerank.Rerank(ctx, retrieval.RerankRequest{Query: query, Documents: docs, TopK: topK})
	if err != nil {
		return nil, fmt.Errorf("reranking the candidates: %w", err)
	}
	out := make([]hit, len(rr.Results))
	for i, r := range rr.Results {
		out[i] = hit{passage: hits[r.Index].passage, Score: r.RelevanceScore}
	}
	return out, nil
}

// cosine is the cosine similarity of a and b; 0 when either is zero or
// their lengths differ.
func cosine(a, b []float64) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// searchArgs are the arguments of the search_docs tool.
type searchArgs struct {
	Query string `json:"query" jsonschema:"what to look for, in the words of the question"`
}

// searchTool is the search_docs agent tool over ix: its result lists the
// topK passages, each under its source and score. A failure (the
// embedding or rerank server down) is the tool's error, which the agent
// reports to the model.
func searchTool(ix *index, candidates, topK int) (agent.Tool, error) {
	return agent.NewTool("search_docs", "Search the Pelican Bikes documentation; returns the most relevant passages with their sources",
		func(ctx context.Context, a searchArgs) (string, error) {
			if strings.TrimSpace(a.Query) == "" {
				return "", errors.New("search_docs: the query is empty")
			}
			hits, err := ix.search(ctx, a.Query, candidates, topK)
			if err != nil {
				return "", fmt.Errorf("search_docs: %w", err)
			}
			if len(hits) == 0 {
				return "No passage matches.", nil
			}
			var b strings.Builder
			for i, h := range hits {
				fmt.Fprintf(&b, "[%s] (score %.3f)\n%s\n", h.Source, h.Score, h.Text)
				if i < len(hits)-1 {
					b.WriteByte('\n')
				}
			}
			return b.String(), nil
		})
}
