package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/prompt"
)

// workspace is the YAML file that declares armature serve's agents:
//
//	default_agent: support
//	task_hints: {refunds: support}
//	agents:
//	  - id: support
//	    provider: openai          # demo | openai | anthropic | gemini
//	    model: gpt-4o-mini
//	    base_url: https://api.openai.com/v1
//	    api_key_env: OPENAI_API_KEY   # the key is read from the environment, never the file
//	    timeout: 90s              # bounds each model call (default 10m); a hung upstream fails the turn then
//	    max_response_bytes: 32MiB # bounds what each model call reads of the reply (default 16MiB); a larger one fails the turn
//	    tool_timeout: 30s         # bounds each tool call (default 2m); the model is told the tool did not answer
//	    max_tool_result_bytes: 64KiB  # cuts a longer tool result, with a note (default 256KiB)
//	    system: You are a helpful support agent.
//	    tools: [lookup_order, issue_refund]
//	    approval: [issue_refund]
//	    risk: {issue_refund: dangerous}   # safe | caution (default) | dangerous
//	    max_tokens: 1024
//	    extras: {parallel_tool_calls: false}   # provider-specific request fields (llm.Config.Extras);
//	                               # for anthropic, extended thinking: {thinking: {type: enabled, budget_tokens: 2048}}
//	    window: {max_messages: 200, max_tokens: 100000}   # what each model call sends of the history (agent.Window)
//	    compaction: {}   # summarize what the window leaves out (agent.Compaction); prompt: sets the summarizer's instructions
//	  - id: billing
//	    provider: openai
//	    system_prompt: {name: billing, label: production, variables: {team: billing}}
//	  - id: researcher
//	    backend: adk               # the adapter running the agent (package adapter); default armature
//	    provider: openai           # handed to the adapter as its model (adapter.Agent.Provider)
//	    max_tokens: 512            # with temperature: the bridged model's settings (adapter.Agent.Sampling)
//	    tools: [lookup_order]
//	    adk: {instruction: ...}    # the backend-native section, named like the backend: typed passthrough config
//	                               # (compaction, system_prompt, max_steps, tool_timeout and max_tool_result_bytes
//	                               # are the native backend's: refused here;
//	                               # window bounds the history handed to an upstream that takes it, as eino's does)
//	progress:
//	  narration: {enabled: true, style: concise}   # runtime.progress.narration events
//	direct_tools: {ops: ["*"], support: [lookup_order]}   # tenant → tools it may call directly (POST /v1/agents/{agent}/tools/{tool})
//	prompts:                       # managed prompts (package prompt), for system_prompt
//	  dir: prompts                 # prompt files, relative to this file
//	  langfuse:                    # tried first when set
//	    base_url: https://cloud.langfuse.com
//	    public_key_env: LANGFUSE_PUBLIC_KEY   # the keys are read from the environment; a variable
//	    secret_key_env: LANGFUSE_SECRET_KEY   # named and not set is refused at startup
//	  cache_ttl: 60s               # how long a fetched prompt is reused (default 60s; 0s: never)
//	  labels: {default: production, billing: staging}
type workspace struct {
	DefaultAgent string            `yaml:"default_agent"`
	TaskHints    map[string]string `yaml:"task_hints"`
	Agents       []agentSpec       `yaml:"agents"`
	Prompts      *promptsSpec      `yaml:"prompts"`
	// Progress enables progress narration (server.Config.Narration).
	Progress *struct {
		Narration struct {
			Enabled bool   `yaml:"enabled"`
			Style   string `yaml:"style"`
		} `yaml:"narration"`
	} `yaml:"progress"`
	// DirectTools authorizes direct tool requests per tenant
	// (server.Config.DirectTools).
	DirectTools map[string][]string `yaml:"direct_tools"`
	// dir is the directory of the workspace file (relative paths).
	dir string
}

// promptsSpec declares the prompt stores of system_prompt.
type promptsSpec struct {
	Dir      string `yaml:"dir"`
	Langfuse *struct {
		BaseURL      string `yaml:"base_url"`
		PublicKeyEnv string `yaml:"public_key_env"`
		SecretKeyEnv string `yaml:"secret_key_env"`
	} `yaml:"langfuse"`
	CacheTTL string            `yaml:"cache_ttl"`
	Labels   map[string]string `yaml:"labels"`
}

