// Command rag is a runnable retrieval-augmented agent: it embeds the
// small document set shipped with it (the docs directory, embedded in
// the binary: the handbook of a fictional bike shop), keeps the vectors
// in memory, and gives a tool-calling agent one tool, search_docs, which
// embeds the query, takes the nearest passages by cosine similarity,
// reranks them and returns the best ones with their sources; the agent
// answers from them and cites the sources.
//
// The model is any OpenAI-compatible chat endpoint (as in
// examples/openai-agent); embeddings come from a HuggingFace Text
// Embeddings Inference (TEI) instance by default, reranking from a
// second TEI instance serving a reranker:
//
//	docker run -p 8080:80 ghcr.io/huggingface/text-embeddings-inference:cpu-1.7 --model-id BAAI/bge-small-en-v1.5
//	docker run -p 8081:80 ghcr.io/huggingface/text-embeddings-inference:cpu-1.7 --model-id BAAI/bge-reranker-base
//	TEI_URL=http://localhost:8080 TEI_RERANK_URL=http://localhost:8081 \
//		OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 \
//		go run ./examples/rag "How long is the frame warranty?"
//
// With no question on the command line it reads one question per line
// from standard input. Without TEI_RERANK_URL the passages are ranked by
// cosine similarity alone. RAG_EMBEDDER=openai embeds through an
// OpenAI-compatible /v1/embeddings endpoint instead (EMBED_BASE_URL,
// default https://api.openai.com; EMBED_MODEL, default
// text-embedding-3-small; EMBED_API_KEY, default OPENAI_API_KEY). Every
// environment variable but the API keys has a flag of the same meaning
// (run with -h); the keys come from the environment only, so that they
// never show in a process list.
package main

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/llm/retrieval"
	embopenai "github.com/armature-go/armature/llm/retrieval/openai"
	"github.com/armature-go/armature/llm/retrieval/tei"
	"github.com/armature-go/armature/session"
)

//go:embed docs
var embedded embed.FS

