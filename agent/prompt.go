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

// render fetches and renders the prompt for a model call of the turn
// running under ctx, and reports its use.
func (p *ManagedPrompt) render(ctx context.Context) (string, error) {
	pr, err := p.Manager.Fetch(ctx, p.Name, p.Label, prompt.FetchOptions{})
	if err != nil {
		return "", err
	}
	res, err := p.Manager.Render(pr, p.Variables, prompt.RenderOptions{})
	if err != nil {
		return "", err
	}
	var text string
	if !pr.IsChat() {
		text = res.Messages[0].Text()
	} else {
		parts := make([]string, 0, len(res.Messages))
		for _, m := range res.Messages {
			if m.Role != llm.RoleSystem || !m.Content.IsText() {
				return "", errcat.New(errcat.PromptRenderError, fmt.Sprintf(
					"agent: managed system prompt %q version %q has a %s message: a system prompt is a text prompt or system segments", res.Name, res.Version, m.Role))
			}
			parts = append(parts, m.Text())
		}
		text = strings.Join(parts, "\n\n")
	}
	chat.ReportPrompt(ctx, chat.PromptUse{Name: res.Name, Version: res.Version, Label: res.Label,
		TemplateHash: res.TemplateHash, RenderedHash: res.RenderedHash})
	return text, nil
}
