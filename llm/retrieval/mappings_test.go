package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/cohere"
	"github.com/armature-go/armature/llm/retrieval/jina"
	"github.com/armature-go/armature/llm/retrieval/openai"
	"github.com/armature-go/armature/llm/retrieval/tei"
)

const testKey = "sk-test-secret-key"

// answer is one scripted server reply.
type answer struct {
	status int
	header map[string]string
	body   string
	half   bool // declare twice the length and hang up halfway
}

func serve(t *testing.T, a answer) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		if a.half {
			w.Header().Set("Content-Length", fmt.Sprint(2*len(a.body)))
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type embedCase struct {
	name  string
	ans   answer
	input []string
	cat   errcat.Category // "" means success
	check func(*testing.T, *retrieval.EmbeddingResponse)
}

func TestEmbedders(t *testing.T) {
	mappings := map[string]struct {
		ok, empty, wrong string
		build            func(url string) (retrieval.EmbeddingProvider, error)
	}{
		"openai": {`{"data":[{"index":0,"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":3}}`, `{"data":[],"model":"m"}`,
			`{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]}`,
			func(u string) (retrieval.EmbeddingProvider, error) {
				return openai.New(openai.Config{BaseURL: u, Model: "m", APIKey: testKey})
			}},
		"jina": {`{"data":[{"index":0,"embedding":[1,2]}],"model":"m","usage":{"total_tokens":3}}`, `{"data":[],"model":"m"}`,
			`{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]}`,
			func(u string) (retrieval.EmbeddingProvider, error) {
				return jina.NewEmbedder(jina.Config{BaseURL: u, Model: "m", APIKey: testKey})
			}},
		"tei": {`[[1,2]]`, `[]`, `[[1,2],[3,4]]`,
			func(u string) (retrieval.EmbeddingProvider, error) {
				return tei.NewEmbedder(tei.Config{BaseURL: u, Model: "m", APIKey: testKey})
			}},
		"cohere": {`{"id":"x","embeddings":{"float":[[1,2]]},"meta":{"billed_units":{"input_tokens":3}}}`, `{"embeddings":{"float":[]}}`,
			`{"embeddings":{"float":[[1,2],[3,4]]}}`,
			func(u string) (retrieval.EmbeddingProvider, error) {
				return cohere.NewEmbedder(cohere.Config{BaseURL: u, Model: "m", APIKey: testKey})
			}},
	}
	for name, m := range mappings {
		cases := []embedCase{
			{name: "ok", ans: answer{status: 200, body: m.ok}, input: []string{"a"}, check: func(t *testing.T, r *retrieval.EmbeddingResponse) {
				if r.Dimensions != 2 || len(r.Vectors) != 1 || r.Model != "m" || len(r.Raw) == 0 {
					t.Errorf("response %+v", r)
				}
			}},
			{name: "429 with Retry-After", ans: answer{status: 429, header: map[string]string{"Retry-After": "7"}, body: `{"error":"slow down ` + testKey + `"}`},
				input: []string{"a"}, cat: errcat.ProviderRateLimit},
			{name: "500", ans: answer{status: 500, body: `oops`}, input: []string{"a"}, cat: errcat.ProviderUnavailable},
			{name: "503", ans: answer{status: 503, body: `{"message":"busy"}`}, input: []string{"a"}, cat: errcat.ProviderUnavailable},
			{name: "401", ans: answer{status: 401, body: `{}`}, input: []string{"a"}, cat: errcat.ProviderAuthentication},
			{name: "404 model", ans: answer{status: 404, body: `{}`}, input: []string{"a"}, cat: errcat.ProviderInvalidModel},
			{name: "422", ans: answer{status: 422, body: `{"detail":"too long"}`}, input: []string{"a"}, cat: errcat.ProviderInvalidRequest},
			{name: "garbage JSON", ans: answer{status: 200, body: `{not json`}, input: []string{"a"}, cat: errcat.ProviderInvalidResponse},
			{name: "half a body", ans: answer{status: 200, body: m.ok, half: true}, input: []string{"a"}, cat: errcat.ProviderUnavailable},
			{name: "empty results", ans: answer{status: 200, body: m.empty}, input: []string{"a"}, cat: errcat.ProviderInvalidResponse},
			{name: "wrong count", ans: answer{status: 200, body: m.wrong}, input: []string{"a"}, cat: errcat.ProviderInvalidResponse},
			{name: "empty input", ans: answer{status: 200, body: m.ok}, cat: errcat.ProviderInvalidRequest},
		}
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				p, err := m.build(serve(t, tc.ans))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := p.Embed(context.Background(), tc.input, retrieval.EmbeddingConfig{})
				checkErr(t, err, tc.cat)
				if tc.cat == errcat.ProviderRateLimit {
					var pe *llm.ProviderError
					if !errors.As(err, &pe) || pe.RetryAfter != 7*time.Second || !pe.Retryable() {
						t.Errorf("rate limit error %#v", pe)
					}
				}
				if tc.check != nil && err == nil {
					tc.check(t, resp)
				}
			})
		}
	}
}