// system is the agent's system prompt.
const system = `You answer questions about Pelican Bikes from its documentation.
Always call search_docs first. Answer only from the passages it returns, briefly,
and cite each passage you use by its source in square brackets, e.g. [warranty.txt#1].
If the passages do not answer the question, or the search fails, say so.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(1)
	}
}

// config is the example's configuration, from flags over environment
// variables.
type config struct {
	ChatURL, ChatKey, Model        string
	Embedder                       string // "tei" or "openai"
	TEIURL, RerankURL              string
	EmbedURL, EmbedModel, EmbedKey string
	Candidates, TopK               int
}

// parseConfig reads the flags in args, defaulting each to its
// environment variable; it returns the remaining arguments (the
// question).
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	var c config
	fl := flag.NewFlagSet("rag", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&c.ChatURL, "chat-url", env("OPENAI_BASE_URL", "https://api.openai.com/v1"), "OpenAI-compatible chat endpoint (OPENAI_BASE_URL)")
	fl.StringVar(&c.Model, "model", getenv("OPENAI_MODEL"), "chat model (OPENAI_MODEL), required")
	fl.StringVar(&c.Embedder, "embedder", env("RAG_EMBEDDER", "tei"), "embedding backend: tei or openai (RAG_EMBEDDER)")
	fl.StringVar(&c.TEIURL, "tei-url", env("TEI_URL", "http://localhost:8080"), "TEI embedding instance (TEI_URL)")
	fl.StringVar(&c.RerankURL, "rerank-url", getenv("TEI_RERANK_URL"), "TEI reranker instance; empty ranks by cosine similarity only (TEI_RERANK_URL)")
	fl.StringVar(&c.EmbedURL, "embed-url", env("EMBED_BASE_URL", "https://api.openai.com"), "OpenAI-compatible embeddings origin, with -embedder openai (EMBED_BASE_URL)")
	fl.StringVar(&c.EmbedModel, "embed-model", env("EMBED_MODEL", "text-embedding-3-small"), "embedding model, with -embedder openai (EMBED_MODEL)")
	fl.IntVar(&c.Candidates, "candidates", 8, "passages kept by cosine similarity before reranking")
	fl.IntVar(&c.TopK, "top-k", 3, "passages returned to the model")
	if err := fl.Parse(args); err != nil {
		return c, nil, err
	}
	c.ChatKey = getenv("OPENAI_API_KEY")
	c.EmbedKey = env("EMBED_API_KEY", c.ChatKey)
	switch {
	case c.Model == "":
		return c, nil, errors.New("set OPENAI_MODEL or -model (and OPENAI_BASE_URL / OPENAI_API_KEY as your endpoint needs)")
	case c.Embedder != "tei" && c.Embedder != "openai":
		return c, nil, fmt.Errorf("-embedder %q: want tei or openai", c.Embedder)
	case c.Candidates < 1 || c.TopK < 1:
		return c, nil, errors.New("-candidates and -top-k must be at least 1")
	}
	return c, fl.Args(), nil
}

// run parses the configuration, builds the agent over the embedded
// documents and answers the question in args, or each line of stdin.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	cfg, question, err := parseConfig(args, getenv, stdout)
	if err != nil {
		return err
	}
	docs, err := fs.Sub(embedded, "docs")
	if err != nil {
		return err
	}
	h, err := newChat(ctx, cfg, docs)
	if err != nil {
		return err
	}
	if len(question) > 0 {
		return ask(ctx, h, "cli", strings.Join(question, " "), stdout)
	}
	in := bufio.NewScanner(stdin)
	fmt.Fprintln(stdout, "ask about Pelican Bikes; empty line to quit")
	for {
		fmt.Fprint(stdout, "> ")
		if !in.Scan() || strings.TrimSpace(in.Text()) == "" {
			return in.Err()
		}
		if err := ask(ctx, h, "terminal", in.Text(), stdout); err != nil {
			return err
		}
	}
}

// newChat indexes docs and returns a chat harness over the agent.
func newChat(ctx context.Context, cfg config, docs fs.FS) (*chat.Harness, error) {
	passages, err := loadPassages(docs)
	if err != nil {
		return nil, err
	}
	emb, rerank, err := retrievers(cfg)
	if err != nil {
		return nil, err
	}
	ix, err := newIndex(ctx, emb, rerank, passages)
	if err != nil {
		return nil, err
	}
	search, err := searchTool(ix, cfg.Candidates, cfg.TopK)
	if err != nil {
		return nil, err
	}
	model, err := openai.New(openai.Config{BaseURL: cfg.ChatURL, APIKey: cfg.ChatKey, Model: cfg.Model})
	if err != nil {
		return nil, err
	}
	a, err := agent.New(agent.Config{Provider: model, System: system, Tools: []agent.Tool{search.WithRisk(agent.RiskSafe)}})
	if err != nil {
		return nil, err
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		return nil, err
	}
	return chat.New(chat.Config{Graph: g})
}

// retrievers returns the configured embedding provider and reranker (nil
// without one).
func retrievers(cfg config) (retrieval.EmbeddingProvider, retrieval.RerankProvider, error) {
	var emb retrieval.EmbeddingProvider
	var err error
	if cfg.Embedder == "openai" {
		emb, err = embopenai.New(embopenai.Config{BaseURL: cfg.EmbedURL, APIKey: cfg.EmbedKey, Model: cfg.EmbedModel})
	} else {
		emb, err = tei.NewEmbedder(tei.Config{BaseURL: cfg.TEIURL})
	}
	if err != nil || cfg.RerankURL == "" {
		return emb, nil, err
	}
	rerank, err := tei.NewReranker(tei.Config{BaseURL: cfg.RerankURL})
	return emb, rerank, err
}

// ask sends one question and prints the searches the agent made and its
// answer.
func ask(ctx context.Context, h *chat.Harness, sessionID, question string, out io.Writer) error {
	o, err := h.Send(ctx, sessionID, llm.UserText(question))
	if err != nil {
		return err
	}
	switch o := o.(type) {
	case *chat.Completed:
		for _, m := range o.Replies {
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(out, "[%s %s]\n", tc.Name, tc.Arguments)
			}
			if m.Role == llm.RoleAssistant && m.Text() != "" {
				fmt.Fprintln(out, m.Text())
			}
		}
	case *chat.Errored:
		return fmt.Errorf("the turn failed (%s): %s", o.Bucket, o.Reply.Text())
	default:
		return fmt.Errorf("unexpected outcome %T", o)
	}
	return nil
}
