package langfuse

import (
	"fmt"
	"strings"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// PromptEntityKey is the ObservabilityEntities key of a prompt's Langfuse
// prompt reference (prompt-management §5, observability §8.4.4).
const PromptEntityKey = "langfuse_prompt"

// PromptReference is implemented by a Langfuse prompt reference of a
// custom prompt backend; [prompt.LangfusePromptRef] (the Langfuse
// backend's) is recognized as is.
type PromptReference interface {
	LangfusePrompt() (name string, version int)
}

// promptRef returns the Langfuse prompt an entities map references.
func promptRef(entities map[string]any) (name string, version int, ok bool) {
	switch r := entities[PromptEntityKey].(type) {
	case prompt.LangfusePromptRef:
		return r.Name, r.Version, r.Name != "" && r.Version > 0
	case *prompt.LangfusePromptRef:
		if r != nil {
			return r.Name, r.Version, r.Name != "" && r.Version > 0
		}
	case PromptReference:
		name, version = r.LangfusePrompt()
		return name, version, name != "" && version > 0
	}
	return "", 0, false
}

// promptLinkage adds the active prompt's identity and Langfuse link
// (§8.4.4), the prompt group (§8.4.4 prompt-group propagation) and the
// token budget (§8.4.3) to a generation. A token-budget exceedance sets
// the WARNING level unless the generation is already ERROR.
func (o *Observer) promptLinkage(b *ObservationBody, meta map[string]any, req *graph.LLMRequest, resp *graph.LLMResponse) {
	if p := req.ActivePrompt; p != nil {
		id := map[string]any{}
		for k, v := range map[string]string{"name": p.Name, "version": p.Version, "label": p.Label,
			"template_hash": p.TemplateHash, "rendered_hash": p.RenderedHash} {
			if v != "" {
				id[k] = v
			}
		}
		meta["prompt"] = id
		if name, version, ok := promptRef(p.ObservabilityEntities); ok {
			b.PromptName, b.PromptVersion = name, version
		} else if _, present := p.ObservabilityEntities[PromptEntityKey]; present {
			o.logger.Warn("langfuse: unrecognized Langfuse prompt reference; the generation is not linked",
				"prompt", p.Name, "type", fmt.Sprintf("%T", p.ObservabilityEntities[PromptEntityKey]))
		}
	}
	if g := req.ActivePromptGroup; g != nil && g.GroupName != "" {
		meta["prompt_group_name"] = g.GroupName
	}
	tb := req.TokenBudget
	if tb == nil || (tb.InputMaxTokens == nil && tb.TotalMaxTokens == nil) {
		return
	}
	declared := map[string]any{}
	if tb.InputMaxTokens != nil {
		declared["input_max_tokens"] = *tb.InputMaxTokens
	}
	if tb.TotalMaxTokens != nil {
		declared["total_max_tokens"] = *tb.TotalMaxTokens
	}
	meta["token_budget"] = declared
	if resp == nil {
		return
	}
	checks := tb.Evaluate(resp.Usage)
	exceeded, evaluated := llm.BudgetExceeded(checks)
	if !evaluated {
		return // no bound evaluable: the flag is absent, not false
	}
	meta["token_budget_exceeded"] = exceeded
	if !exceeded || b.Level == LevelError {
		return
	}
	var over []string
	for _, c := range checks {
		if c.Exceeded {
			over = append(over, fmt.Sprintf("%s %d > %d", c.Kind, c.Actual, c.Max))
		}
	}
	b.Level, b.StatusMessage = LevelWarning, "token budget exceeded: "+strings.Join(over, ", ")
}