// managedPromptSpec is an agent's system_prompt.
type managedPromptSpec struct {
	Name      string         `yaml:"name"`
	Label     string         `yaml:"label"`
	Variables map[string]any `yaml:"variables"`
}

type agentSpec struct {
	ID string `yaml:"id"`
	// Backend names the adapter that runs the agent (package adapter);
	// "" is the native backend, armature.
	Backend string `yaml:"backend"`
	// Sections holds the keys the spec does not declare: the
	// backend-native section is the one named like Backend.
	Sections  map[string]any `yaml:",inline"`
	Provider  string         `yaml:"provider"`
	Model     string         `yaml:"model"`
	BaseURL   string         `yaml:"base_url"`
	APIKeyEnv string         `yaml:"api_key_env"`
	// Timeout bounds each model call (a Go duration, "90s", "5m");
	// absent, the provider's default (10 minutes).
	Timeout string `yaml:"timeout"`
	// MaxResponseBytes bounds what each model call reads of the
	// upstream's reply (bytes, optionally with a KiB, MiB or GiB
	// suffix); absent, the provider's default (16 MiB).
	MaxResponseBytes string `yaml:"max_response_bytes"`
	System           string `yaml:"system"`
	// SystemPrompt names a managed prompt (the workspace's prompts)
	// rendered as the system prompt at each turn, instead of System.
	SystemPrompt *managedPromptSpec `yaml:"system_prompt"`
	Tools        []string           `yaml:"tools"`
	Approval     []string           `yaml:"approval"`
	// Risk declares tools' risk tiers (agent.Risk), overriding the
	// built-in tool's own.
	Risk     map[string]string `yaml:"risk"`
	MaxSteps int               `yaml:"max_steps"`
	// ToolTimeout bounds each tool call (a Go duration; absent,
	// agent.DefaultToolTimeout) and MaxToolResultBytes each tool result
	// (bytes, with an optional KiB, MiB or GiB suffix; absent,
	// agent.DefaultMaxToolResultBytes): agent.Config's.
	ToolTimeout        string `yaml:"tool_timeout"`
	MaxToolResultBytes string `yaml:"max_tool_result_bytes"`
	// MaxTokens and Temperature set the model's sampling; the Anthropic
	// mapping requires max_tokens, so it defaults to 1024 there.
	MaxTokens   *int     `yaml:"max_tokens"`
	Temperature *float64 `yaml:"temperature"`
	// Extras are provider-specific fields sent with each model request
	// (llm.Config.Extras), such as Anthropic's extended thinking
	// ({thinking: {type: enabled, budget_tokens: 2048}}) or OpenAI's
	// reasoning_effort. One the provider's mapping sets itself with
	// another value (model, messages, tools, max_tokens, ...) is refused
	// at startup, as the demo model's, which sends no request.
	Extras map[string]any `yaml:"extras"`
	// Window bounds the part of the session's history each model call
	// sends (agent.Window); absent, the whole history is sent.
	Window windowSpec `yaml:"window"`
	// Compaction, when present (even empty), makes the agent summarize
	// what its window leaves out (agent.Compaction); it needs a window.
	Compaction *compactionSpec `yaml:"compaction"`
}

// compactionSpec is an agent's compaction in the workspace: prompt is the
// summarizing call's system prompt (empty: agent.DefaultCompactionPrompt).
type compactionSpec struct {
	Prompt string `yaml:"prompt"`
}

// windowSpec is an agent's context window in the workspace: at most
// max_messages history messages and max_tokens estimated input tokens
// (system prompt and tool definitions included) a model call; 0 or absent
// is no bound.
type windowSpec struct {
	MaxMessages int `yaml:"max_messages"`
	MaxTokens   int `yaml:"max_tokens"`
}

// loadWorkspace reads path, or returns the built-in demo workspace when
// path is empty.
func loadWorkspace(path string) (*workspace, error) {
	if path == "" {
		return &workspace{Agents: []agentSpec{{ID: "demo", Provider: "demo", Model: demo.ModelName,
			Tools: []string{"lookup_order", "issue_refund"}, Approval: []string{"issue_refund"}}}}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxWorkspaceBytes+1))
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if len(raw) > maxWorkspaceBytes {
		return nil, fmt.Errorf("workspace %s: larger than %d bytes", path, maxWorkspaceBytes)
	}
	return parseWorkspace(raw, path)
}

