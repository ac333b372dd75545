package prompt_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/prompt"
)

// TestLangfuseOtherBracesAreLiteral: Langfuse's template syntax is
// {{variable}} only (its Python SDK substitutes {{var}}, its JS SDK uses
// Mustache), so "{%", "{#" and other braces are literal text in a
// Langfuse prompt: a prompt quoting Jinja/Liquid/Django code or using
// Markdown heading ids ("## Setup {#setup}") is usable, text and chat
// alike, while a prompt-dir template keeps the Jinja2 subset (where
// "{%" is a syntax error).
func TestLangfuseOtherBracesAreLiteral(t *testing.T) {
	bodies := map[string]string{
		"jinja":    `{"name":"jinja","version":1,"type":"text","prompt":"Explain this template: {% for x in items %}...{% endfor %}. Question: {{question}}"}`,
		"anchor":   `{"name":"anchor","version":1,"type":"text","prompt":"Link sections by id, as in ## Setup {#setup}. Question: {{question}}"}`,
		"mustache": `{"name":"mustache","version":1,"type":"text","prompt":"{{#each items}}{{ x | upper }}{{/each}} {{ \"q\" }} {{ question }} {{ open"}`,
		"chat":     `{"name":"chat","version":1,"type":"chat","prompt":[{"role":"system","content":"Quote {% raw %} and {# c #} as is."},{"role":"user","content":"{{question}}"}]}`,
	}
	want := map[string][]string{
		"jinja":    {"Explain this template: {% for x in items %}...{% endfor %}. Question: q"},
		"anchor":   {"Link sections by id, as in ## Setup {#setup}. Question: q"},
		"mustache": {`{{#each items}}{{ x | upper }}{{/each}} {{ "q" }} q {{ open`},
		"chat":     {"Quote {% raw %} and {# c #} as is.", "q"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[len("/api/public/v2/prompts/"):]
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(bodies[name]))
	}))
	defer srv.Close()
	lf, err := prompt.NewLangfuse(prompt.LangfuseConfig{BaseURL: srv.URL, PublicKey: "pk", SecretKey: "sk"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range bodies {
		p, err := lf.Fetch(context.Background(), name, "production", prompt.FetchOptions{})
		if err != nil {
			t.Errorf("%s: a prompt Langfuse renders fine cannot be used: %v", name, err)
			continue
		}
		res, err := prompt.Render(p, map[string]any{"question": "q"}, prompt.RenderOptions{})
		if err != nil {
			t.Errorf("%s: render: %v", name, err)
			continue
		}
		var got []string
		for _, m := range res.Messages {
			got = append(got, m.Text())
		}
		if diff := cmp.Diff(want[name], got); diff != "" {
			t.Errorf("%s: rendered (-want +got):\n%s", name, diff)
		}
		// Variables stay strict (prompt-management §8).
		if _, err := prompt.Render(p, nil, prompt.RenderOptions{}); !errors.Is(err, errcat.PromptRenderError) {
			t.Errorf("%s: render without question: %v", name, err)
		}
	}
	// A prompt-dir template keeps its syntax: "{%" does not parse.
	if _, err := prompt.ParseTemplate("{% for x in items %}"); !errors.Is(err, errcat.PromptRenderError) {
		t.Errorf("ParseTemplate({%%): %v", err)
	}
}
