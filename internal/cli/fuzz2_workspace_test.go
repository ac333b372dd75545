package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// fuzzKey is the value of the api_key_env variable the workspace fuzz
// targets name: no error may echo it.
const fuzzKey = "sk-fuzz-SECRET-6c1d2e9f"

// workspaceSeeds are the workspaces of the docs (workspace's comment, the
// README) and of the existing tests.
var workspaceSeeds = []string{
	`default_agent: support
task_hints: {refunds: support}
agents:
  - id: support
    provider: openai
    model: gpt-4o-mini
    base_url: https://api.openai.com/v1
    api_key_env: FUZZ_API_KEY
    timeout: 90s
    max_response_bytes: 32MiB
    system: You are a helpful support agent.
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
    risk: {issue_refund: dangerous}
    max_tokens: 1024
    window: {max_messages: 200, max_tokens: 100000}
    compaction: {}
  - id: billing
    provider: openai
    api_key_env: FUZZ_API_KEY
    system_prompt: {name: billing, label: production, variables: {team: billing}}
  - id: researcher
    backend: adk
    provider: openai
    api_key_env: FUZZ_API_KEY
    max_tokens: 512
    tools: [lookup_order]
    adk: {instruction: be brief}
progress:
  narration: {enabled: true, style: concise}
direct_tools: {ops: ["*"], support: [lookup_order]}
prompts:
  dir: prompts
  cache_ttl: 60s
  labels: {default: production, billing: staging}
`,
	"agents: [{id: x, provider: demo}]\n",
	"progress: {narration: {enabled: true, style: concise}}\nagents: [{id: x, provider: demo}]\n",
	`default_agent: support
task_hints: {refunds: support}
agents:
  - id: support
    provider: demo
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
    window: {max_messages: 40, max_tokens: 8000}
    compaction: {prompt: Summarize tersely.}
`,
	"agents: [{id: x, provider: anthropic, api_key_env: FUZZ_API_KEY, temperature: 0.2}]",
	"agents: [{id: x, provider: gemini, api_key_env: FUZZ_API_KEY, model: gemini-2.5-flash}]",
	"agents: [{id: x, backend: eino, provider: openai, eino: {max_iterations: 3, checkpoint: {driver: file, dir: cp}}}]",
	"agents: [{id: x, provider: openai, timeout: soon}]",
	"agents: [{id: x, tools: [lookup_order], approval: [issue_refund]}]",
	"agents: [{id: x, api_key_env: FUZZ_API_KEY, provider: nope}]",
	"agents: [{id: x, adk: 3}]",
	"defaults: &d {provider: demo}\nagents: [{<<: *d, id: x}]",
	"agents:\n  - &a {id: x, provider: demo}\n  - *a\n",
	"agents: [{id: x}]\n---\nagents: [{id: y}]\n",
}