// parseWorkspace decodes and checks the workspace file path holds, raw
// (at most maxWorkspaceBytes).
func parseWorkspace(raw []byte, path string) (*workspace, error) {
	// Anchors and aliases are YAML's own (a <<: *defaults shared by
	// agents), but each alias is a copy of its anchor once decoded: a
	// few kilobytes of nested aliases ("billion laughs") would expand
	// to gigabytes, in the decoder or when a backend-native section is
	// handed over as JSON. The document is measured as decoded first.
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", path, err)
	}
	if err := checkExpansion(&doc); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", path, err)
	}
	// Strict: a key the workspace does not declare is a mistake (a typo
	// such as timout:, or a secret put where none belongs), refused with
	// its line, never ignored; so is a second document.
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var ws workspace
	if err := dec.Decode(&ws); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("workspace %s: %w", path, err)
	}
	var more yaml.Node // a node: its aliases are not expanded
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("workspace %s: holds more than one YAML document", path)
	}
	if len(ws.Agents) == 0 {
		return nil, fmt.Errorf("workspace %s: no agents", path)
	}
	for i, a := range ws.Agents {
		// An agent's undeclared keys are backend-native sections (a
		// mapping, named like a backend: the agent's own is its
		// adapter's config, another backend's waits for a switch); any
		// other value is a mistake (timout: 30s, an api_key: put in the
		// file).
		for _, k := range slices.Sorted(maps.Keys(a.Sections)) {
			if _, section := a.Sections[k].(map[string]any); !section && a.Sections[k] != nil {
				return nil, fmt.Errorf("workspace %s: line %d: agent %q: unknown key %q", path, agentKeyLine(&doc, i, k), a.ID, k)
			}
		}
		// Sampling the upstream would refuse (or a NaN every turn would
		// fail on) is refused here, once.
		if a.MaxTokens != nil && *a.MaxTokens < 1 {
			return nil, fmt.Errorf("workspace %s: agent %q: max_tokens must be at least 1, not %d", path, a.ID, *a.MaxTokens)
		}
		if t := a.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0) {
			return nil, fmt.Errorf("workspace %s: agent %q: temperature must be a finite number of at least 0, not %v", path, a.ID, *t)
		}
	}
	if p := ws.Progress; p != nil && !slices.Contains(narrationStyles, p.Narration.Style) {
		return nil, fmt.Errorf("workspace %s: progress.narration.style %q is unknown: the accepted values are %s (the default)",
			path, p.Narration.Style, strings.Join(quoted(narrationStyles[1:]), ", "))
	}
	if err := ws.validate(); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", path, err)
	}
	ws.dir = filepath.Dir(path)
	return &ws, nil
}

// maxAgentID bounds an agent's id, as the server does (a request names
// its agent in at most that many bytes).
const maxAgentID = 128

// validate refuses, when the workspace loads, what the server would
// refuse only after the store opened (a shared database migrated on the
// way out): agents without an id, or two with one, an id the server
// cannot serve, a default agent, task hint or direct tool naming
// nothing the workspace declares.
func (ws *workspace) validate() error {
	ids := map[string]bool{}
	declared := map[string]bool{}
	for _, a := range ws.Agents {
		switch {
		case a.ID == "":
			return errors.New("an agent has no id")
		case len(a.ID) > maxAgentID || !utf8.ValidString(a.ID) || strings.ContainsFunc(a.ID, controlOrFormat):
			return fmt.Errorf("agent id %q must be 1-%d bytes of UTF-8 without control or format characters", a.ID, maxAgentID)
		case ids[a.ID]:
			return fmt.Errorf("two agents are named %q", a.ID)
		}
		ids[a.ID] = true
		if a.Backend != "" && !adapterName(a.Backend) {
			return fmt.Errorf("agent %q: backend %q is not an adapter name (1-64 bytes of [a-z0-9_-])", a.ID, a.Backend)
		}
		for _, t := range a.Tools {
			declared[t] = true
		}
	}
	if ws.DefaultAgent != "" && !ids[ws.DefaultAgent] {
		return fmt.Errorf("default_agent %q is not among the agents", ws.DefaultAgent)
	}
	for _, hint := range slices.Sorted(maps.Keys(ws.TaskHints)) {
		if id := ws.TaskHints[hint]; !ids[id] {
			return fmt.Errorf("task_hints routes %q to %q, which is not among the agents", hint, id)
		}
	}
	for _, tenant := range slices.Sorted(maps.Keys(ws.DirectTools)) {
		if tenant == "" {
			return errors.New("direct_tools names an empty tenant")
		}
		for _, name := range ws.DirectTools[tenant] {
			if name != "*" && !declared[name] {
				return fmt.Errorf("direct_tools gives tenant %q tool %q, which no agent declares", tenant, name)
			}
		}
	}
	return nil
}

