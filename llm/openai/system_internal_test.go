package openai

import (
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/spectest"
)

func TestSeparateSystemAndAsides(t *testing.T) {
	p, err := New(Config{Model: "gpt-4o", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	spectest.CheckSeparateSystem(t, llm.Config{}, func(r *llm.Request) ([]byte, error) { return p.requestBody(r, false) })
}
