package prompt

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzLangfusePrompt decodes arbitrary prompt API bodies: never a panic,
// and a prompt that maps is exactly one variant and renders or fails in
// its category.
func FuzzLangfusePrompt(f *testing.F) {
	f.Add([]byte(`{"name":"a","version":2,"type":"text","prompt":"Hi {{x}}","config":{"temperature":0.1,"token_budget":{"input_max_tokens":5}}}`))
	f.Add([]byte(`{"name":"c","version":1,"type":"chat","prompt":[{"role":"system","content":"S"},{"type":"placeholder","name":"h"}]}`))
	f.Add([]byte(`{"type":"chat","prompt":[{"role":"user","content":[{"type":"text","text":"{{ a"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var lp langfusePrompt
		if json.Unmarshal(data, &lp) != nil {
			return
		}
		p, err := lp.toPrompt("production")
		if err != nil {
			return
		}
		if (p.Template == nil) == (p.Chat == nil) {
			t.Fatal("a mapped prompt must be exactly one variant")
		}
		if _, err := Render(p, nil, RenderOptions{Lenient: true}); err != nil {
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("render failed outside prompt_render_error: %v", err)
			}
		}
	})
}