// adapterName reports whether s can name a registered adapter (package
// adapter: 1-64 bytes of [a-z0-9_-]).
func adapterName(s string) bool {
	return len(s) <= 64 && s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	})
}

// controlOrFormat reports a control or format character, which an id
// must not hold.
func controlOrFormat(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// maxExpandedWorkspace bounds a workspace document as decoded, its
// aliases expanded: its nodes and their scalars' bytes together. Four
// times the file's bound leaves room for any anchors a person shares.
const maxExpandedWorkspace = 4 * maxWorkspaceBytes

// errWorkspaceExpansion is a workspace whose aliases expand past
// maxExpandedWorkspace.
var errWorkspaceExpansion = fmt.Errorf("its aliases expand to more than %d bytes", maxExpandedWorkspace)

// checkExpansion refuses a document whose decoded size, each alias
// counted as a copy of its anchor, exceeds maxExpandedWorkspace. Each
// anchored node is measured once (memoized), so the check is linear in
// the document, however deep the aliasing.
// agentKeyLine is the line of key in the i-th agent of the workspace
// document doc, 0 when it is not found.
func agentKeyLine(doc *yaml.Node, i int, key string) int {
	mapping := func(n *yaml.Node, key string) *yaml.Node {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				return n.Content[j]
			}
		}
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return 0
	}
	root := doc.Content[0]
	k := mapping(root, "agents")
	if k == nil {
		return 0
	}
	agents := root.Content[slices.Index(root.Content, k)+1]
	if agents.Kind != yaml.SequenceNode || i >= len(agents.Content) {
		return 0
	}
	if n := mapping(agents.Content[i], key); n != nil {
		return n.Line
	}
	return 0
}

func checkExpansion(doc *yaml.Node) error {
	sizes := map[*yaml.Node]int64{}
	var size func(n *yaml.Node, depth int) (int64, error)
	size = func(n *yaml.Node, depth int) (int64, error) {
		if n == nil {
			return 0, nil
		}
		if depth > 10000 {
			return 0, errors.New("nested too deeply")
		}
		if n.Kind == yaml.AliasNode {
			if n.Alias == nil {
				return 1, nil
			}
			if s, ok := sizes[n.Alias]; ok {
				if s < 0 {
					return 0, errors.New("an anchor's value contains itself")
				}
				return s, nil
			}
			sizes[n.Alias] = -1 // in progress: an alias back to it is a cycle
			s, err := size(n.Alias, depth+1)
			if err != nil {
				return 0, err
			}
			sizes[n.Alias] = s
			return s, nil
		}
		total := 1 + int64(len(n.Value))
		for _, c := range n.Content {
			s, err := size(c, depth+1)
			if err != nil {
				return 0, err
			}
			if total += s; total > maxExpandedWorkspace {
				return 0, errWorkspaceExpansion
			}
		}
		return total, nil
	}
	s, err := size(doc, 0)
	if err == nil && s > maxExpandedWorkspace {
		err = errWorkspaceExpansion
	}
	return err
}

// narrationStyles are the narration styles a workspace may name ("" is
// the default, concise): the built-in template provider writes one
// short sentence a step, and knows no other style.
var narrationStyles = []string{"", "concise"}

// quoted returns each of vals in double quotes.
func quoted(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strconv.Quote(v)
	}
	return out
}

// maxWorkspaceBytes bounds a workspace file.
const maxWorkspaceBytes = 4 << 20

