package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// The prompt part of the observability suite (fixtures 024, 064-066, 081,
// 106, 126-131, 146-156): a case-level prompt_backend whose prompts a
// node renders (renders_prompt: <name>, or renders_prompt_group:
// {group_name, members, active_prompt}) with the case's render_variables
// before its calls. Rendering binds the prompt-context (prompt.Activate,
// prompt.ActivateGroup) for the node's calls_llm / calls_embed /
// calls_rerank, so their typed events carry active_prompt,
// active_prompt_group and token_budget; a calls_llm without messages
// sends the rendered messages, calls_embed.input_from_rendered_prompt
// and calls_rerank.query_from_rendered_prompt the rendered text. The
// binding is torn down when the node's call returns.

// obsPromptBackendTypes are the prompt_backend types: filesystem (the
// prompts as given) and mock_with_langfuse_reference (each prompt's
// langfuse_prompt_reference becomes its
// ObservabilityEntities["langfuse_prompt"], the reference observability
// §8.4.4 links a generation to).
var obsPromptBackendTypes = vocab("filesystem mock_with_langfuse_reference")

// obsPromptKeys are the keys of a prompt_backend prompt.
var obsPromptKeys = []string{"name", "version", "label", "template", "template_hash", "token_budget", "langfuse_prompt_reference"}

// obsPrompts is a case's prompt backend and render variables.
type obsPrompts struct {
	mgr  *prompt.Manager
	vars map[string]any
	// labels are the labels of the prompts the backend holds, by name.
	labels map[string]string
}

// parsePromptBackend reads prompt_backend.
func (ol *obsLLM) parsePromptBackend(v *Value) error {
	if err := hcStrictKeys(v, "prompt_backend", "type", "prompts"); err != nil {
		return err
	}
	t, _ := v.Get("type")
	if t == nil || t.Kind != KindString {
		return schemaErrorf(v.Pos, "prompt_backend.type must be a string")
	}
	if _, ok := obsPromptBackendTypes[t.Str]; !ok {
		return notImplemented(capObs + " prompt_backend type " + t.Str)
	}
	ps, _ := v.Get("prompts")
	if ps == nil || ps.Kind != KindMap || len(ps.Fields) == 0 {
		return schemaErrorf(v.Pos, "prompt_backend.prompts must be a non-empty mapping")
	}
	op := ol.promptsOrNew()
	mem := prompt.NewMemory(func() time.Time { return time.Unix(0, 0).UTC() })
	for _, f := range ps.Fields {
		p, err := obsPrompt(f, t.Str == "mock_with_langfuse_reference")
		if err != nil {
			return err
		}
		mem.Put(p)
		op.labels[f.Key] = p.Label
	}
	mgr, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{mem}})
	if err != nil {
		return fmt.Errorf("building the prompt manager: %w", err)
	}
	op.mgr = mgr
	return nil
}

func (ol *obsLLM) promptsOrNew() *obsPrompts {
	if ol.prompts == nil {
		ol.prompts = &obsPrompts{labels: map[string]string{}}
	}
	return ol.prompts
}

// obsPrompt builds one prompt_backend prompt. Its key must be its name.
func obsPrompt(f *Field, langfuse bool) (*prompt.Prompt, error) {
	v := f.Value
	if err := hcStrictKeys(v, "prompt_backend.prompts."+f.Key, obsPromptKeys...); err != nil {
		return nil, err
	}
	str := func(k string) (string, error) {
		x, ok := v.Get(k)
		if !ok {
			return "", nil
		}
		if x.Kind != KindString {
			return "", schemaErrorf(x.Pos, "prompt %s.%s must be a string", f.Key, k)
		}
		return x.Str, nil
	}
	p := &prompt.Prompt{}
	var err error
	for _, k := range []struct {
		key string
		dst *string
	}{{"name", &p.Name}, {"version", &p.Version}, {"label", &p.Label}, {"template_hash", &p.TemplateHash}} {
		if *k.dst, err = str(k.key); err != nil {
			return nil, err
		}
	}
	if p.Name == "" {
		p.Name = f.Key
	}
	if p.Name != f.Key {
		return nil, schemaErrorf(v.Pos, "prompt %s is named %q", f.Key, p.Name)
	}
	if p.Label == "" {
		p.Label = prompt.DefaultLabel
	}
	src, err := str("template")
	if err != nil {
		return nil, err
	}
	if p.Template, err = prompt.ParseTemplate(src); err != nil {
		return nil, schemaErrorf(v.Pos, "prompt %s.template: %v", f.Key, err)
	}
	if p.TemplateHash == "" {
		p.TemplateHash = prompt.HashTemplate(p)
	}
	if tb, ok := v.Get("token_budget"); ok {
		if err := hcStrictKeys(tb, "token_budget", "input_max_tokens", "total_max_tokens"); err != nil {
			return nil, err
		}
		m, _ := tb.Native().(map[string]any)
		if p.TokenBudget = prompt.ParseTokenBudget(m); p.TokenBudget == nil {
			return nil, schemaErrorf(tb.Pos, "prompt %s.token_budget declares no usable bound", f.Key)
		}
	}
	ref, ok := v.Get("langfuse_prompt_reference")
	switch {
	case ok && !langfuse:
		return nil, schemaErrorf(ref.Pos, "langfuse_prompt_reference needs prompt_backend type mock_with_langfuse_reference")
	case ok:
		if ref.Kind != KindString || ref.Str == "" {
			return nil, schemaErrorf(ref.Pos, "langfuse_prompt_reference must be a non-empty string")
		}
		p.ObservabilityEntities = map[string]any{"langfuse_prompt": ref.Str}
	}
	return p, nil
}

