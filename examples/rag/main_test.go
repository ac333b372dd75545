package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/armature-go/armature/errcat"
)

// fakeDims is the size of the fake embedding vectors.
const fakeDims = 1024

var stopwords = map[string]bool{"a": true, "an": true, "the": true, "is": true, "how": true, "i": true, "can": true,
	"do": true, "does": true, "on": true, "of": true, "to": true, "for": true, "and": true, "in": true, "have": true, "much": true}

// words returns the lower-cased content words of s.
func words(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) {
		if !stopwords[w] {
			out = append(out, w)
		}
	}
	return out
}

// fakeEmbed is a deterministic bag-of-words embedding: each content word
// adds 1 to a hashed dimension.
func fakeEmbed(s string) []float64 {
	v := make([]float64, fakeDims)
	for _, w := range words(s) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%fakeDims]++
	}
	return v
}

// overlap is the fake reranker's score: the query's content words found
// in the text.
func overlap(query, text string) float64 {
	have := map[string]bool{}
	for _, w := range words(text) {
		have[w] = true
	}
	n := 0.0
	for _, w := range words(query) {
		if have[w] {
			n++
		}
	}
	return n
}

// retrievalServer is a fake TEI (/embed, /rerank) and OpenAI-compatible
// embeddings (/v1/embeddings) server counting its calls by path.
type retrievalServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newRetrievalServer(t *testing.T) *retrievalServer {
	t.Helper()
	s := &retrievalServer{calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[r.URL.Path]++
		s.mu.Unlock()
		var req struct {
			Inputs []string `json:"inputs"` // TEI /embed
			Input  []string `json:"input"`  // OpenAI /v1/embeddings
			Query  string   `json:"query"`  // TEI /rerank
			Texts  []string `json:"texts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		var out any
		switch r.URL.Path {
		case "/embed":
			vecs := make([][]float64, len(req.Inputs))
			for i, in := range req.Inputs {
				vecs[i] = fakeEmbed(in)
			}
			out = vecs
		case "/v1/embeddings":
			data := make([]any, len(req.Input))
			for i, in := range req.Input {
				data[i] = map[string]any{"object": "embedding", "index": i, "embedding": fakeEmbed(in)}
			}
			out = map[string]any{"object": "list", "model": "fake-embed", "data": data, "usage": map[string]any{"prompt_tokens": 7, "total_tokens": 7}}
		case "/rerank":
			res := make([]any, len(req.Texts))
			for i, text := range req.Texts {
				res[i] = map[string]any{"index": i, "score": overlap(req.Query, text)}
			}
			out = res
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *retrievalServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// sourceRE finds the first source of a search_docs result.
var sourceRE = regexp.MustCompile(`^\[([^\]]+)\]`)

// chatServer is a fake OpenAI-compatible Chat Completions model: it
// calls search_docs with the user's question, then answers with the
// first passage of the result and cites its source, or says the search
// failed. It records the tool results it saw.
type chatServer struct {
	*httptest.Server
	mu          sync.Mutex
	toolResults []string
	calls       atomic.Int32
}

func newChatServer(t *testing.T) *chatServer {
	t.Helper()
	s := &chatServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		s.calls.Add(1)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Tools) != 1 || req.Tools[0].Function.Name != "search_docs" {
			t.Errorf("chat request: %v, tools %+v", err, req.Tools)
		}
		last := req.Messages[len(req.Messages)-1]
		msg := map[string]any{"role": "assistant"}
		finish := "stop"
		switch {
		case last.Role == "user":
			args, _ := json.Marshal(map[string]string{"query": last.Content})
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%d", s.calls.Load()), "type": "function",
				"function": map[string]any{"name": "search_docs", "arguments": string(args)}}}
			finish = "tool_calls"
		case last.Role == "tool":
			s.mu.Lock()
			s.toolResults = append(s.toolResults, last.Content)
			s.mu.Unlock()
			if m := sourceRE.FindStringSubmatch(last.Content); m != nil {
				passage := strings.SplitN(last.Content, "\n", 3)[1]
				msg["content"] = fmt.Sprintf("%s [%s]", passage, m[1])
			} else {
				msg["content"] = "Sorry, I could not search the documentation (" + last.Content + ")."
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *chatServer) lastToolResult() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.toolResults) == 0 {
		return ""
	}
	return s.toolResults[len(s.toolResults)-1]
}

// TestRun drives the whole example, flags and environment included,
// against fake embedding, rerank and chat servers.
func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		env      func(retrieval string) map[string]string
		question string
		source   string // the cited source
		paths    []string
	}{
		{
			name: "tei with rerank",
			env: func(u string) map[string]string {
				return map[string]string{"TEI_URL": u, "TEI_RERANK_URL": u}
			},
			question: "How long is the frame warranty?",
			source:   "[warranty.txt#1]",
			paths:    []string{"/embed", "/rerank"},
		},
		{
			name:     "tei without rerank",
			env:      func(u string) map[string]string { return map[string]string{"TEI_URL": u} },
			question: "Can I return a bike I have ridden?",
			source:   "[returns.txt#1]",
			paths:    []string{"/embed"},
		},
		{
			name: "openai-compatible embeddings",
			env: func(u string) map[string]string {
				return map[string]string{"RAG_EMBEDDER": "openai", "EMBED_BASE_URL": u, "EMBED_MODEL": "fake-embed"}
			},
			question: "How much does shipping cost?",
			source:   "[shipping.txt#2]",
			paths:    []string{"/v1/embeddings"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ret, model := newRetrievalServer(t), newChatServer(t)
			env := tt.env(ret.URL)
			env["OPENAI_BASE_URL"] = model.URL + "/v1"
			env["OPENAI_MODEL"] = "fake-model"
			var out bytes.Buffer
			err := run(context.Background(), []string{"-top-k", "2", tt.question}, func(k string) string { return env[k] }, strings.NewReader(""), &out)
			if err != nil {
				t.Fatal(err)
			}
			answer := strings.TrimSpace(out.String())
			t.Logf("output:\n%s\ntool result:\n%s", answer, model.lastToolResult())
			if !strings.Contains(answer, "[search_docs ") || !strings.HasSuffix(answer, tt.source) {
				t.Fatalf("output %q does not cite %s", answer, tt.source)
			}
			if n := strings.Count(model.lastToolResult(), "(score "); n != 2 {
				t.Errorf("the tool returned %d passages, want 2 (-top-k 2):\n%s", n, model.lastToolResult())
			}
			for _, p := range tt.paths {
				if ret.count(p) == 0 {
					t.Errorf("no call to %s", p)
				}
			}
			if tt.paths[len(tt.paths)-1] != "/rerank" && ret.count("/rerank") != 0 {
				t.Errorf("reranked without a reranker")
			}
		})
	}
}

// TestRunInteractive answers each line of stdin until an empty one.
func TestRunInteractive(t *testing.T) {
	ret, model := newRetrievalServer(t), newChatServer(t)
	env := map[string]string{"TEI_URL": ret.URL, "OPENAI_BASE_URL": model.URL + "/v1", "OPENAI_MODEL": "m"}
	var out bytes.Buffer
	in := strings.NewReader("Where are the stores?\nHow often should I lubricate the chain?\n\n")
	if err := run(context.Background(), nil, func(k string) string { return env[k] }, in, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[stores.txt#1]", "[maintenance.txt#1]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %s", out.String(), want)
		}
	}
}

// TestSearchFailureReachesModel: with the embedding server down after
// indexing, search_docs fails and the model sees a clear error as the
// tool's result; the turn still completes.
func TestSearchFailureReachesModel(t *testing.T) {
	for _, tt := range []struct {
		name, env string
		down      func(ret *retrievalServer) // takes a server down after indexing
		want      string
	}{
		{name: "embedding server down", down: func(ret *retrievalServer) { ret.Close() },
			want: "error: search_docs: embedding the query: "},
		{name: "reranker down", env: "rerank", down: func(ret *retrievalServer) {},
			want: "error: search_docs: reranking the candidates: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ret, model := newRetrievalServer(t), newChatServer(t)
			cfg := config{ChatURL: model.URL + "/v1", Model: "m", Embedder: "tei", TEIURL: ret.URL, Candidates: 4, TopK: 2}
			if tt.env == "rerank" {
				down := httptest.NewServer(http.NotFoundHandler())
				down.Close()
				cfg.RerankURL = down.URL
			}
			h, err := newChat(context.Background(), cfg, docsFS(t))
			if err != nil {
				t.Fatal(err)
			}
			tt.down(ret)
			var out bytes.Buffer
			if err := ask(context.Background(), h, "s", "How long is the frame warranty?", &out); err != nil {
				t.Fatal(err)
			}
			got := model.lastToolResult()
			t.Logf("the model saw: %s", got)
			if !strings.HasPrefix(got, tt.want) || !strings.Contains(got, string(errcat.ProviderUnavailable)) {
				t.Fatalf("the model saw %q, want %q... with %s", got, tt.want, errcat.ProviderUnavailable)
			}
			if !strings.Contains(out.String(), "Sorry, I could not search") {
				t.Errorf("answer %q", out.String())
			}
		})
	}
}

func docsFS(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	for _, name := range []string{"warranty.txt", "returns.txt"} {
		data, err := embedded.ReadFile("docs/" + name)
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: data}
	}
	return fsys
}

// TestStartupFailures: what stops the example before the first question.
func TestStartupFailures(t *testing.T) {
	ret, model := newRetrievalServer(t), newChatServer(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	good := config{ChatURL: model.URL + "/v1", Model: "m", Embedder: "tei", TEIURL: ret.URL, Candidates: 4, TopK: 2}
	tests := []struct {
		name string
		cfg  func(c *config)
		docs fstest.MapFS
		want error
	}{
		{name: "empty document set", docs: fstest.MapFS{}, want: errNoDocuments},
		{name: "only blank or foreign files", docs: fstest.MapFS{"a.txt": {Data: []byte("\n \n\n")}, "b.pdf": {Data: []byte("x")}}, want: errNoDocuments},
		{name: "embedding server down", cfg: func(c *config) { c.TEIURL = down.URL }, docs: docsFS(t), want: errcat.ProviderUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			if tt.cfg != nil {
				tt.cfg(&c)
			}
			_, err := newChat(context.Background(), c, tt.docs)
			if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "rag: ") {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
	if model.calls.Load() != 0 {
		t.Errorf("the model was called %d times", model.calls.Load())
	}
}

// TestParseConfig: flags override the environment; bad values fail.
func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string // fmt of the config on success
		wantErr string
	}{
		{name: "defaults", env: map[string]string{"OPENAI_MODEL": "m", "OPENAI_API_KEY": "k"},
			want: "{https://api.openai.com/v1 k m tei http://localhost:8080  https://api.openai.com text-embedding-3-small k 8 3}"},
		{name: "flags over env", args: []string{"-model", "x", "-tei-url", "http://t", "-top-k", "5"}, env: map[string]string{"OPENAI_MODEL": "m", "TEI_URL": "http://e", "EMBED_API_KEY": "ek"},
			want: "{https://api.openai.com/v1  x tei http://t  https://api.openai.com text-embedding-3-small ek 8 5}"},
		{name: "no model", wantErr: "set OPENAI_MODEL"},
		{name: "bad embedder", env: map[string]string{"OPENAI_MODEL": "m", "RAG_EMBEDDER": "cohere"}, wantErr: `-embedder "cohere"`},
		{name: "bad top-k", args: []string{"-top-k", "0"}, env: map[string]string{"OPENAI_MODEL": "m"}, wantErr: "at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := parseConfig(tt.args, func(k string) string { return tt.env[k] }, &bytes.Buffer{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(c); got != tt.want {
				t.Errorf("config %s\nwant   %s", got, tt.want)
			}
		})
	}
}
