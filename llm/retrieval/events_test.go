package retrieval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/armature-go/armature/llm/retrieval"
)

type stubEmbedder struct{ err error }

func (s *stubEmbedder) Model() string               { return "m" }
func (s *stubEmbedder) System() string              { return "stub" }
func (s *stubEmbedder) Ready(context.Context) error { return nil }
func (s *stubEmbedder) Embed(_ context.Context, in []string, _ retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &retrieval.EmbeddingResponse{Vectors: make([][]float64, len(in)), Model: "m"}, nil
}

type stubReranker struct{}

func (stubReranker) Model() string               { return "r" }
func (stubReranker) Ready(context.Context) error { return nil }
func (stubReranker) Rerank(_ context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	return &retrieval.RerankResponse{Results: []retrieval.ScoredDocument{{Index: 0, RelevanceScore: 1}}, Model: "r"}, nil
}

type recorder struct {
	embeds  []*retrieval.EmbeddingEvent
	reranks []*retrieval.RerankEvent
}

func (r *recorder) ObserveEmbed(_ context.Context, ev *retrieval.EmbeddingEvent) {
	r.embeds = append(r.embeds, ev)
}
func (r *recorder) ObserveRerank(_ context.Context, ev *retrieval.RerankEvent) {
	r.reranks = append(r.reranks, ev)
}

func TestEmbedRerankObserved(t *testing.T) {
	var rec recorder
	ctx := retrieval.WithCallObserver(context.Background(), &rec)
	cfg := retrieval.EmbeddingConfig{InputType: retrieval.InputQuery, Extras: map[string]any{"x": 1}}
	if _, err := retrieval.Embed(ctx, &stubEmbedder{}, []string{"a", "b"}, cfg); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := retrieval.Embed(ctx, &stubEmbedder{err: boom}, []string{"a"}, retrieval.EmbeddingConfig{}); !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	if _, err := retrieval.Rerank(ctx, stubReranker{}, retrieval.RerankRequest{Query: "q", Documents: []string{"d"}, TopK: 1}); err != nil {
		t.Fatal(err)
	}
	if len(rec.embeds) != 2 || len(rec.reranks) != 1 {
		t.Fatalf("%d embed and %d rerank events", len(rec.embeds), len(rec.reranks))
	}
	e := rec.embeds[0]
	if e.Provider != "stub" || e.Model != "m" || len(e.Input) != 2 || e.RequestParams["input_type"] != "query" ||
		e.Extras["x"] != 1 || e.Response == nil || e.Err != nil || e.Start.IsZero() || e.Duration < 0 {
		t.Errorf("embed event %+v", e)
	}
	if f := rec.embeds[1]; f.Response != nil || !errors.Is(f.Err, boom) {
		t.Errorf("failed embed event %+v", f)
	}
	if r := rec.reranks[0]; r.Provider != "" || r.Model != "r" || r.Request.Query != "q" || r.RequestParams["top_k"] != 1 || r.Response == nil {
		t.Errorf("rerank event %+v", r)
	}
	// Without an observer the calls pass through.
	if _, err := retrieval.Embed(context.Background(), &stubEmbedder{}, []string{"a"}, retrieval.EmbeddingConfig{}); err != nil {
		t.Fatal(err)
	}
	if len(rec.embeds) != 2 {
		t.Error("a call without an observer was reported")
	}
}

func TestObserveWrappersKeepSystem(t *testing.T) {
	p := retrieval.ObserveEmbeddings(&stubEmbedder{}, func(context.Context, retrieval.EmbeddingEvent) {})
	if s, ok := p.(interface{ System() string }); !ok || s.System() != "stub" {
		t.Errorf("wrapped provider's system lost")
	}
	var got retrieval.EmbeddingEvent
	p = retrieval.ObserveEmbeddings(&stubEmbedder{}, func(_ context.Context, e retrieval.EmbeddingEvent) { got = e })
	_, _ = p.Embed(context.Background(), []string{"a"}, retrieval.EmbeddingConfig{})
	if got.Provider != "stub" {
		t.Errorf("event provider %q", got.Provider)
	}
}
