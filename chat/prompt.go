package chat

import (
	"context"
	"slices"
)

// ChunkPrompt reports the managed prompt a node rendered for the turn
// (ReportPrompt).
const ChunkPrompt ChunkKind = "prompt"

// PromptUse identifies a managed prompt (package prompt) as a turn used
// it: which prompt, which version under which label, and the content
// hashes of its template and of what it rendered.
type PromptUse struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Label        string `json:"label,omitempty"`
	TemplateHash string `json:"templateHash,omitempty"`
	RenderedHash string `json:"renderedHash,omitempty"`
}

// ReportPrompt records that the turn running in ctx used the managed
// prompt use: it is added to the turn's Turn.Prompts and, when the turn
// is streamed, a ChunkPrompt chunk carries it (a server records it on the
// turn's run). Nodes that render managed prompts call it (the prebuilt
// agent does for a managed system prompt); outside a chat turn it does
// nothing. A use the turn already reported (the same prompt rendered
// the same way by every model call of a tool loop) is not repeated.
func ReportPrompt(ctx context.Context, use PromptUse) {
	if m, ok := ctx.Value(meterKey{}).(*meter); ok {
		m.mu.Lock()
		seen := slices.Contains(m.prompts, use)
		if !seen {
			m.prompts = append(m.prompts, use)
		}
		m.mu.Unlock()
		if seen {
			return
		}
	}
	if Streaming(ctx) {
		Emit(ctx, Chunk{Kind: ChunkPrompt, Prompt: &use})
	}
}
