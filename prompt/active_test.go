package prompt_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

func TestActivate(t *testing.T) {
	in := 100
	p := &prompt.Prompt{Name: "classify", Version: "7", Label: "production", TemplateHash: "abc",
		Template: prompt.MustParseTemplate("classify {{x}}"), TokenBudget: &prompt.TokenBudget{InputMaxTokens: &in},
		ObservabilityEntities: map[string]any{"langfuse_prompt": "ref"}}
	res, err := prompt.Render(p, map[string]any{"x": "this"}, prompt.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := prompt.Render(&prompt.Prompt{Name: "summarize", Template: prompt.MustParseTemplate("sum")}, nil, prompt.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Identity()
	if id.Name != "classify" || id.Version != "7" || id.Label != "production" || id.TemplateHash != "abc" ||
		id.RenderedHash != res.RenderedHash || id.ObservabilityEntities["langfuse_prompt"] != "ref" {
		t.Errorf("identity %+v", id)
	}
	g, err := prompt.NewGroup("pipeline", res, other)
	if err != nil {
		t.Fatal(err)
	}
	ctx := prompt.Activate(prompt.ActivateGroup(context.Background(), g), res)
	b := llm.ActivePromptOf(ctx)
	if b.Prompt == nil || b.Prompt.Name != "classify" || b.TokenBudget != res.TokenBudget || b.Group == nil || b.Group.GroupName != "pipeline" {
		t.Errorf("binding %+v", b)
	}
	// The next member replaces the prompt and its budget, keeping the
	// group; nil unbinds.
	b = llm.ActivePromptOf(prompt.Activate(ctx, other))
	if b.Prompt.Name != "summarize" || b.TokenBudget != nil || b.Group == nil {
		t.Errorf("member binding %+v", b)
	}
	b = llm.ActivePromptOf(prompt.ActivateGroup(prompt.Activate(ctx, nil), nil))
	if b.Prompt != nil || b.Group != nil || b.TokenBudget != nil {
		t.Errorf("cleared binding %+v", b)
	}
}
