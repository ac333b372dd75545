package chat_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// TestReportPrompt: a node's managed prompt is on the turn's outcome and,
// streamed, arrives as a prompt chunk before the outcome.
func TestReportPrompt(t *testing.T) {
	use := chat.PromptUse{Name: "support", Version: "3", Label: "production", TemplateHash: "sha256:t", RenderedHash: "sha256:r"}
	g := newGraph(t, graphOpts{}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		chat.ReportPrompt(ctx, use)
		return echo(ctx, s)
	})
	h := newChat(t, chat.Config{Graph: g})
	ctx := context.Background()
	out, err := h.Send(ctx, "s", llm.UserText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if p := out.Info().Prompts; len(p) != 1 || p[0] != use {
		t.Fatalf("Send: prompts %+v", p)
	}
	var chunks []chat.Chunk
	for c, err := range h.SendStreaming(ctx, "s", llm.UserText("again")) {
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	var saw bool
	for _, c := range chunks {
		if c.Kind == chat.ChunkPrompt {
			saw = c.Prompt != nil && *c.Prompt == use
		}
	}
	last := chunks[len(chunks)-1]
	if !saw || last.Kind != chat.ChunkOutcome || len(last.Outcome.Info().Prompts) != 1 {
		t.Fatalf("stream: %+v", chunks)
	}
	// Outside a turn it does nothing.
	chat.ReportPrompt(ctx, use)
}
