package graph_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/llm/retrieval"
)

// fakeEmbedder answers every call with one 2-dim vector per input, or
// fails with err.
type fakeEmbedder struct{ err error }

func (f *fakeEmbedder) Model() string               { return "emb-1" }
func (f *fakeEmbedder) System() string              { return "fake" }
func (f *fakeEmbedder) Ready(context.Context) error { return nil }
func (f *fakeEmbedder) Embed(_ context.Context, input []string, _ retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	r := &retrieval.EmbeddingResponse{Model: "emb-1-v2", ResponseID: "e1", Dimensions: 2, Usage: &retrieval.EmbeddingUsage{InputTokens: 7}}
	for range input {
		r.Vectors = append(r.Vectors, []float64{0.1, 0.2})
	}
	return r, nil
}

// fakeReranker scores documents in input order, or fails with err.
type fakeReranker struct{ err error }

func (f *fakeReranker) Model() string               { return "rr-1" }
func (f *fakeReranker) Ready(context.Context) error { return nil }
func (f *fakeReranker) Rerank(_ context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	su := 1
	r := &retrieval.RerankResponse{Model: "rr-1", Usage: &retrieval.RerankUsage{SearchUnits: &su}}
	for i := range req.Documents {
		r.Results = append(r.Results, retrieval.ScoredDocument{Index: i, RelevanceScore: 1 / float64(i+1)})
	}
	return r, nil
}

// runCalls runs body as the one node n of a graph with an observer and
// returns the typed call events the observer saw.
func runCalls(t *testing.T, body func(ctx context.Context) error) ([]graph.Event, *graph.Result) {
	t.Helper()
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		return nil, body(ctx)
	}).AddEdge("n", graph.End).SetEntry("n"))
	var c callKinds
	defer mustObserve(t, g, c.observe)()
	res, _ := g.Invoke(t.Context(), nil)
	drain(t, g)
	var out []graph.Event
	for _, ev := range c.events() {
		if _, ok := graph.CallSourceOf(ev); ok {
			out = append(out, ev)
		}
	}
	return out, res
}

func TestEmbeddingEvents(t *testing.T) {
	ident := &llm.PromptIdentity{Name: "q", Version: "3", Label: "production", TemplateHash: "th", RenderedHash: "rh"}
	evs, res := runCalls(t, func(ctx context.Context) error {
		ctx = llm.WithActivePromptGroup(llm.WithActivePrompt(ctx, ident, nil), &llm.PromptGroupIdentity{GroupName: "rag"})
		_, err := retrieval.Embed(ctx, &fakeEmbedder{}, []string{"a", "b"},
			retrieval.EmbeddingConfig{Dimensions: 2, Extras: map[string]any{"truncate": true}})
		return err
	})
	if res.Err != nil || len(evs) != 1 {
		t.Fatalf("err %v, events %v", res.Err, evs)
	}
	e, ok := evs[0].(*graph.EmbeddingEvent)
	if !ok {
		t.Fatalf("event %T", evs[0])
	}
	if e.NodeName != "n" || !slices.Equal(e.Namespace, []string{"n"}) || e.CallID == "" || e.InvocationID != res.InvocationID {
		t.Errorf("source %+v", e.CallSource)
	}
	if e.Provider != "fake" || e.Model != "emb-1" || e.ResponseModel != "emb-1-v2" || e.ResponseID != "e1" ||
		e.InputCount != 2 || !slices.Equal(e.InputStrings, []string{"a", "b"}) || e.Dimensions != 2 ||
		e.Usage == nil || e.Usage.InputTokens != 7 || len(e.OutputVectors) != 2 {
		t.Errorf("event %+v", e)
	}
	if len(e.Params) != 1 || e.Params["dimensions"] != 2 || e.Extras["truncate"] != true {
		t.Errorf("params %v, extras %v", e.Params, e.Extras)
	}
	if e.ActivePrompt == nil || e.ActivePrompt.Name != "q" || e.ActivePrompt.RenderedHash != "rh" || e.ActivePrompt == ident ||
		e.ActivePromptGroup == nil || e.ActivePromptGroup.GroupName != "rag" {
		t.Errorf("prompt context %+v %+v", e.ActivePrompt, e.ActivePromptGroup)
	}
	if e.End.Before(e.Start) || e.LatencyMS < 0 {
		t.Errorf("timing %v %v %v", e.Start, e.End, e.LatencyMS)
	}
}