// parseRenderVariables reads render_variables.
func (ol *obsLLM) parseRenderVariables(v *Value) error {
	if v.Kind != KindMap {
		return schemaErrorf(v.Pos, "render_variables must be a mapping")
	}
	m, _ := normJSON(v.Native()).(map[string]any)
	ol.promptsOrNew().vars = m
	return nil
}

// obsRender is a node's renders_prompt / renders_prompt_group.
type obsRender struct {
	// prompt is the prompt rendered and made active.
	prompt string
	// group and members are the group's (renders_prompt_group).
	group   string
	members []string
	pos     Pos
}

// parseRender reads a node's render directive.
func parseRender(d *Field) (*obsRender, error) {
	v := d.Value
	if d.Key == "renders_prompt" {
		if v.Kind != KindString || v.Str == "" {
			return nil, schemaErrorf(v.Pos, "renders_prompt must be a prompt name")
		}
		return &obsRender{prompt: v.Str, pos: v.Pos}, nil
	}
	if err := hcStrictKeys(v, "renders_prompt_group", "group_name", "members", "active_prompt"); err != nil {
		return nil, err
	}
	r := &obsRender{pos: v.Pos}
	if g, ok := v.Get("group_name"); ok && g.Kind == KindString {
		r.group = g.Str
	}
	if a, ok := v.Get("active_prompt"); ok && a.Kind == KindString {
		r.prompt = a.Str
	}
	if m, ok := v.Get("members"); ok && m.Kind == KindList {
		for _, it := range m.Items {
			if it.Kind != KindString {
				return nil, schemaErrorf(it.Pos, "renders_prompt_group.members must be prompt names")
			}
			r.members = append(r.members, it.Str)
		}
	}
	switch {
	case r.group == "":
		return nil, schemaErrorf(v.Pos, "renders_prompt_group.group_name must be a non-empty string")
	case r.prompt == "":
		return nil, schemaErrorf(v.Pos, "renders_prompt_group.active_prompt must name a member")
	case !containsStr(r.members, r.prompt):
		return nil, schemaErrorf(v.Pos, "renders_prompt_group.active_prompt %q is not a member", r.prompt)
	}
	return r, nil
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// check validates a render directive against the case's backend.
func (op *obsPrompts) check(r *obsRender) error {
	if op == nil || op.mgr == nil {
		return schemaErrorf(r.pos, "a node renders a prompt but the case has no prompt_backend")
	}
	for _, n := range append([]string{r.prompt}, r.members...) {
		if _, ok := op.labels[n]; !ok {
			return schemaErrorf(r.pos, "prompt %q is not in prompt_backend.prompts", n)
		}
	}
	return nil
}

// bind renders the directive's prompts and returns ctx with the
// prompt-context bound, and the active prompt's render.
func (op *obsPrompts) bind(ctx context.Context, r *obsRender) (context.Context, *prompt.Result, error) {
	render := func(name string) (*prompt.Result, error) {
		return op.mgr.Get(ctx, name, op.labels[name], op.vars, prompt.FetchOptions{}, prompt.RenderOptions{})
	}
	if r.group != "" {
		var members []*prompt.Result
		var active *prompt.Result
		for _, n := range r.members {
			res, err := render(n)
			if err != nil {
				return nil, nil, err
			}
			members = append(members, res)
			if n == r.prompt && active == nil {
				active = res
			}
		}
		g, err := prompt.NewGroup(r.group, members...)
		if err != nil {
			return nil, nil, err
		}
		return prompt.Activate(prompt.ActivateGroup(ctx, g), active), active, nil
	}
	res, err := render(r.prompt)
	if err != nil {
		return nil, nil, err
	}
	return prompt.Activate(ctx, res), res, nil
}

// renderedText is the text of a render's messages.
func renderedText(res *prompt.Result) string {
	parts := make([]string, 0, len(res.Messages))
	for _, m := range res.Messages {
		parts = append(parts, m.Text())
	}
	return strings.Join(parts, "\n")
}

// promptView adds the prompt-context fields of a typed event.
func promptView(out map[string]any, p *llm.PromptIdentity, g *llm.PromptGroupIdentity) {
	out["active_prompt"], out["active_prompt_group"] = nil, nil
	if p != nil {
		out["active_prompt"] = map[string]any{"name": p.Name, "version": p.Version, "label": p.Label,
			"template_hash": p.TemplateHash, "rendered_hash": p.RenderedHash}
	}
	if g != nil {
		out["active_prompt_group"] = map[string]any{"group_name": g.GroupName}
	}
}

// budgetView is the token_budget field of an LLM event.
func budgetView(b *llm.TokenBudget) any {
	if b == nil {
		return nil
	}
	ptr := func(p *int) any {
		if p == nil {
			return nil
		}
		return int64(*p)
	}
	return map[string]any{"input_max_tokens": ptr(b.InputMaxTokens), "total_max_tokens": ptr(b.TotalMaxTokens)}
}