// promptManager builds the manager of the workspace's prompts: Langfuse
// (when declared) then the prompt directory, each behind a cache that
// serves a stale prompt while its source is down. It returns nil when
// the workspace declares no prompts.
func (ws *workspace) promptManager(log *slog.Logger) (*prompt.Manager, error) {
	p := ws.Prompts
	if p == nil {
		return nil, nil
	}
	ttl := time.Minute
	if p.CacheTTL != "" {
		d, err := time.ParseDuration(p.CacheTTL)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("prompts: cache_ttl %q is not a duration", p.CacheTTL)
		}
		ttl = d
	}
	cache := func(b prompt.Backend) prompt.Backend {
		if ttl == 0 {
			return b // cache_ttl: 0s reads the source at every turn
		}
		return prompt.NewCache(b, prompt.CacheConfig{TTL: ttl, ServeStale: true, Logger: log})
	}
	var backends []prompt.Backend
	if lf := p.Langfuse; lf != nil {
		pk, err := keyEnv("public_key_env", lf.PublicKeyEnv)
		if err != nil {
			return nil, err
		}
		sk, err := keyEnv("secret_key_env", lf.SecretKeyEnv)
		if err != nil {
			return nil, err
		}
		b, err := prompt.NewLangfuse(prompt.LangfuseConfig{BaseURL: lf.BaseURL, PublicKey: pk, SecretKey: sk})
		if err != nil {
			return nil, fmt.Errorf("prompts: langfuse: %w", err)
		}
		backends = append(backends, cache(b))
	}
	if p.Dir != "" {
		dir := p.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(ws.dir, dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("prompts: dir %s is not a directory", dir)
		}
		backends = append(backends, cache(prompt.NewDir(dir)))
	}
	if len(backends) == 0 {
		return nil, fmt.Errorf("prompts: declare a dir or langfuse")
	}
	var resolver prompt.LabelResolver
	if len(p.Labels) > 0 {
		resolver = prompt.Labels(p.Labels)
	}
	return prompt.NewManager(prompt.ManagerConfig{Backends: backends, Resolver: resolver, Logger: log})
}

// keyEnv reads the Langfuse key the variable named by the workspace's
// key (public_key_env, secret_key_env) holds. A variable named and unset
// (or empty) is refused, as an agent's api_key_env is: every fetch would
// be refused by Langfuse and the prompts silently served from the dir.
// The error names the key and the variable, never a value.
func keyEnv(key, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("prompts: langfuse: %s names %s, which is not set", key, name)
	}
	return v, nil
}

// promptCheckTimeout bounds the startup check of the managed prompts, all
// of them.
const promptCheckTimeout = 10 * time.Second

// checkPrompts fetches and renders, once at startup, every managed
// system prompt the agents name (with their variables), as each turn
// will: a prompt that is missing, unreadable or does not render fails
// every turn of its agent. When the prompts are local files only (a
// dir, part of what is deployed) that is a mistake in the deployment,
// refused here, naming the prompt and the file looked for. With a
// Langfuse backend, a prompt may be published (or Langfuse reachable)
// after the server starts, and failing the start would take every other
// agent down with it: the failure is logged as a warning instead, and
// the turns fail until the prompt is there. m is the workspace's prompt
// manager (nil when it declares no prompts).
func (ws *workspace) checkPrompts(ctx context.Context, m *prompt.Manager, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, promptCheckTimeout)
	defer cancel()
	for _, a := range ws.Agents {
		sp := a.SystemPrompt
		if sp == nil {
			continue
		}
		if m == nil {
			return fmt.Errorf("workspace: agent %q: system_prompt %q needs the workspace's prompts section", a.ID, sp.Name)
		}
		label := m.Label(sp.Name, sp.Label)
		err := checkPrompt(ctx, m, sp)
		if err == nil {
			continue
		}
		if ws.Prompts.Langfuse != nil {
			log.WarnContext(ctx, "serve: a managed prompt cannot be served now; the agent's turns fail until it can",
				"agent", a.ID, "prompt", sp.Name, "label", label, "looked_in", ws.promptPlaces(sp.Name), "error", err)
			continue
		}
		what := "cannot be used"
		if errors.Is(err, errcat.PromptNotFound) {
			what = "does not exist"
		}
		return fmt.Errorf("workspace: agent %q: system_prompt %q (label %q) %s: looked in %s: %w",
			a.ID, sp.Name, label, what, ws.promptPlaces(sp.Name), err)
	}
	return nil
}

