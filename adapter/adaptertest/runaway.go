package adaptertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// Runaway is a model that never stops calling tools: its first call of
// a turn asks for a tool nobody declared (delete_everything), every
// later one for lookup_order, each call under a fresh id. It counts the
// calls it answered.
type Runaway struct {
	calls atomic.Int64
}

var _ llm.Provider = (*Runaway)(nil)

// Ready reports the model ready.
func (m *Runaway) Ready(context.Context) error { return nil }

// Complete answers with a tool call (see Runaway).
func (m *Runaway) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	n := m.calls.Add(1)
	msgs := req.Transcript()
	tc := llm.ToolCall{ID: fmt.Sprintf("call_%d", n), Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}
	if last := msgs[len(msgs)-1]; last.Role == llm.RoleUser {
		tc.Name, tc.Arguments = "delete_everything", json.RawMessage(`{}`)
	}
	return &llm.Response{Message: llm.AssistantToolCalls(tc), FinishReason: llm.FinishToolCalls, Raw: json.RawMessage(`{}`)}, nil
}

// Calls returns how many calls the model answered.
func (m *Runaway) Calls() int { return int(m.calls.Load()) }

// CheckRunaway checks that an adapter of backend, built by f with the
// given backend-native section (JSON, "" for none) and the Runaway
// model, survives a model that never stops calling tools, as a native
// agent does: a call of an undeclared tool is answered with an error
// the model reads (the turn goes on), and the loop ends at the
// upstream's bound on model calls (at most maxCalls) with a completed
// turn that keeps what ran and says it stopped; the history is valid
// (every call answered; the undeclared call reported failed), and the
// session's next message completes. A
// turn failing there instead is answered as retryable, and a client's
// retries would run its tools again.
func CheckRunaway(t *testing.T, backend string, f adapter.Factory, section string, maxCalls int) {
	t.Helper()
	ctx := context.Background()
	m := &Runaway{}
	h := sectionHarness(t, backend, f, m, section)
	unknown := chat.ToolStatus("")
	out, err := h.SendFunc(ctx, "acme/s", llm.UserText("clean up my account"), func(c chat.Chunk) bool {
		if c.Tool != nil && c.Tool.Name == "delete_everything" {
			unknown = c.Tool.Status
		}
		return true
	})
	c, ok := out.(*chat.Completed)
	if !ok {
		t.Fatalf("a runaway model's turn: %#v, %v", out, err)
	}
	if n := m.Calls(); n < 3 || n > maxCalls {
		t.Fatalf("the runaway model was called %d times, want 3 to %d", n, maxCalls)
	}
	last := c.Replies[len(c.Replies)-1]
	if last.Role != llm.RoleAssistant || len(last.ToolCalls) > 0 || !strings.Contains(last.Text(), "stopped") {
		t.Fatalf("the turn ends with %#v, want an answer saying it stopped", last)
	}
	answered := false
	for _, r := range c.Replies {
		answered = answered || (r.Role == llm.RoleTool && strings.Contains(r.Text(), "delete_everything"))
	}
	if !answered {
		t.Fatalf("the call of an undeclared tool was not answered with an error naming it: %v", c.Replies)
	}
	if unknown != chat.ToolFailed {
		t.Fatalf("the call of an undeclared tool was reported %q, want %q", unknown, chat.ToolFailed)
	}
	if err := llm.CheckHistory(nil, append([]llm.Message{llm.UserText("clean up my account")}, c.Replies...)); err != nil {
		t.Fatalf("the turn's history: %v", err)
	}
	calls := m.Calls()
	if out, err := h.Send(ctx, "acme/s", llm.UserText("never mind")); !isCompleted(out) {
		t.Fatalf("the next message: %#v, %v", out, err)
	}
	if m.Calls() > calls+maxCalls {
		t.Fatalf("the next message called the model %d times", m.Calls()-calls)
	}
}

// sectionHarness builds with f an agent of backend on model p, with the
// demo tools and the backend-native section (JSON, "" for none), and
// serves it with the chat harness on an in-memory store.
func sectionHarness(t *testing.T, backend string, f adapter.Factory, p llm.Provider, section string) *chat.Harness {
	t.Helper()
	ag := &adapter.Agent{ID: "x", Backend: backend, Model: "m", Provider: p, Tools: demo.Tools()}
	if section != "" {
		ag.Config = json.RawMessage(section)
	}
	a, err := f(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	return Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
}
