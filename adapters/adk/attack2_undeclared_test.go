package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// mixedStep is a model whose first step calls a tool nobody declared,
// the approval-gated issue_refund twice (the same gated tool twice in
// one step, the first for an order of 256 KB) and repeats the call
// id call_0 each turn; a tool result is answered "noted".
type mixedStep struct {
	orderScript
	huge string
}

func (m *mixedStep) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, slices.Clone(req.Messages))
	m.mu.Unlock()
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText("noted"), FinishReason: llm.FinishStop}, nil
	}
	huge, _ := json.Marshal(m.huge)
	return &llm.Response{Message: llm.AssistantToolCalls(
		llm.ToolCall{ID: "call_0", Name: "delete_everything", Arguments: json.RawMessage(`{"really":true}`)},
		llm.ToolCall{ID: "call_1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":` + string(huge) + `,"amount":1}`)},
		llm.ToolCall{ID: "call_2", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":1}`)},
	), FinishReason: llm.FinishToolCalls}, nil
}

// TestUndeclaredBesideGatedCalls: a step calling an undeclared tool
// beside two calls of one gated tool (one with a 256 KB argument), on each
// session service, with and without a restart between the suspension
// and each decision: the undeclared call is answered with an error, the
// approved call runs once, the denied one never, and the model's next
// request answers each of the three calls exactly once.
func TestUndeclaredBesideGatedCalls(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite"} {
		for _, restart := range []bool{false, true} {
			name := driver
			if restart {
				name += "/restarts"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				section := `{}`
				if driver == "sqlite" {
					section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
				}
				m := &mixedStep{huge: strings.Repeat("x", 256<<10)}
				w := &randWorld{t: t, section: section, tools: &refundCounter{runs: map[string]int{}},
					st: stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}}
				w.m = &m.orderScript
				w.provider = m
				w.restart()
				defer func() {
					for _, c := range w.closers {
						c()
					}
				}()
				out, err := w.h.Send(ctx, "acme/s", llm.UserText("do it"))
				for _, approve := range []bool{true, false} {
					s, ok := out.(*chat.Suspended)
					if err != nil || !ok {
						t.Fatalf("want a suspension: %T %v", out, err)
					}
					if restart {
						w.restart()
					}
					payload := agent.Approve("")
					if !approve {
						payload = agent.Deny("once is enough")
					}
					out, err = w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: payload})
				}
				if _, ok := out.(*chat.Completed); err != nil || !ok {
					t.Fatalf("want a completed turn: %T %v", out, err)
				}
				w.tools.mu.Lock()
				runs, small := w.tools.runs[m.huge], w.tools.runs["7"]
				w.tools.mu.Unlock()
				if runs != 1 || small != 0 {
					t.Errorf("the approved refund ran %d times, the denied one %d, want 1 and 0", runs, small)
				}
				reqs := m.requests()
				last := reqs[len(reqs)-1]
				checkRequest(func(f string, a ...any) { t.Helper(); t.Fatalf("%.2000s", fmt.Sprintf(f, a...)) }, last, nil)
				var results []string
				for _, msg := range last {
					if msg.Role == llm.RoleTool {
						results = append(results, msg.Text())
					}
				}
				if len(results) != 3 || !strings.Contains(results[0], "delete_everything") || !strings.Contains(results[1], "refunded order xxx") || !strings.Contains(results[2], "once is enough") {
					for i := range results {
						results[i] = results[i][:min(len(results[i]), 200)]
					}
					t.Fatalf("the model's last request answers the calls with %q", results)
				}
			})
		}
	}
}
