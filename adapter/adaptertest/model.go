package adaptertest

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

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

// SameIDs is a model that names every tool call call_0, as some
// OpenAI-compatible servers do: a message "where is order N?" looks
// order N up (lookup_order), a tool result is answered with its text
// ("found: ..."), anything else with "ok". It keeps every request it is
// sent (Requests), for checks that an adapter never sends the model two
// calls of one id, nor a result under another call's id.
type SameIDs struct {
	mu   sync.Mutex
	reqs [][]llm.Message
}

var _ llm.Provider = (*SameIDs)(nil)

// Ready reports the model ready.
func (m *SameIDs) Ready(context.Context) error { return nil }

// Complete answers req (see SameIDs).
func (m *SameIDs) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	msgs := req.Transcript()
	m.mu.Lock()
	m.reqs = append(m.reqs, msgs)
	m.mu.Unlock()
	answer := llm.AssistantText("ok")
	switch last := msgs[len(msgs)-1]; {
	case last.Role == llm.RoleTool:
		answer = llm.AssistantText("found: " + last.Text())
	case strings.HasPrefix(last.Text(), "where is order "):
		n := strings.TrimSuffix(strings.TrimPrefix(last.Text(), "where is order "), "?")
		answer = llm.AssistantToolCalls(llm.ToolCall{ID: "call_0", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"` + n + `"}`)})
	}
	return &llm.Response{Message: answer, FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// Requests returns the transcripts of the requests the model was sent.
func (m *SameIDs) Requests() [][]llm.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// CheckCallIDs fails t when a transcript holds two tool calls of one id,
// or a tool result that does not answer the lookup of the order its
// call named (SameIDs's lookups: "order N" in the result).
func CheckCallIDs(t testing.TB, transcripts [][]llm.Message) {
	t.Helper()
	for i, req := range transcripts {
		orders := map[string]string{} // call id → the order it looks up
		for _, msg := range req {
			for _, tc := range msg.ToolCalls {
				if _, dup := orders[tc.ID]; dup {
					t.Fatalf("request %d holds two calls %s: %v", i, tc.ID, req)
				}
				var args struct{ Order string }
				_ = json.Unmarshal(tc.Arguments, &args)
				orders[tc.ID] = args.Order
			}
			if msg.Role == llm.RoleTool && !strings.Contains(msg.Text(), "order "+orders[msg.ToolCallID]) {
				t.Fatalf("request %d answers the lookup of order %s with %q", i, orders[msg.ToolCallID], msg.Text())
			}
		}
	}
}