// checkPrompt fetches and renders sp as a turn of its agent does: with
// the agent's own check (agent.ManagedPrompt.Render), so a prompt every
// turn refuses (a chat prompt with a user segment) is refused here too.
func checkPrompt(ctx context.Context, m *prompt.Manager, sp *managedPromptSpec) error {
	_, _, err := sp.managed(m).Render(ctx)
	return err
}

// managed is the agent's managed prompt sp names, fetched through m.
func (sp *managedPromptSpec) managed(m *prompt.Manager) *agent.ManagedPrompt {
	return &agent.ManagedPrompt{Manager: m, Name: sp.Name, Label: sp.Label, Variables: sp.Variables}
}

// promptPlaces names where the prompt name is looked for: Langfuse's
// host, then the prompt file of the dir.
func (ws *workspace) promptPlaces(name string) string {
	var places []string
	if lf := ws.Prompts.Langfuse; lf != nil {
		places = append(places, "Langfuse at "+lf.BaseURL)
	}
	if dir := ws.Prompts.Dir; dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(ws.dir, dir)
		}
		places = append(places, filepath.Join(dir, name+".yaml"))
	}
	return strings.Join(places, ", then ")
}

// builtinTools are the tools a workspace may name.
func builtinTools() map[string]agent.Tool {
	out := map[string]agent.Tool{}
	for _, t := range demo.Tools() {
		t.NeedsApproval = false
		out[t.Definition.Name] = t
	}
	return out
}

// build constructs the agent a spec declares; prompts is the workspace's
// prompt manager (nil when it declares none).
func (s agentSpec) build(ctx context.Context, prompts *prompt.Manager) (*agent.Agent, error) {
	provider, err := s.provider()
	if err != nil {
		return nil, err
	}
	tools, err := s.gateway()
	if err != nil {
		return nil, err
	}
	if err := s.checkExtras(provider, tools); err != nil {
		return nil, err
	}
	cfg := agent.Config{Provider: provider, System: s.System, Tools: tools, MaxSteps: s.MaxSteps, Model: s.sampling(),
		Window: agent.Window{MaxMessages: s.Window.MaxMessages, MaxTokens: s.Window.MaxTokens}}
	if sp := s.SystemPrompt; sp != nil {
		if prompts == nil {
			return nil, fmt.Errorf("system_prompt %q needs the workspace's prompts section", sp.Name)
		}
		cfg.SystemPrompt = sp.managed(prompts)
	}
	if s.Compaction != nil {
		cfg.Compaction = &agent.Compaction{Prompt: s.Compaction.Prompt}
	}
	if cfg.ToolTimeout, cfg.MaxToolResultBytes, err = s.toolBounds(); err != nil {
		return nil, err
	}
	return agent.New(cfg)
}

// toolBounds is the spec's tool_timeout and max_tool_result_bytes (zero
// when absent: the agent package's defaults).
func (s agentSpec) toolBounds() (timeout time.Duration, maxBytes int, err error) {
	if s.ToolTimeout != "" {
		d, err := time.ParseDuration(s.ToolTimeout)
		if err != nil || d <= 0 {
			return 0, 0, fmt.Errorf("tool_timeout %q: a positive duration such as 30s or 5m", s.ToolTimeout)
		}
		timeout = d
	}
	if s.MaxToolResultBytes != "" {
		n, err := parseBytes(s.MaxToolResultBytes)
		if err != nil || n <= 0 || n > math.MaxInt32 {
			return 0, 0, fmt.Errorf("max_tool_result_bytes %q: a positive size such as 64KiB", s.MaxToolResultBytes)
		}
		maxBytes = int(n)
	}
	return timeout, maxBytes, nil
}

// sampling is the spec's model settings: max_tokens and temperature,
// with a max_tokens of 1024 for the anthropic provider when none is set
// (its mapping requires one).
func (s agentSpec) sampling() llm.Config {
	model := llm.Config{MaxTokens: s.MaxTokens, Temperature: s.Temperature, Extras: s.Extras}
	if model.MaxTokens == nil && s.Provider == "anthropic" {
		model.MaxTokens = new(1024)
	}
	return model
}