// buildWorkspace runs what armature serve does with a workspace before
// and after it opens its store: the checks before (parseWorkspace,
// adapterWorkspace, promptManager, checkPrompts) are returned as before; once they
// pass, the agents and the server configuration must build, with every
// backend's agent run by the native adapter (the upstream adapters are
// other modules). It reports the first error of the checks, and fails t
// when the server refuses what they accepted.
func buildWorkspace(t *testing.T, raw []byte) error {
	ws, err := parseWorkspace(raw, "/nonexistent/ws.yaml")
	if err != nil {
		return err
	}
	// The workspace's own checks, before the store opens.
	if err := ws.validate(); err != nil {
		t.Fatalf("parseWorkspace accepted a workspace its validate refuses: %v", err)
	}
	aw, err := ws.adapterWorkspace()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prompts, err := ws.promptManager(log)
	if err != nil {
		return err
	}
	// checkPrompts, when it reads local files only (with Langfuse it
	// would call the fuzzed base_url, and it only warns).
	if ws.Prompts == nil || ws.Prompts.Langfuse == nil {
		if err := ws.checkPrompts(t.Context(), prompts, log); err != nil {
			return err
		}
	}
	// After the store opened: nothing here may fail.
	upstream := func(ctx context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
		spec := agentSpec{ID: req.Agent.ID, Provider: "demo"}
		a, err := spec.build(ctx, nil)
		if err != nil {
			return nil, err
		}
		return adapter.NewNative(a), nil
	}
	extra := map[string]adapter.Factory{}
	for _, a := range aw.Agents {
		if a.Backend != adapter.Native {
			extra[a.Backend] = upstream
		}
	}
	reg, err := ws.adapters(prompts, extra)
	if err != nil {
		t.Fatalf("adapters refused a workspace the checks accepted: %v", err)
	}
	store := session.NewMemoryStore(session.MemoryConfig{})
	cfg := server.Config{Sessions: store, Addr: "127.0.0.1:0", Logger: log, DefaultAgent: ws.DefaultAgent, TaskHints: ws.TaskHints,
		DirectTools: ws.DirectTools}
	if p := ws.Progress; p != nil && p.Narration.Enabled {
		cfg.Narration = &server.Narration{Style: p.Narration.Style}
	}
	for _, ag := range aw.Agents {
		a, err := reg.Build(t.Context(), adapter.FactoryRequest{Workspace: aw, Agent: ag, Logger: log})
		if err != nil {
			t.Fatalf("agent %q: the checks accepted it, Build refused it: %v", ag.ID, err)
		}
		served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: aw, Sessions: store})
		if err != nil {
			t.Fatalf("agent %q: the checks accepted it, NewAdapterAgent refused it: %v", ag.ID, err)
		}
		cfg.Agents = append(cfg.Agents, served)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the checks accepted a workspace the server refuses: %v", err)
	}
	return nil
}

// FuzzWorkspace: any workspace file is refused with an error, or passes
// every check and builds its agents and server configuration; it never
// panics, is decoded in bounded time (aliases included), and no error
// echoes the value of the api_key_env variable.
func FuzzWorkspace(f *testing.F) {
	for _, s := range workspaceSeeds {
		f.Add([]byte(s))
	}
	// Found by the fuzzer or by reading: each was accepted and failed
	// only after the store opened, or (the aliases) expanded without bound.
	f.Add([]byte("agents: [{id: x}, {id: x}]"))
	f.Add([]byte("agents: [{provider: demo}]"))
	f.Add([]byte("agents: [{id: \"a\\tb\"}]"))
	f.Add([]byte("default_agent: nope\nagents: [{id: x}]"))
	f.Add([]byte("task_hints: {h: nope}\nagents: [{id: x}]"))
	f.Add([]byte("direct_tools: {ops: [rm_rf]}\nagents: [{id: x}]"))
	f.Add([]byte("direct_tools: {'': ['*']}\nagents: [{id: x}]"))
	f.Add([]byte("agents: [{id: x, backend: adk, adk: {a: &a [x, x], b: &b [*a, *a], c: [*b, *b]}}]"))
	f.Add([]byte("agents: [{id: x, backend: adk, adk: {a: &a [*a]}}]"))
	f.Add([]byte("agents: [{id: x, backend: adk, adk: {a: .nan}}]"))
	f.Add([]byte("agents: [{id: x, backend: adk, adk: {1: x}}]"))
	f.Add([]byte("agents: [{id: x, backend: adk, adk: {a: {1: x}}}]"))
	f.Add([]byte("agents: [{id: x, backend: armature, adk: {a: 1}}]"))
	f.Add([]byte("agents: [{id: 0, backend: A00, 000: {A: &a [000], B: &b [00000], C: [0000]}}]"))
	f.Add([]byte("agents: [{id: x, window: {max_tokens: -1}}]"))
	f.Add([]byte("agents: [{id: x, compaction: {}}]"))
	f.Add([]byte("agents: [{id: x, tools: [lookup_order, lookup_order]}]"))
	f.Add([]byte("agents: [{id: x, system: a, system_prompt: {name: b}}]\nprompts: {langfuse: {base_url: 'http://127.0.0.1:1'}}"))
	f.Add([]byte("agents: [{id: x, system_prompt: {name: b}}]"))
	f.Add([]byte("agents: [{id: x, system_prompt: {label: b}}]\nprompts: {langfuse: {base_url: 'http://127.0.0.1:1'}}"))
	f.Setenv("FUZZ_API_KEY", fuzzKey)
	f.Fuzz(func(t *testing.T, raw []byte) {
		start := time.Now()
		err := buildWorkspace(t, raw)
		// A runaway expansion takes minutes; 20 s tells it from a loaded
		// machine's slowness (-race, other tests).
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("%d bytes took %v", len(raw), d)
		}
		if err != nil && strings.Contains(err.Error(), fuzzKey) {
			t.Fatalf("the error echoes the API key: %v", err)
		}
	})
}

