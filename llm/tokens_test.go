package llm_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/llm"
)

func TestTokenRatesEstimate(t *testing.T) {
	r := llm.TokenRates{BytesPerToken: 4, PerMessage: 3, PerImage: 100}
	img := llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: llm.SourceURL, URL: "https://example.com/a.png"}}
	for _, tc := range []struct {
		name string
		m    llm.Message
		want int
	}{
		{"empty assistant", llm.AssistantText(""), 3},
		{"text rounds up", llm.UserText("12345"), 3 + 2},
		{"blocks and an image", llm.UserBlocks(llm.TextBlock("12345678"), img), 3 + 100 + 2},
		{"tool calls", llm.AssistantToolCalls(llm.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}), 3 + 3},
		{"tool result", llm.ToolResult("c1", "123456"), 3 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Estimate(&tc.m); got != tc.want {
				t.Errorf("Estimate = %d, want %d", got, tc.want)
			}
		})
	}
	if got := (llm.TokenRates{}).EstimateText(8); got != 2 {
		t.Errorf("zero rates: EstimateText(8) = %d, want the default 4 bytes a token", got)
	}
}

func ExampleTokenRates() {
	rates := llm.TokenRates{BytesPerToken: 4, PerMessage: 4, PerImage: 765}
	m := llm.UserText("What is the weather in Paris today?") // 35 bytes
	fmt.Println(rates.Estimate(&m), llm.EstimateTokens(&m))
	// Output: 13 13
}
