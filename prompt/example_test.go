package prompt_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// A manager over a directory of prompt files: fetch the production
// version of a prompt and render it.
func Example() {
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{prompt.NewDir("testdata/prompts")}})
	if err != nil {
		panic(err)
	}
	res, err := m.Get(context.Background(), "support", "", map[string]any{"persona": "a courier", "question": "where is order 7"},
		prompt.FetchOptions{}, prompt.RenderOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Version, res.Messages[0].Text())
	fmt.Println(*res.Sampling.Temperature, *res.TokenBudget.InputMaxTokens)
	// Output:
	// 2 You are a courier. Answer where is order 7 briefly.
	// 0.2 4000
}

// A chat prompt with the conversation injected at its placeholder.
func ExampleRender_chat() {
	b := prompt.NewDir("testdata/prompts")
	p, err := b.Fetch(context.Background(), "support", "staging", prompt.FetchOptions{})
	if err != nil {
		panic(err)
	}
	res, err := prompt.Render(p, map[string]any{"persona": "a courier", "question": "and order 8?"}, prompt.RenderOptions{
		Placeholders: map[string][]llm.Message{"history": {llm.UserText("where is order 7?"), llm.AssistantText("Thursday.")}},
	})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Printf("%s: %s\n", m.Role, m.Text())
	}
	// Output:
	// system: You are a courier.
	// user: where is order 7?
	// assistant: Thursday.
	// user: and order 8?
}

// Activate binds a rendered prompt to the context of the calls that use
// it: their typed events and spans carry its identity and token budget.
func ExampleActivate() {
	in := 4000
	p := &prompt.Prompt{Name: "classify", Version: "7", Label: "production",
		Template: prompt.MustParseTemplate("Classify: {{text}}"), TokenBudget: &prompt.TokenBudget{InputMaxTokens: &in}}
	res, _ := prompt.Render(p, map[string]any{"text": "the weather"}, prompt.RenderOptions{})
	ctx := prompt.Activate(context.Background(), res)
	// llm.Complete(ctx, provider, &llm.Request{Messages: res.Messages}) from
	// a graph node now reports the prompt on its LLMCompletionEvent.
	b := llm.ActivePromptOf(ctx)
	fmt.Println(b.Prompt.Name, b.Prompt.Version, *b.TokenBudget.InputMaxTokens)
	// Output: classify 7 4000
}
