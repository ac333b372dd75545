package llm_test

import (
	"context"
	"math"
	"testing"

	"github.com/armature-go/armature/llm"
)

func ip(n int) *int { return &n }

func TestActivePromptBinding(t *testing.T) {
	ctx := context.Background()
	if b := llm.ActivePromptOf(ctx); b.Prompt != nil || b.Group != nil || b.TokenBudget != nil {
		t.Fatalf("empty context binds %+v", b)
	}
	p := &llm.PromptIdentity{Name: "a", Version: "1"}
	budget := &llm.TokenBudget{InputMaxTokens: ip(10)}
	ctx1 := llm.WithActivePrompt(ctx, p, budget)
	ctx2 := llm.WithActivePromptGroup(ctx1, &llm.PromptGroupIdentity{GroupName: "g"})
	if b := llm.ActivePromptOf(ctx2); b.Prompt != p || b.TokenBudget != budget || b.Group == nil || b.Group.GroupName != "g" {
		t.Errorf("binding %+v", b)
	}
	// A member bound inside the group keeps the group; the outer
	// context is unchanged.
	q := &llm.PromptIdentity{Name: "b"}
	ctx3 := llm.WithActivePrompt(ctx2, q, nil)
	if b := llm.ActivePromptOf(ctx3); b.Prompt != q || b.TokenBudget != nil || b.Group == nil {
		t.Errorf("member binding %+v", b)
	}
	if b := llm.ActivePromptOf(ctx1); b.Group != nil || b.Prompt != p {
		t.Errorf("outer binding changed: %+v", b)
	}
	// Clearing the prompt drops its budget.
	if b := llm.ActivePromptOf(llm.WithActivePrompt(ctx1, nil, budget)); b.Prompt != nil || b.TokenBudget != nil {
		t.Errorf("cleared binding %+v", b)
	}
}

func TestPromptIdentitySnapshot(t *testing.T) {
	var nilID *llm.PromptIdentity
	if nilID.Snapshot() != nil {
		t.Error("nil snapshot")
	}
	p := &llm.PromptIdentity{Name: "a", ObservabilityEntities: map[string]any{"k": 1}}
	s := p.Snapshot()
	s.ObservabilityEntities["k"] = 2
	if s == p || p.ObservabilityEntities["k"] != 1 || s.Name != "a" {
		t.Errorf("snapshot shares state: %+v %+v", p, s)
	}
}

func TestTokenBudgetEvaluate(t *testing.T) {
	tests := []struct {
		name     string
		budget   *llm.TokenBudget
		usage    llm.Usage
		want     []llm.BudgetCheck
		exceeded bool
	}{
		{"no budget", nil, llm.Usage{PromptTokens: ip(5)}, nil, false},
		{"input exceeded", &llm.TokenBudget{InputMaxTokens: ip(10)}, llm.Usage{PromptTokens: ip(20), TotalTokens: ip(21)},
			[]llm.BudgetCheck{{Kind: llm.BudgetInput, Max: 10, Actual: 20, Exceeded: true}}, true},
		{"under budget", &llm.TokenBudget{InputMaxTokens: ip(40)}, llm.Usage{PromptTokens: ip(20)},
			[]llm.BudgetCheck{{Kind: llm.BudgetInput, Max: 40, Actual: 20}}, false},
		{"equal is not exceeded", &llm.TokenBudget{TotalMaxTokens: ip(21)}, llm.Usage{TotalTokens: ip(21)},
			[]llm.BudgetCheck{{Kind: llm.BudgetTotal, Max: 21, Actual: 21}}, false},
		{"derived total", &llm.TokenBudget{TotalMaxTokens: ip(8)}, llm.Usage{PromptTokens: ip(5), CompletionTokens: ip(4)},
			[]llm.BudgetCheck{{Kind: llm.BudgetTotal, Max: 8, Actual: 9, Exceeded: true}}, true},
		{"null input counter not evaluated", &llm.TokenBudget{InputMaxTokens: ip(10)}, llm.Usage{CompletionTokens: ip(5), TotalTokens: ip(15)},
			nil, false},
		{"derived total with an unreported addend", &llm.TokenBudget{TotalMaxTokens: ip(8)}, llm.Usage{PromptTokens: ip(5)}, nil, false},
		{"independent bounds", &llm.TokenBudget{InputMaxTokens: ip(10), TotalMaxTokens: ip(8)},
			llm.Usage{CompletionTokens: ip(5), TotalTokens: ip(12)},
			[]llm.BudgetCheck{{Kind: llm.BudgetTotal, Max: 8, Actual: 12, Exceeded: true}}, true},
		{"both exceeded", &llm.TokenBudget{InputMaxTokens: ip(1), TotalMaxTokens: ip(2)}, llm.Usage{PromptTokens: ip(3), TotalTokens: ip(4)},
			[]llm.BudgetCheck{{Kind: llm.BudgetInput, Max: 1, Actual: 3, Exceeded: true}, {Kind: llm.BudgetTotal, Max: 2, Actual: 4, Exceeded: true}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.budget.Evaluate(tc.usage)
			if len(got) != len(tc.want) {
				t.Fatalf("checks %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("check %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			exceeded, evaluated := llm.BudgetExceeded(got)
			if exceeded != tc.exceeded || evaluated != (len(tc.want) > 0) {
				t.Errorf("exceeded %v evaluated %v", exceeded, evaluated)
			}
		})
	}
}

func TestBudgetCheckUtilization(t *testing.T) {
	for _, tc := range []struct {
		c    llm.BudgetCheck
		want float64
	}{
		{llm.BudgetCheck{Max: 10, Actual: 20}, 2},
		{llm.BudgetCheck{Max: 40, Actual: 20}, 0.5},
		{llm.BudgetCheck{Max: 0, Actual: 0}, 0},
		{llm.BudgetCheck{Max: 0, Actual: 1}, math.Inf(1)},
	} {
		if got := tc.c.Utilization(); got != tc.want {
			t.Errorf("%+v: utilization %v, want %v", tc.c, got, tc.want)
		}
	}
}
