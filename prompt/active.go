package prompt

import (
	"context"

	"github.com/armature-go/armature/llm"
)

// Identity returns r's identity as the prompt-context binding carries it
// (prompt-management §12: name, version, label, template and rendered
// hashes, and the observability entity references).
func (r *Result) Identity() *llm.PromptIdentity {
	return &llm.PromptIdentity{Name: r.Name, Version: r.Version, Label: r.Label,
		TemplateHash: r.TemplateHash, RenderedHash: r.RenderedHash,
		ObservabilityEntities: r.ObservabilityEntities}
}

// Activate returns ctx with r as the active prompt of the calls made
// under it (the prompt-context binding of prompt-management §12): LLM,
// embedding and rerank calls made with the returned context from a graph
// node carry r's identity (and, for LLM calls, its token budget) on their
// typed events and spans. The binding lasts as long as the context; an
// enclosing active group is kept.
func Activate(ctx context.Context, r *Result) context.Context {
	if r == nil {
		return llm.WithActivePrompt(ctx, nil, nil)
	}
	return llm.WithActivePrompt(ctx, r.Identity(), r.TokenBudget)
}

// ActivateGroup returns ctx with g as the active prompt group of the
// calls made under it: their typed events and spans carry the group's
// name (prompt-management §10, §12). Activate the member each call
// renders with Activate as well.
func ActivateGroup(ctx context.Context, g *Group) context.Context {
	if g == nil {
		return llm.WithActivePromptGroup(ctx, nil)
	}
	return llm.WithActivePromptGroup(ctx, &llm.PromptGroupIdentity{GroupName: g.Name})
}
