package llm

import (
	"context"
	"maps"
	"math"
)

// PromptIdentity is the identity of a rendered managed prompt: the
// prompt-identity family of prompt-management §12 (observability §5.5.7
// openarmature.prompt.*), carried as the active_prompt of the typed call
// events (graph-engine §6). Package prompt builds it from a rendered
// prompt (prompt.Result.Identity) and binds it ([WithActivePrompt],
// prompt.Activate).
type PromptIdentity struct {
	Name         string
	Version      string
	Label        string
	TemplateHash string
	RenderedHash string
	// ObservabilityEntities are the prompt's backend-keyed references to
	// the entities it is registered as in observability backends (key
	// "langfuse_prompt": the Langfuse prompt, observability §8.4.4); nil
	// when it has none. Read only.
	ObservabilityEntities map[string]any
}

// PromptGroupIdentity is the identity of the active prompt group
// (prompt-management §10; the active_prompt_group of graph-engine §6).
type PromptGroupIdentity struct {
	GroupName string
}

// TokenBudget is a prompt's advisory token budget (prompt-management §3):
// ceilings on a call's input tokens and on its input plus output tokens.
// A nil bound is not declared. It never changes a request; observers
// compare it with the call's usage ([TokenBudget.Evaluate]).
type TokenBudget struct {
	InputMaxTokens *int
	TotalMaxTokens *int
}

// ActivePrompt is the prompt-context binding a call is made under: the
// active prompt, its token budget and the active prompt group, each nil
// when none is bound. The typed call events of the graph engine snapshot
// it ([ActivePromptOf]) when the call starts.
type ActivePrompt struct {
	Prompt      *PromptIdentity
	TokenBudget *TokenBudget
	Group       *PromptGroupIdentity
}

type activePromptKey struct{}

// WithActivePrompt returns ctx with p (and its token budget, nil for
// none) as the active prompt of the calls made under it, keeping the
// active group. A nil p clears the active prompt and budget.
func WithActivePrompt(ctx context.Context, p *PromptIdentity, budget *TokenBudget) context.Context {
	b := ActivePromptOf(ctx)
	b.Prompt, b.TokenBudget = p, budget
	if p == nil {
		b.TokenBudget = nil
	}
	return context.WithValue(ctx, activePromptKey{}, b)
}

// WithActivePromptGroup returns ctx with g as the active prompt group of
// the calls made under it, keeping the active prompt. A nil g clears it.
func WithActivePromptGroup(ctx context.Context, g *PromptGroupIdentity) context.Context {
	b := ActivePromptOf(ctx)
	b.Group = g
	return context.WithValue(ctx, activePromptKey{}, b)
}

// ActivePromptOf returns the prompt-context binding of ctx (the zero
// value when nothing is bound).
func ActivePromptOf(ctx context.Context) ActivePrompt {
	b, _ := ctx.Value(activePromptKey{}).(ActivePrompt)
	return b
}

// Snapshot returns a copy of p that shares nothing mutable with it (nil
// for nil).
func (p *PromptIdentity) Snapshot() *PromptIdentity {
	if p == nil {
		return nil
	}
	c := *p
	c.ObservabilityEntities = maps.Clone(p.ObservabilityEntities)
	return &c
}

// BudgetKind names the bound a [BudgetCheck] covers: the
// openarmature.gen_ai.token_budget.kind metric dimension (observability
// §11.3). The constants are wire identifiers from the OpenArmature
// specification; they must not change.
type BudgetKind string

// The budget kinds.
const (
	BudgetInput BudgetKind = "input"
	BudgetTotal BudgetKind = "total"
)

// BudgetCheck is the evaluation of one declared, evaluable bound of a
// token budget against a call's usage (observability §5.5.15, §11.2).
type BudgetCheck struct {
	Kind BudgetKind
	// Max is the declared bound; Actual the call's counter it is compared
	// with (prompt tokens for input; total tokens, or prompt plus
	// completion tokens when the provider omitted the total, for total).
	Max, Actual int
	// Exceeded reports Actual > Max.
	Exceeded bool
}

// Utilization returns Actual / Max, the token_budget.utilization
// observation (> 1 is over budget). A zero Max gives +Inf for a positive
// Actual and 0 otherwise.
func (c BudgetCheck) Utilization() float64 {
	if c.Max == 0 {
		if c.Actual > 0 {
			return math.Inf(1)
		}
		return 0
	}
	return float64(c.Actual) / float64(c.Max)
}

// Evaluate compares the budget with a call's usage, bound by bound (input
// first): a bound is evaluated only when it is declared and its actual
// counter is reported, so a null counter (llm-provider §7 Malformed usage
// counter, or a derived total with an unreported addend) yields no check
// for its bound, never a pass. It returns nil for a nil budget or when no
// bound is evaluable.
func (b *TokenBudget) Evaluate(u Usage) []BudgetCheck {
	if b == nil {
		return nil
	}
	var out []BudgetCheck
	if b.InputMaxTokens != nil && u.PromptTokens != nil {
		out = append(out, BudgetCheck{Kind: BudgetInput, Max: *b.InputMaxTokens, Actual: *u.PromptTokens,
			Exceeded: *u.PromptTokens > *b.InputMaxTokens})
	}
	if b.TotalMaxTokens != nil {
		var total *int
		switch {
		case u.TotalTokens != nil:
			total = u.TotalTokens
		case u.PromptTokens != nil && u.CompletionTokens != nil:
			t := *u.PromptTokens + *u.CompletionTokens
			total = &t
		}
		if total != nil {
			out = append(out, BudgetCheck{Kind: BudgetTotal, Max: *b.TotalMaxTokens, Actual: *total,
				Exceeded: *total > *b.TotalMaxTokens})
		}
	}
	return out
}

// BudgetExceeded summarizes checks as the
// openarmature.llm.token_budget.exceeded span signal: evaluated is false
// when no bound was evaluated (the signal is then absent, not false);
// exceeded reports whether any evaluated bound was crossed.
func BudgetExceeded(checks []BudgetCheck) (exceeded, evaluated bool) {
	for _, c := range checks {
		if c.Exceeded {
			return true, true
		}
	}
	return false, len(checks) > 0
}
