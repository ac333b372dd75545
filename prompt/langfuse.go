package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
)

// LangfuseConfig configures a Langfuse backend.
type LangfuseConfig struct {
	// BaseURL is the Langfuse host, e.g. https://cloud.langfuse.com or a
	// self-hosted instance. Required.
	BaseURL string
	// PublicKey and SecretKey are the project's API keys (HTTP basic
	// authentication). They never appear in errors.
	PublicKey, SecretKey string
	// HTTPClient sends the requests; nil means a client with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one fetch; zero means 10 seconds.
	Timeout time.Duration
	// Now is the clock of FetchedAt; nil means time.Now.
	Now func() time.Time
}

// Langfuse is a Backend over Langfuse's public prompts API
// (GET /api/public/v2/prompts/{name}?label=...). A Langfuse text prompt
// becomes a text prompt, a chat prompt a chat prompt ({"type":
// "placeholder", "name": ...} entries become placeholder segments).
// Templates are in Langfuse's syntax, {{variable}} only, as its SDKs
// compile them: {{ name }} (or {{ a.b }}, a nested variable) is a
// variable, rendered strictly (a missing one is a prompt_render_error),
// and every other brace — {% %}, {# #}, {{#each}}, an unclosed {{ — is
// literal text, unlike a [Dir] file's Jinja2 subset. The prompt's
// version is Langfuse's version number; its config becomes Sampling (the
// spec's fields, others as extras; a "token_budget" object becomes the
// TokenBudget) and ObservabilityEntities["langfuse_prompt"] is a
// [LangfusePromptRef] for observability's generation linkage.
//
// A 404 is prompt_not_found; a network failure, timeout, 5xx, 429, an
// authentication failure (401/403: a misconfiguration the manager should
// fall back from) or an unreadable body is prompt_store_unavailable.
// Every fetch is a request: wrap the backend in a [Cache].
type Langfuse struct {
	cfg    LangfuseConfig
	client *http.Client
	base   string
}

// LangfusePromptRef identifies a Langfuse prompt version.
type LangfusePromptRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// NewLangfuse returns a Langfuse backend. A missing or invalid BaseURL is
// an error matching ErrInvalidArgument.
func NewLangfuse(cfg LangfuseConfig) (*Langfuse, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: Langfuse BaseURL %q is not an http(s) URL", ErrInvalidArgument, cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	return &Langfuse{cfg: cfg, client: client, base: strings.TrimRight(cfg.BaseURL, "/")}, nil
}

// langfusePrompt is the API's prompt object.
type langfusePrompt struct {
	Name    string          `json:"name"`
	Version int             `json:"version"`
	Type    string          `json:"type"`
	Prompt  json.RawMessage `json:"prompt"`
	Config  map[string]any  `json:"config"`
	Labels  []string        `json:"labels"`
	Tags    []string        `json:"tags"`
}

// maxLangfuseBody bounds a prompt response.
const maxLangfuseBody = 4 << 20

// Fetch implements Backend.
func (l *Langfuse) Fetch(ctx context.Context, name, label string, opts FetchOptions) (*Prompt, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	unavailable := func(msg string, cause error) error {
		return errcat.Wrap(errcat.PromptStoreUnavailable, fmt.Sprintf("prompt: langfuse %q (label %q): %s", name, label, msg), cause)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	u := l.base + "/api/public/v2/prompts/" + url.PathEscape(name) + "?label=" + url.QueryEscape(label)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, unavailable("cannot build the request", err)
	}
	req.SetBasicAuth(l.cfg.PublicKey, l.cfg.SecretKey)
	req.Header.Set("Accept", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL adds nothing and the error stays free of credentials
		}
		return nil, unavailable("request failed", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLangfuseBody+1))
	switch {
	case err != nil:
		return nil, unavailable("reading the response", err)
	case resp.StatusCode == http.StatusNotFound:
		return nil, notFound(name, label)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, unavailable("the API keys were refused (HTTP "+strconv.Itoa(resp.StatusCode)+")", nil)
	case resp.StatusCode/100 != 2:
		return nil, unavailable("HTTP "+strconv.Itoa(resp.StatusCode), nil)
	case len(data) > maxLangfuseBody:
		return nil, unavailable("the response is larger than 4 MiB", nil)
	}
	var lp langfusePrompt
	if err := json.Unmarshal(data, &lp); err != nil {
		return nil, unavailable("the response is not a prompt", err)
	}
	p, err := lp.toPrompt(label)
	if err != nil {
		return nil, unavailable("the prompt cannot be used", err)
	}
	p.FetchedAt = l.cfg.Now()
	return p, nil
}

// langfuseSyntax parses a template of a Langfuse prompt.
func langfuseSyntax(src string) (*Template, error) { return parseLangfuseTemplate(src), nil }

// toPrompt maps a Langfuse prompt.
func (lp *langfusePrompt) toPrompt(label string) (*Prompt, error) {
	p := &Prompt{Name: lp.Name, Version: strconv.Itoa(lp.Version), Label: label,
		ObservabilityEntities: map[string]any{"langfuse_prompt": LangfusePromptRef{Name: lp.Name, Version: lp.Version}}}
	if len(lp.Tags) > 0 || len(lp.Labels) > 0 {
		p.Metadata = map[string]any{"tags": lp.Tags, "labels": lp.Labels}
	}
	switch lp.Type {
	case "", "text":
		var text string
		if err := json.Unmarshal(lp.Prompt, &text); err != nil {
			return nil, fmt.Errorf("a text prompt's prompt is not a string: %w", err)
		}
		p.Template = parseLangfuseTemplate(text)
	case "chat":
		var msgs []map[string]any
		if err := json.Unmarshal(lp.Prompt, &msgs); err != nil {
			return nil, fmt.Errorf("a chat prompt's prompt is not a message list: %w", err)
		}
		segs := make([]any, 0, len(msgs))
		for _, m := range msgs {
			if m["type"] == "placeholder" {
				segs = append(segs, map[string]any{"placeholder": m["name"]})
				continue
			}
			segs = append(segs, map[string]any{"role": m["role"], "content": m["content"]})
		}
		chat, err := parseChat(segs, langfuseSyntax)
		if err != nil {
			return nil, err
		}
		p.Chat = chat
	default:
		return nil, fmt.Errorf("prompt type %q is not text or chat", lp.Type)
	}
	if len(lp.Config) > 0 {
		cfg := make(map[string]any, len(lp.Config))
		for k, v := range lp.Config {
			switch k {
			case "token_budget":
				if tb, ok := v.(map[string]any); ok {
					p.TokenBudget = ParseTokenBudget(tb)
				}
			case "model":
				// The bound provider decides the model (prompt-management §3).
			default:
				cfg[k] = v
			}
		}
		if len(cfg) > 0 {
			s, err := ParseSampling(cfg)
			if err != nil {
				return nil, err
			}
			p.Sampling = s
		}
	}
	p.TemplateHash = HashTemplate(p)
	return p, nil
}
