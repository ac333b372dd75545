package agent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/prompt"
)

// TestManagedPromptSamplingApplied: a managed system prompt's sampling
// (prompt-management §3, §12 RuntimeConfig wiring: the prompt file's
// `sampling: {temperature: 0.2, max_tokens: 512}`, as in README's
// workspace example under "Managed prompts") reaches the model call's
// llm.Request.Config.
func TestManagedPromptSamplingApplied(t *testing.T) {
	ctx := context.Background()
	temp, maxTok := 0.2, 512
	store := prompt.NewMemory(nil, &prompt.Prompt{Name: "support", Version: "2",
		Template: prompt.MustParseTemplate("You are {{ persona }}. Answer briefly."),
		Sampling: &llm.Config{Temperature: &temp, MaxTokens: &maxTok}})
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{store}})
	if err != nil {
		t.Fatal(err)
	}
	p := llmtest.New(llmtest.Reply("ok"))
	var sent atomic.Int32
	h := newChat(t, p, &sent, func(c *agent.Config) {
		c.System = ""
		c.SystemPrompt = &agent.ManagedPrompt{Manager: m, Name: "support", Variables: map[string]any{"persona": "a courier"}}
	})
	if _, err := h.Send(ctx, "s", llm.UserText("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	cfg := reqs[0].Config
	if cfg.Temperature == nil || *cfg.Temperature != temp || cfg.MaxTokens == nil || *cfg.MaxTokens != maxTok {
		t.Fatalf("the managed prompt's sampling {temperature 0.2, max_tokens 512} was not applied: request config %+v (system %q)", cfg, reqs[0].System)
	}
}

// ctxProvider records the prompt-context binding of each model call.
type ctxProvider struct {
	llm.Provider
	bound []llm.ActivePrompt
}

func (p *ctxProvider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p.bound = append(p.bound, llm.ActivePromptOf(ctx))
	return p.Provider.Complete(ctx, req)
}

// TestManagedPromptActiveOnModelCall: the model call an agent makes with
// a managed system prompt runs under the prompt-context binding
// (prompt.Activate), so its typed call events and spans carry the
// openarmature.prompt.* identity, the Langfuse prompt reference
// (observability §8.4.4) and the declared token budget (§5.5.15).
func TestManagedPromptActiveOnModelCall(t *testing.T) {
	ctx := context.Background()
	in := 10
	store := prompt.NewMemory(nil, &prompt.Prompt{Name: "support", Version: "7",
		Template:              prompt.MustParseTemplate("Be brief."),
		TokenBudget:           &prompt.TokenBudget{InputMaxTokens: &in},
		ObservabilityEntities: map[string]any{"langfuse_prompt": prompt.LangfusePromptRef{Name: "support", Version: 7}}})
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{store}})
	if err != nil {
		t.Fatal(err)
	}
	p := &ctxProvider{Provider: llmtest.New(llmtest.Reply("ok"))}
	var sent atomic.Int32
	h := newChat(t, p, &sent, func(c *agent.Config) {
		c.System = ""
		c.SystemPrompt = &agent.ManagedPrompt{Manager: m, Name: "support"}
	})
	out, err := h.Send(ctx, "s", llm.UserText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if ps := out.Info().Prompts; len(ps) != 1 || ps[0].Version != "7" {
		t.Fatalf("turn prompts %+v", ps)
	}
	if len(p.bound) != 1 {
		t.Fatalf("%d calls", len(p.bound))
	}
	if b := p.bound[0]; b.Prompt == nil || b.Prompt.Version != "7" || b.TokenBudget == nil {
		t.Fatalf("the model call ran with no active prompt (binding %+v): the generation has no prompt identity, link or budget", b)
	}
}

// TestManagedPromptSamplingPrecedence: the prompt's sampling applies over
// the agent's Config.Model field by field (a field the prompt sets wins,
// one it leaves unset keeps the agent's, extras merge key by key), the
// agent's config is not modified, and a turn whose per-request
// instructions replace the managed prompt uses neither its sampling nor
// its binding.
func TestManagedPromptSamplingPrecedence(t *testing.T) {
	ctx := context.Background()
	ptemp, ptop, ptok := 0.2, 0.5, 512
	store := prompt.NewMemory(nil, &prompt.Prompt{Name: "support", Version: "3",
		Template: prompt.MustParseTemplate("Be brief."),
		Sampling: &llm.Config{Temperature: &ptemp, TopP: &ptop, MaxTokens: &ptok, Extras: map[string]any{"k": "prompt", "p": 1}}})
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{store}})
	if err != nil {
		t.Fatal(err)
	}
	atemp, atok, seed := 0.9, 64, int64(7)
	model := llm.Config{Temperature: &atemp, MaxTokens: &atok, Seed: &seed, StopSequences: []string{"END"}, Extras: map[string]any{"k": "agent", "a": 2}}
	p := &ctxProvider{Provider: llmtest.New(llmtest.Reply("ok"), llmtest.Reply("ok"))}
	var sent atomic.Int32
	h := newChat(t, p, &sent, func(c *agent.Config) {
		c.System = ""
		c.Model = model
		c.SystemPrompt = &agent.ManagedPrompt{Manager: m, Name: "support"}
	})
	if _, err := h.Send(ctx, "s", llm.UserText("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Send(agent.WithInstructions(ctx, "Per request."), "s2", llm.UserText("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := p.Provider.(*llmtest.Provider).Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[0].Config
	if *got.Temperature != ptemp || *got.TopP != ptop || *got.MaxTokens != ptok || *got.Seed != seed ||
		len(got.StopSequences) != 1 || got.Extras["k"] != "prompt" || got.Extras["p"] != 1 || got.Extras["a"] != 2 {
		t.Fatalf("managed prompt call config %+v", got)
	}
	if *model.Temperature != atemp || model.Extras["k"] != "agent" || len(model.Extras) != 2 {
		t.Fatalf("the agent's config was modified: %+v", model)
	}
	inst := reqs[1].Config
	if reqs[1].System != "Per request." || *inst.Temperature != atemp || inst.TopP != nil || inst.Extras["k"] != "agent" {
		t.Fatalf("instructions call: system %q config %+v", reqs[1].System, inst)
	}
	if b := p.bound[1]; b.Prompt != nil {
		t.Fatalf("instructions call bound to the managed prompt: %+v", b)
	}
}