func TestEmbeddingFailedEvent(t *testing.T) {
	fail := &llm.ProviderError{Cat: errcat.ProviderUnavailable, Code: "overloaded", Message: "try later"}
	evs, res := runCalls(t, func(ctx context.Context) error {
		_, err := retrieval.Embed(ctx, &fakeEmbedder{err: fail}, []string{"a"}, retrieval.EmbeddingConfig{})
		return err
	})
	if !errors.Is(res.Err, errcat.ProviderUnavailable) || len(evs) != 1 {
		t.Fatalf("err %v, events %v", res.Err, evs)
	}
	e, ok := evs[0].(*graph.EmbeddingFailedEvent)
	if !ok {
		t.Fatalf("event %T", evs[0])
	}
	if e.ErrorCategory != errcat.ProviderUnavailable || e.ErrorType != "overloaded" || e.ErrorMessage != "try later" ||
		!errors.Is(e.Err, fail) || e.InputCount != 1 || len(e.Params) != 0 || e.Params == nil || e.Extras == nil ||
		e.ActivePrompt != nil {
		t.Errorf("event %+v", e)
	}
}

func TestRerankEvents(t *testing.T) {
	evs, res := runCalls(t, func(ctx context.Context) error {
		req := retrieval.RerankRequest{Query: "q", Documents: []string{"x", "y", "z"}, TopK: 2,
			Config: retrieval.RerankConfig{ReturnDocuments: true}}
		if _, err := retrieval.Rerank(ctx, &fakeReranker{}, req); err != nil {
			return err
		}
		_, err := retrieval.Rerank(ctx, &fakeReranker{err: errors.New("boom")}, retrieval.RerankRequest{Query: "q", Documents: []string{"x"}})
		return err
	})
	if res.Err == nil || len(evs) != 2 {
		t.Fatalf("err %v, events %v", res.Err, evs)
	}
	ok, isOK := evs[0].(*graph.RerankEvent)
	failed, isFailed := evs[1].(*graph.RerankFailedEvent)
	if !isOK || !isFailed {
		t.Fatalf("events %T %T", evs[0], evs[1])
	}
	if ok.Provider != "" || ok.Model != "rr-1" || ok.Query != "q" || ok.DocumentCount != 3 || ok.TopK == nil || *ok.TopK != 2 ||
		ok.ResultCount != 3 || len(ok.OutputResults) != 3 || ok.Usage == nil || *ok.Usage.SearchUnits != 1 ||
		len(ok.Params) != 1 || ok.Params["return_documents"] != true {
		t.Errorf("rerank event %+v", ok)
	}
	if failed.TopK != nil || failed.ErrorCategory != "" || failed.ErrorType != "*errors.errorString" ||
		failed.ErrorMessage != "boom" || failed.CallID == ok.CallID {
		t.Errorf("failed event %+v", failed)
	}
}

// TestLLMEventPromptContext: an LLM call made under a prompt binding
// carries the prompt's identity, group and token budget; the budget is
// evaluated against the response's usage.
func TestLLMEventPromptContext(t *testing.T) {
	in := 5
	budget := &llm.TokenBudget{InputMaxTokens: &in}
	ident := &llm.PromptIdentity{Name: "p", Version: "1", ObservabilityEntities: map[string]any{"langfuse_prompt": "ref"}}
	evs, _ := runCalls(t, func(ctx context.Context) error {
		ctx = llm.WithActivePrompt(ctx, ident, budget)
		_, err := llm.Complete(ctx, llmtest.New(llmtest.Reply("hi")), &llm.Request{Messages: []llm.Message{llm.UserText("q")}})
		return err
	})
	if len(evs) != 1 {
		t.Fatalf("events %v", evs)
	}
	e := evs[0].(*graph.LLMCompletionEvent)
	if e.ActivePrompt == nil || e.ActivePrompt.Name != "p" || e.ActivePrompt.ObservabilityEntities["langfuse_prompt"] != "ref" ||
		e.ActivePromptGroup != nil || e.TokenBudget == nil || *e.TokenBudget.InputMaxTokens != 5 || e.TokenBudget == budget {
		t.Errorf("prompt context %+v %+v %+v", e.ActivePrompt, e.ActivePromptGroup, e.TokenBudget)
	}
	if checks := e.TokenBudget.Evaluate(e.Usage); e.Usage.PromptTokens != nil && len(checks) != 1 {
		t.Errorf("checks %+v for usage %+v", checks, e.Usage)
	}
}

// TestRetrievalWithoutObservers: without observers the node's context
// carries no retrieval observer and the calls run untracked.
func TestRetrievalWithoutObservers(t *testing.T) {
	g := mustCompile(t, graph.NewBuilder(logSchema(t)).AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		if ctx.Value(retrieval.CallObserverKey{}) != nil {
			t.Error("a retrieval observer without observers")
		}
		_, err := retrieval.Embed(ctx, &fakeEmbedder{}, []string{"a"}, retrieval.EmbeddingConfig{})
		return nil, err
	}).AddEdge("n", graph.End).SetEntry("n"))
	if _, err := g.Invoke(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}
