package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/prompt"
)

// TestManagedSystemPrompt: the system prompt comes from a prompt store at
// each turn (a new version reaches the next turn), once per turn in
// Turn.Prompts even across a tool loop; a missing prompt fails the turn
// in its category and bucket.
func TestManagedSystemPrompt(t *testing.T) {
	ctx := context.Background()
	store := prompt.NewMemory(nil, &prompt.Prompt{Name: "sys", Version: "1", Template: prompt.MustParseTemplate("You help {{ team }}.")})
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{store}})
	if err != nil {
		t.Fatal(err)
	}
	p := llmtest.New(
		llmtest.CallTools(call("c1", "get_weather", `{"city":"Paris"}`)),
		llmtest.Reply("Sunny."),
		llmtest.Reply("Hello."),
	)
	var sent atomic.Int32
	h := newChat(t, p, &sent, func(c *agent.Config) {
		c.System = ""
		c.SystemPrompt = &agent.ManagedPrompt{Manager: m, Name: "sys", Variables: map[string]any{"team": "support"}}
	})
	out, err := h.Send(ctx, "s", llm.UserText("weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	if ps := out.Info().Prompts; len(ps) != 1 || ps[0].Version != "1" || ps[0].Name != "sys" || ps[0].Label != "production" {
		t.Fatalf("prompts %+v", ps)
	}
	for _, r := range p.Requests() {
		if r.System != "You help support." {
			t.Fatalf("system %q", r.System)
		}
	}
	store.Put(&prompt.Prompt{Name: "sys", Version: "2", Chat: mustChat(t, "You help {{ team }}.", "Be brief.")})
	out, err = h.Send(ctx, "s", llm.UserText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := p.Requests()
	if got := reqs[len(reqs)-1].System; got != "You help support.\n\nBe brief." || out.Info().Prompts[0].Version != "2" {
		t.Fatalf("second turn: system %q, prompts %+v", got, out.Info().Prompts)
	}
	// A user segment cannot be a system prompt; a missing prompt fails.
	for _, tc := range []struct {
		p    *prompt.Prompt
		name string
		want errcat.Category
	}{
		{p: &prompt.Prompt{Name: "sys", Version: "3", Chat: mustChatRoles(t, "user")}, name: "sys", want: errcat.PromptRenderError},
		{name: "gone", want: errcat.PromptNotFound},
	} {
		if tc.p != nil {
			store.Put(tc.p)
		}
		h := newChat(t, llmtest.New(llmtest.Reply("x")), &sent, func(c *agent.Config) {
			c.System = ""
			c.SystemPrompt = &agent.ManagedPrompt{Manager: m, Name: tc.name}
		})
		out, err := h.Send(ctx, "s", llm.UserText("hi"))
		e, ok := out.(*chat.Errored)
		if !ok || !errors.Is(err, tc.want) || e.Category != tc.want || e.Bucket != harness.UserCorrectable {
			t.Fatalf("%s: outcome %T %+v", tc.name, out, out)
		}
	}
	if _, err := agent.New(agent.Config{Provider: p, System: "x", SystemPrompt: &agent.ManagedPrompt{Manager: m, Name: "sys"}}); !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("both System and SystemPrompt: %v", err)
	}
	if _, err := agent.New(agent.Config{Provider: p, SystemPrompt: &agent.ManagedPrompt{Name: "sys"}}); !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("no manager: %v", err)
	}
}

func mustChat(t *testing.T, system ...string) []prompt.Segment {
	t.Helper()
	var segs []any
	for _, s := range system {
		segs = append(segs, map[string]any{"role": "system", "content": s})
	}
	out, err := prompt.ParseChat(segs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustChatRoles(t *testing.T, role string) []prompt.Segment {
	t.Helper()
	out, err := prompt.ParseChat([]any{map[string]any{"role": role, "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