// checkExtras refuses, at startup, extras the agent's model would refuse
// on every call, with their key: a value that is not JSON (a NaN, a
// mapping with keys that are not strings), or a key naming a field the
// provider's mapping sets itself with another value (llm.ErrManagedField:
// model, messages, stream, the tools when the agent has some, max_tokens
// when set, ...), in an atomic or a streamed request. The demo model
// sends no request to carry them.
func (s agentSpec) checkExtras(p llm.Provider, tools []agent.Tool) error {
	if len(s.Extras) == 0 {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(s.Extras)) {
		if _, err := llm.CanonicalValue(s.Extras[k]); err != nil {
			return fmt.Errorf("extras: %q is not a JSON value: %v", k, err)
		}
	}
	b, ok := p.(interface {
		RequestBody(*llm.Request) ([]byte, error)
	})
	if !ok {
		// A backend's own model (adk: {model: ...}) is configured in its
		// section, not by the workspace's keys.
		return errors.New("extras: the demo model sends no request to carry them (set provider, or configure a backend's own model in its section)")
	}
	req := &llm.Request{Messages: []llm.Message{llm.UserText("ping")}, Config: s.sampling()}
	for _, t := range tools {
		req.Tools = append(req.Tools, t.Definition)
	}
	for _, stream := range []bool{false, true} {
		req.Stream = stream
		if _, err := b.RequestBody(req); err != nil {
			return fmt.Errorf("extras: %w", err)
		}
	}
	return nil
}

// nativeOnly refuses the keys only the native backend implements on an
// agent another backend runs: they would be silently ignored. An
// upstream framework configures its own loop bounds and prompts in its
// backend-native section. (window is handed to the adapter,
// adapter.Agent.Window: the runtime cuts the history it hands over, and
// an adapter whose upstream keeps its own history cuts what the upstream
// sends its model, or refuses it.)
func (s agentSpec) nativeOnly() error {
	if s.Backend == "" || s.Backend == adapter.Native {
		return nil
	}
	var keys []string
	if s.Compaction != nil {
		keys = append(keys, "compaction")
	}
	if s.SystemPrompt != nil {
		keys = append(keys, "system_prompt")
	}
	if s.MaxSteps != 0 {
		keys = append(keys, "max_steps")
	}
	if s.ToolTimeout != "" {
		keys = append(keys, "tool_timeout")
	}
	if s.MaxToolResultBytes != "" {
		keys = append(keys, "max_tool_result_bytes")
	}
	if len(keys) > 0 {
		what := "this key"
		if len(keys) > 1 {
			what = "these keys"
		}
		// The section has no tool bounds: an adapter's tools take the
		// defaults (agent.Tool.Bounded), so the message must not send
		// the user there for them.
		return fmt.Errorf("%s: only the native backend (%s) implements %s; backend %s takes its loop bound and instruction in the agent's %s section, and runs its tools with the default tool bounds",
			strings.Join(keys, ", "), adapter.Native, what, s.Backend, s.Backend)
	}
	return nil
}

// gateway builds the spec's tools (the runtime's tool gateway): the
// built-in tools it names, with its approval and risk declarations.
func (s agentSpec) gateway() ([]agent.Tool, error) {
	builtins := builtinTools()
	var tools []agent.Tool
	for _, name := range s.Tools {
		t, ok := builtins[name]
		if !ok {
			return nil, fmt.Errorf("unknown tool %q", name)
		}
		if slices.Contains(s.Approval, name) {
			t = t.WithApproval()
		}
		if r, ok := s.Risk[name]; ok {
			risk, err := agent.ParseRisk(r)
			if err != nil {
				return nil, fmt.Errorf("risk of %q: %w", name, err)
			}
			t = t.WithRisk(risk)
		}
		tools = append(tools, t)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Risk)) {
		if !slices.Contains(s.Tools, name) {
			return nil, fmt.Errorf("risk names %q, which is not among the agent's tools", name)
		}
	}
	for _, name := range s.Approval {
		if !slices.Contains(s.Tools, name) {
			return nil, fmt.Errorf("approval names %q, which is not among the agent's tools", name)
		}
	}
	return tools, nil
}

// section is the spec's backend-native section as JSON (nil when absent).
func (s agentSpec) section() (json.RawMessage, error) {
	v, ok := s.Sections[s.Backend]
	if !ok || s.Backend == "" {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the %s section is not JSON-compatible: %w", s.Backend, err)
	}
	return raw, nil
}

