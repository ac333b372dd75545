package demo

import (
	"context"
	"fmt"
	"testing"

	"github.com/armature-go/armature/llm"
)

// Stream streams what Complete answers: the same message and finish
// reason once accumulated, word by word with each chunk's raw payload
// numbering it, and chunks that stay intact after later ones.
func TestStreamMatchesComplete(t *testing.T) {
	ctx := context.Background()
	for _, text := range []string{"hello", "where is order 7?", "hi  there ", "approve order 42"} {
		req := &llm.Request{Messages: []llm.Message{llm.UserText(text)}}
		want, err := Model{}.Complete(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var acc llm.Accumulator
		var kept []*llm.Chunk
		var texts []string
		for c, err := range (Model{}).Stream(ctx, req) {
			if err != nil {
				t.Fatal(err)
			}
			acc.Add(c)
			kept = append(kept, c)
			texts = append(texts, c.Content)
		}
		got, err := acc.Response()
		if err != nil {
			t.Fatal(err)
		}
		if got.Message.Text() != want.Message.Text() || got.FinishReason != want.FinishReason ||
			fmt.Sprint(got.Message.ToolCalls) != fmt.Sprint(want.Message.ToolCalls) {
			t.Errorf("%q: streamed %+v, completed %+v", text, got, want)
		}
		for i, c := range kept {
			if c.Content == "" {
				continue
			}
			if c.Content != texts[i] || string(c.Raw) != fmt.Sprintf(`{"delta":%d}`, i) {
				t.Errorf("%q: chunk %d = %q %s after the stream, want %q {\"delta\":%d}", text, i, c.Content, c.Raw, texts[i], i)
			}
		}
	}
}
