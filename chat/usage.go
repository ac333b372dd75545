package chat

import (
	"context"
	"sync"

	"github.com/armature-go/armature/llm"
)

// ChunkUsage is a model call's usage and finish reason, streamed after
// the call (ReportModelCall).
const ChunkUsage ChunkKind = "usage"

// ModelCall is what one model call of a turn reported: its token usage
// (counters nil when the provider did not report them) and its finish
// reason.
type ModelCall struct {
	Usage        llm.Usage
	FinishReason llm.FinishReason
}

type meterKey struct{}

// meter sums the model calls of one turn.
type meter struct {
	mu      sync.Mutex
	usage   llm.Usage
	finish  llm.FinishReason
	calls   int
	prompts []PromptUse
}

// ReportModelCall records a model call of the turn running in ctx: its
// usage is added to the turn's (Turn.Usage), its finish reason becomes
// the turn's (Turn.FinishReason: the last call's), and, when the turn is
// streamed, a ChunkUsage chunk carries it. Nodes that call a model (the
// prebuilt agent does) call it after every call; outside a chat turn it
// does nothing.
func ReportModelCall(ctx context.Context, resp *llm.Response) {
	if resp == nil {
		return
	}
	if m, ok := ctx.Value(meterKey{}).(*meter); ok {
		m.mu.Lock()
		addUsage(&m.usage, resp.Usage)
		m.finish = resp.FinishReason
		m.calls++
		m.mu.Unlock()
	}
	if Streaming(ctx) {
		Emit(ctx, Chunk{Kind: ChunkUsage, Model: &ModelCall{Usage: resp.Usage, FinishReason: resp.FinishReason}})
	}
}

// withMeter installs a fresh meter for a turn.
func withMeter(ctx context.Context) (context.Context, *meter) {
	m := &meter{}
	return context.WithValue(ctx, meterKey{}, m), m
}

// stamp copies the turn's model usage onto its outcome.
func (m *meter) stamp(out Outcome) {
	if out == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := out.Info()
	if len(m.prompts) > 0 {
		t.Prompts = m.prompts
	}
	if m.calls == 0 {
		return
	}
	t.Usage, t.FinishReason, t.ModelCalls = m.usage, m.finish, m.calls
}

// addUsage adds b's reported counters to a's.
func addUsage(a *llm.Usage, b llm.Usage) {
	for _, p := range []struct {
		dst **int
		src *int
	}{
		{&a.PromptTokens, b.PromptTokens}, {&a.CompletionTokens, b.CompletionTokens}, {&a.TotalTokens, b.TotalTokens},
		{&a.CachedTokens, b.CachedTokens}, {&a.CacheCreationTokens, b.CacheCreationTokens},
	} {
		if p.src == nil {
			continue
		}
		n := *p.src
		if *p.dst != nil {
			n += **p.dst
		}
		*p.dst = &n
	}
}
