package adaptertest

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// SlowWord makes the scripted model block: a user message containing it
// is answered only once the call's context ends (the script cancels
// that turn).
const SlowWord = "slowly"

// Model is the script's scripted fake model, deterministic and offline
// (the demo model of armature serve): after a tool result it summarizes
// the result; a message mentioning a refund calls issue_refund (which
// needs approval); one mentioning an order calls lookup_order; a message
// containing SlowWord blocks until its context ends; anything else is
// echoed ("You said: ..."). It implements llm.Streamer. An adapter under
// test bridges it (adapter.Agent.Provider) to its upstream's model
// interface.
type Model struct {
	demo demo.Model

	mu      sync.Mutex
	blocked chan struct{} // closed when a slow call blocks
	last    []llm.Message // the transcript of the latest call
}

var (
	_ llm.Provider = (*Model)(nil)
	_ llm.Streamer = (*Model)(nil)
)

// LastTranscript returns the messages of the model's latest call: what
// the upstream sent the model.
func (m *Model) LastTranscript() []llm.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.last)
}

// NewModel returns a scripted model.
func NewModel() *Model { return &Model{blocked: make(chan struct{})} }

// Blocked is closed once a call with SlowWord blocks.
func (m *Model) Blocked() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.blocked
}

// Ready reports the model ready.
func (m *Model) Ready(ctx context.Context) error { return nil }

// slow blocks a call whose last message is the user's SlowWord request
// until ctx ends.
func (m *Model) slow(ctx context.Context, req *llm.Request) error {
	msgs := req.Transcript()
	m.mu.Lock()
	m.last = slices.Clone(msgs)
	m.mu.Unlock()
	if len(msgs) == 0 {
		return nil
	}
	last := msgs[len(msgs)-1]
	if last.Role != llm.RoleUser || !strings.Contains(last.Text(), SlowWord) {
		return nil
	}
	m.mu.Lock()
	select {
	case <-m.blocked:
	default:
		close(m.blocked)
	}
	m.mu.Unlock()
	<-ctx.Done()
	return context.Cause(ctx)
}

// Complete answers per the script.
func (m *Model) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := m.slow(ctx, req); err != nil {
		return nil, err
	}
	return m.demo.Complete(ctx, req)
}

// Stream streams the answer's text word by word, then its tool calls.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		if err := m.slow(ctx, req); err != nil {
			yield(nil, err)
			return
		}
		for c, err := range m.demo.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
	}
}

// Tools returns the script's tool gateway: lookup_order (safe), and
// issue_refund, which needs approval (dangerous).
func Tools() []agent.Tool { return demo.Tools() }