func checkErr(t *testing.T, err error, want errcat.Category) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want category %s", err, want)
	}
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("%v is not a *llm.ProviderError", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("the API key leaked into %q", err)
	}
	if !strings.HasPrefix(err.Error(), "llm: ") {
		t.Fatalf("error %q lacks the package prefix", err)
	}
}

func TestRerankers(t *testing.T) {
	mappings := map[string]struct {
		ok, empty, dup, outOfRange string
		build                      func(url string) (retrieval.RerankProvider, error)
	}{
		"tei": {`[{"index":0,"score":0.1},{"index":1,"score":0.9}]`, `[]`, `[{"index":0,"score":0.1},{"index":0,"score":0.9}]`, `[{"index":5,"score":0.1}]`,
			func(u string) (retrieval.RerankProvider, error) { return tei.NewReranker(tei.Config{BaseURL: u}) }},
		"jina": {`{"results":[{"index":0,"relevance_score":0.1},{"index":1,"relevance_score":0.9}]}`, `{"results":[]}`,
			`{"results":[{"index":0,"relevance_score":0.1},{"index":0,"relevance_score":0.9}]}`, `{"results":[{"index":-1,"relevance_score":0.1}]}`,
			func(u string) (retrieval.RerankProvider, error) {
				return jina.NewReranker(jina.Config{BaseURL: u, Model: "m", APIKey: testKey})
			}},
		"cohere": {`{"id":"r","results":[{"index":0,"relevance_score":0.1},{"index":1,"relevance_score":0.9}],"meta":{"billed_units":{"search_units":1}}}`,
			`{"results":[]}`, `{"results":[{"index":1,"relevance_score":0.1},{"index":1,"relevance_score":0.9}]}`, `{"results":[{"index":2,"relevance_score":0.1}]}`,
			func(u string) (retrieval.RerankProvider, error) {
				return cohere.NewReranker(cohere.Config{BaseURL: u, Model: "m", APIKey: testKey})
			}},
	}
	for name, m := range mappings {
		cases := []struct {
			name  string
			ans   answer
			req   retrieval.RerankRequest
			cat   errcat.Category
			count int
		}{
			{name: "ok sorted", ans: answer{status: 200, body: m.ok}, count: 2},
			{name: "empty results", ans: answer{status: 200, body: m.empty}, count: 0},
			{name: "top_k violated", ans: answer{status: 200, body: m.ok}, req: retrieval.RerankRequest{TopK: 1}, cat: errcat.ProviderInvalidResponse},
			{name: "duplicate index", ans: answer{status: 200, body: m.dup}, cat: errcat.ProviderInvalidResponse},
			{name: "index out of range", ans: answer{status: 200, body: m.outOfRange}, cat: errcat.ProviderInvalidResponse},
			{name: "429 with Retry-After", ans: answer{status: 429, header: map[string]string{"Retry-After": "1"}}, cat: errcat.ProviderRateLimit},
			{name: "502", ans: answer{status: 502}, cat: errcat.ProviderUnavailable},
			{name: "garbage JSON", ans: answer{status: 200, body: `[{`}, cat: errcat.ProviderInvalidResponse},
			{name: "half a body", ans: answer{status: 200, body: m.ok, half: true}, cat: errcat.ProviderUnavailable},
			{name: "empty query", ans: answer{status: 200, body: m.ok}, req: retrieval.RerankRequest{Query: "-"}, cat: errcat.ProviderInvalidRequest},
		}
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				p, err := m.build(serve(t, tc.ans))
				if err != nil {
					t.Fatal(err)
				}
				req := tc.req
				req.Query, req.Documents = "q", []string{"a", "b"}
				if tc.req.Query == "-" {
					req.Query = ""
				}
				if name == "tei" && tc.name == "top_k violated" {
					tc.cat, tc.count = "", 1 // TEI cuts to top_k itself after its global sort
				}
				resp, err := p.Rerank(context.Background(), req)
				checkErr(t, err, tc.cat)
				if err != nil {
					return
				}
				if len(resp.Results) != tc.count {
					t.Fatalf("%d results, want %d", len(resp.Results), tc.count)
				}
				if tc.count > 0 && (resp.Results[0].Index != 1 || resp.Results[0].RelevanceScore != 0.9) {
					t.Errorf("results not sorted: %+v", resp.Results)
				}
			})
		}
	}
}

// TestMappingSystems: every mapping names its gen_ai.system.
func TestMappingSystems(t *testing.T) {
	const u = "http://example.invalid"
	for want, mk := range map[string]func() (any, error){
		"openai": func() (any, error) { return openai.New(openai.Config{BaseURL: u, Model: "m", APIKey: testKey}) },
		"jina":   func() (any, error) { return jina.NewReranker(jina.Config{BaseURL: u, Model: "m", APIKey: testKey}) },
		"tei":    func() (any, error) { return tei.NewEmbedder(tei.Config{BaseURL: u, Model: "m"}) },
		"cohere": func() (any, error) { return cohere.NewReranker(cohere.Config{BaseURL: u, Model: "m", APIKey: testKey}) },
	} {
		p, err := mk()
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if s, ok := p.(llm.Systemer); !ok || s.System() != want {
			t.Errorf("%T: system %v, want %s", p, p, want)
		}
	}
}
