package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// ManagedPrompt is an agent's system prompt kept in a prompt store
// (package prompt) rather than in code: at each model call it is fetched
// through Manager — put a prompt.Cache in front of a remote backend — and
// rendered with Variables, so a new version published under Label
// reaches the next turn without a restart. The prompt must be a text
// prompt, or a chat prompt whose segments are all system segments
// (joined with a blank line). The turn reports which version it used
// (chat.ReportPrompt: Turn.Prompts, and the agent.prompt.resolved event
// of a server's run record).
//
// The model call is made with the rendered prompt active
// (prompt.Activate): its typed call events and spans carry the prompt's
// identity (and the Langfuse prompt reference, for the generation's
// link) and its token budget. The prompt's sampling (its Sampling,
// prompt-management §3) applies over the agent's Config.Model field by
// field: a
// field the prompt sets replaces the agent's, a field it leaves unset
// keeps the agent's, and extras merge key by key, the prompt's winning
// (llm.Config.Merge).
//
// A fetch or render failure fails the turn with its category:
// prompt_store_unavailable (retryable), prompt_not_found or
// prompt_render_error (the prompt or its variables must change).
type ManagedPrompt struct {
	// Manager fetches and renders the prompt. Required.
	Manager *prompt.Manager
	// Name is the prompt's name. Required.
	Name string
	// Label selects the version; "" lets the manager's resolver choose
	// (default "production").
	Label string
	// Variables are the template's variables; they must not be modified
	// once the agent is built.
	Variables map[string]any
}

func (p *ManagedPrompt) validate(system string) error {
	switch {
	case p == nil:
		return nil
	case p.Manager == nil || p.Name == "":
		return fmt.Errorf("%w: SystemPrompt needs a Manager and a Name", ErrInvalidConfig)
	case system != "":
		return fmt.Errorf("%w: set System or SystemPrompt, not both", ErrInvalidConfig)
	}
	return nil
}

// Render fetches and renders p as each model call of its agent does,
// and returns the system prompt text the call sends with the render
// result (its identity, Sampling and TokenBudget), without reporting the
// use to a turn. It fails as the call would: a fetch or render error
// with its category, and prompt_render_error for a chat prompt with a
// segment other than a system text segment. A deployment calls it at
// startup to refuse a prompt every turn would refuse (armature serve
// does); an invalid p (no Manager or Name) is an error matching
// ErrInvalidConfig.
func (p *ManagedPrompt) Render(ctx context.Context) (string, *prompt.Result, error) {
	if p == nil || p.Manager == nil || p.Name == "" {
		return "", nil, fmt.Errorf("%w: a managed prompt needs a Manager and a Name", ErrInvalidConfig)
	}
	pr, err := p.Manager.Fetch(ctx, p.Name, p.Label, prompt.FetchOptions{})
	if err != nil {
		return "", nil, err
	}
	res, err := p.Manager.Render(pr, p.Variables, prompt.RenderOptions{})
	if err != nil {
		return "", nil, err
	}
	if !pr.IsChat() {
		return res.Messages[0].Text(), res, nil
	}
	parts := make([]string, 0, len(res.Messages))
	for _, m := range res.Messages {
		if m.Role != llm.RoleSystem || !m.Content.IsText() {
			return "", nil, errcat.New(errcat.PromptRenderError, fmt.Sprintf(
				"agent: managed system prompt %q version %q has a %s message: a system prompt is a text prompt or system segments", res.Name, res.Version, m.Role))
		}
		parts = append(parts, m.Text())
	}
	return strings.Join(parts, "\n\n"), res, nil
}

// render fetches and renders the prompt for a model call of the turn
// running under ctx, and reports its use.
func (p *ManagedPrompt) render(ctx context.Context) (string, *prompt.Result, error) {
	text, res, err := p.Render(ctx)
	if err != nil {
		return "", nil, err
	}
	chat.ReportPrompt(ctx, chat.PromptUse{Name: res.Name, Version: res.Version, Label: res.Label,
		TemplateHash: res.TemplateHash, RenderedHash: res.RenderedHash})
	return text, res, nil
}

// callConfig returns the configuration and the context of a model call
// whose system prompt res rendered (nil: none, or not a managed one):
// the agent's model config with the prompt's sampling over it, and ctx
// with the prompt active (prompt.Activate).
func callConfig(ctx context.Context, model llm.Config, res *prompt.Result) (llm.Config, context.Context) {
	if res == nil {
		return model, ctx
	}
	if res.Sampling != nil {
		model = model.Merge(*res.Sampling)
	}
	return model, prompt.Activate(ctx, res)
}
