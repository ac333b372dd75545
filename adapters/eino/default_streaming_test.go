package eino_test

import (
	"context"
	"encoding/json"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// chunkedModel answers "one two three", in three chunks when streamed;
// it counts its streamed and its whole calls.
type chunkedModel struct{ streamed, whole atomic.Int32 }

func (*chunkedModel) Ready(context.Context) error { return nil }
func (m *chunkedModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	m.whole.Add(1)
	return &llm.Response{Message: llm.AssistantText("one two three"), FinishReason: llm.FinishStop}, nil
}
func (m *chunkedModel) Stream(context.Context, *llm.Request) iter.Seq2[*llm.Chunk, error] {
	m.streamed.Add(1)
	return func(yield func(*llm.Chunk, error) bool) {
		for _, w := range []string{"one ", "two ", "three"} {
			if !yield(&llm.Chunk{Content: w}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop}, nil)
	}
}

// TestStreamingByDefault: an agent with backend: eino whose eino:
// section does not set streaming runs with Eino's streaming
// (RunnerConfig.EnableStreaming): a streamed turn calls the model
// streamed and its reply arrives chunk by chunk, as on the native
// backend; streaming: false still selects Eino's non-streaming run.
// Before, streaming was off unless the section said streaming: true:
// the model was called whole and the reply arrived in one chunk.
func TestStreamingByDefault(t *testing.T) {
	for _, tc := range []struct {
		section  string
		streamed bool
	}{{`{}`, true}, {``, true}, {`{"streaming":true}`, true}, {`{"streaming":false}`, false}} {
		m := &chunkedModel{}
		ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Model: "m", Provider: m, Tools: demo.Tools(), Config: json.RawMessage(tc.section)}
		h := modelHarness(t, ag)
		deltas := 0
		for c, err := range h.SendStreaming(t.Context(), "s", llm.UserText("hello")) {
			if err != nil {
				t.Fatalf("section %q: %v", tc.section, err)
			}
			if c.Kind == chat.ChunkText && c.Text != "" {
				deltas++
			}
		}
		if got := m.streamed.Load() > 0 && m.whole.Load() == 0; got != tc.streamed {
			t.Errorf("section %q: %d streamed model calls, %d whole ones; want streamed %v", tc.section, m.streamed.Load(), m.whole.Load(), tc.streamed)
		}
		if tc.streamed && deltas < 3 {
			t.Errorf("section %q: the reply came in %d chunks", tc.section, deltas)
		}
	}
}