// aliasBound is how long refusing an alias bomb may take: expanding one
// takes minutes and gigabytes, refusing it milliseconds on a quiet
// machine; the bound leaves room for a loaded one (-race, other tests).
const aliasBound = 20 * time.Second

// TestWorkspaceAliasBomb: a workspace of nested aliases ("billion
// laughs") is refused at once, wherever the anchors sit, rather than
// expanded to gigabytes by the decoder or by the backend-native
// section's JSON; a workspace sharing anchors as people do still loads.
func TestWorkspaceAliasBomb(t *testing.T) {
	laughs := func(indent string) string {
		var b strings.Builder
		b.WriteString(indent + "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
		for c := 'b'; c <= 'i'; c++ {
			p := string(c - 1)
			b.WriteString(indent + string(c) + ": &" + string(c) + " [*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + "]\n")
		}
		return b.String()
	}
	big := strings.Repeat("x", 1<<20)
	for name, body := range map[string]string{
		"adk section":             "agents:\n  - id: x\n    backend: adk\n    adk:\n" + laughs("      "),
		"other backend's section": "agents:\n  - id: x\n    eino:\n" + laughs("      "),
		"task hints":              "task_hints:\n" + laughs("  ") + "agents: [{id: x}]\n",
		// Few nodes, each alias a copy of a megabyte: the section's JSON
		// would be gigabytes.
		"large scalar": "agents:\n  - id: x\n    backend: adk\n    adk:\n      s: &s " + big + "\n      l: [" +
			strings.Repeat("*s,", 3000) + "*s]\n",
		"agents": "agents:\n  - &a {id: x, system: &s " + big + "}\n" + strings.Repeat("  - *a\n", 100),
	} {
		start := time.Now()
		_, err := parseWorkspace([]byte(body), "ws.yaml")
		if d := time.Since(start); err == nil || !strings.Contains(err.Error(), "aliases expand to more than") || d > aliasBound {
			t.Errorf("%s: %v after %v, want the aliases refused at once", name, err, d)
		}
	}
	// A second document is refused, never expanded.
	start := time.Now()
	_, err := parseWorkspace([]byte("agents: [{id: x}]\n---\n"+laughs("")), "ws.yaml")
	if d := time.Since(start); err == nil || !strings.Contains(err.Error(), "more than one YAML document") || d > aliasBound {
		t.Errorf("a second document of aliases: %v after %v", err, d)
	}
	ws, err := parseWorkspace([]byte("defaults: &d {provider: demo, tools: [lookup_order]}\nagents: []\n"), "ws.yaml")
	if err == nil {
		t.Errorf("an undeclared top-level key loaded: %+v", ws)
	}
	ws, err = parseWorkspace([]byte(`agents:
  - &support {id: support, provider: demo, tools: [lookup_order], system: &sys You help.}
  - {<<: *support, id: billing, system: *sys}
`), "ws.yaml")
	if err != nil || len(ws.Agents) != 2 || ws.Agents[1].ID != "billing" || ws.Agents[1].System != "You help." || len(ws.Agents[1].Tools) != 1 {
		t.Fatalf("shared anchors: %+v, %v", ws, err)
	}
}