// adapterAgent is the spec as an adapter receives it.
func (s agentSpec) adapterAgent() (*adapter.Agent, error) {
	if err := s.nativeOnly(); err != nil {
		return nil, err
	}
	provider, err := s.provider()
	if err != nil {
		return nil, err
	}
	tools, err := s.gateway()
	if err != nil {
		return nil, err
	}
	section, err := s.section()
	if err != nil {
		return nil, err
	}
	backend := s.Backend
	if backend == "" {
		backend = adapter.Native
	}
	if err := s.checkExtras(provider, tools); err != nil {
		return nil, err
	}
	if backend == adapter.Native {
		// The native factory builds the agent once the store opened: what
		// agent.New refuses (a negative window, compaction without one,
		// a tool named twice, system with system_prompt) is refused now.
		// The prompt manager is a placeholder, never called: checkPrompts
		// checks the managed prompt itself.
		if _, err := s.build(context.Background(), &prompt.Manager{}); err != nil {
			return nil, err
		}
	}
	return &adapter.Agent{ID: s.ID, Backend: backend, Model: s.Model, System: s.System, Provider: provider, Sampling: s.sampling(),
		Window: agent.Window{MaxMessages: s.Window.MaxMessages, MaxTokens: s.Window.MaxTokens}, Tools: tools, Config: section}, nil
}

// adapterWorkspace is the workspace as adapters receive it.
func (ws *workspace) adapterWorkspace() (*adapter.Workspace, error) {
	out := &adapter.Workspace{DefaultAgent: ws.DefaultAgent, Dir: ws.dir}
	for _, spec := range ws.Agents {
		ag, err := spec.adapterAgent()
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", spec.ID, err)
		}
		out.Agents = append(out.Agents, ag)
	}
	return out, nil
}

// adapters is armature serve's adapter registry: the native backend,
// whose factory builds the agent graph from the workspace's spec
// (windows, compaction, managed prompts included). The main module
// carries no upstream framework; a program embedding Armature registers
// its own adapters (package adapter).
func (ws *workspace) adapters(prompts *prompt.Manager, extra map[string]adapter.Factory) (*adapter.Registry, error) {
	specs := map[string]agentSpec{}
	for _, s := range ws.Agents {
		specs[s.ID] = s
	}
	factories := map[string]adapter.Factory{
		adapter.Native: func(ctx context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
			a, err := specs[req.Agent.ID].build(ctx, prompts)
			if err != nil {
				return nil, err
			}
			return adapter.NewNative(a), nil
		},
	}
	for name, f := range extra {
		if name == adapter.Native {
			return nil, fmt.Errorf("serve: an adapter factory may not replace the native backend %q", adapter.Native)
		}
		factories[name] = f
	}
	return adapter.NewRegistry(factories)
}

// provider builds the spec's model provider.
func (s agentSpec) provider() (llm.Provider, error) {
	key := ""
	if s.APIKeyEnv != "" {
		key = os.Getenv(s.APIKeyEnv)
		if key == "" {
			// Named, so meant: without it every model call would go out
			// unauthenticated (the variable's value is never printed).
			return nil, fmt.Errorf("api_key_env names %s, which is not set", s.APIKeyEnv)
		}
	}
	var timeout time.Duration
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("timeout %q: a positive duration such as 90s or 5m", s.Timeout)
		}
		timeout = d
	}
	var maxReply int64
	if s.MaxResponseBytes != "" {
		n, err := parseBytes(s.MaxResponseBytes)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("max_response_bytes %q: a positive size such as 32MiB", s.MaxResponseBytes)
		}
		maxReply = n
	}
	switch s.Provider {
	case "", "demo":
		if timeout != 0 {
			return nil, fmt.Errorf("timeout: the demo model makes no call to bound")
		}
		if maxReply != 0 {
			return nil, fmt.Errorf("max_response_bytes: the demo model makes no call to bound")
		}
		return demo.Model{}, nil
	case "openai":
		return openai.New(openai.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model, Timeout: timeout, MaxResponseBytes: maxReply})
	case "anthropic":
		return anthropic.New(anthropic.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model, Timeout: timeout, MaxResponseBytes: maxReply})
	case "gemini":
		return gemini.New(gemini.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model, Timeout: timeout, MaxResponseBytes: maxReply})
	}
	return nil, fmt.Errorf("unknown provider %q (supported: demo, openai, anthropic, gemini)", s.Provider)
}
