package adk_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestThoughtSignatureAcrossRestart: an approval asked by a Gemini 3
// model through ADK-Go's own Gemini client, then given after a restart
// that lost ADK-Go's in-memory session (the default), completes: the
// call's thoughtSignature is kept in the runtime's history and goes back
// into the seeded ADK-Go session, so the request that answers the call
// carries it. Before, the seeded call had none, and Gemini 3 refused the
// request (400), failing every approval across a restart.
func TestThoughtSignatureAcrossRestart(t *testing.T) {
	srv, requests := adaptertest.Gemini3Upstream(t, `{"name":"issue_refund","args":{"order":"5","amount":30}}`, "c2lnLXJlZnVuZC01", "The refund is done.")
	t.Setenv("TEST_GEMINI_KEY", "test-key")
	section := `{"streaming":false,"model":{"provider":"gemini","name":"gemini-3-test","base_url":` + quote(srv.URL) + `,"api_key_env":"TEST_GEMINI_KEY"}}`
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	ctx := context.Background()
	out, err := newHarness(t, st, section).Send(ctx, "s", llm.UserText("refund order 5"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("refund turn: %v %#v", err, out)
	}
	out, err = newHarness(t, st, section).Signal(ctx, chat.Signal{SessionID: "s", SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")})
	c, ok := out.(*chat.Completed)
	if err != nil || !ok {
		t.Fatalf("approval after the restart: %v %#v\nrequests:\n%s", err, out, strings.Join(requests(), "\n"))
	}
	if got := c.Replies[len(c.Replies)-1].Text(); got != "The refund is done." {
		t.Fatalf("reply %q", got)
	}
	if r := requests(); !strings.Contains(r[len(r)-1], `"thoughtSignature":"c2lnLXJlZnVuZC01"`) {
		t.Fatalf("the request answering the call lacks its signature: %s", r[len(r)-1])
	}
}

// TestThoughtSignatureThroughTheBridge: a bridged workspace model's tool
// call signature (llm.ToolCall.Signature: Armature's Gemini client's
// thoughtSignature) comes back to the model with the call on the next
// request of the tool turn, and is kept in the runtime's history.
func TestThoughtSignatureThroughTheBridge(t *testing.T) {
	var (
		mu   sync.Mutex
		sent [][]llm.Message
	)
	p := scriptedProvider(func(req *llm.Request) *llm.Response {
		mu.Lock()
		sent = append(sent, req.Messages)
		mu.Unlock()
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				return &llm.Response{Message: llm.AssistantText("Order 7 ships Thursday."), FinishReason: llm.FinishStop}
			}
		}
		return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: "call_1", Name: "lookup_order",
			Arguments: json.RawMessage(`{"order":"7"}`), Signature: "c2lnLWxvb2t1cA=="}), FinishReason: llm.FinishToolCalls}
	})
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Model: "m", Provider: p, Tools: demo.Tools(), Config: json.RawMessage(`{"streaming":false}`)}
	h := modelHarness(t, ag)
	out, err := h.Send(context.Background(), "s", llm.UserText("where is order 7?"))
	if c, ok := out.(*chat.Completed); err != nil || !ok || c.Replies[len(c.Replies)-1].Text() != "Order 7 ships Thursday." {
		t.Fatalf("tool turn: %v %#v", err, out)
	}
	if len(sent) != 2 {
		t.Fatalf("%d model calls, want 2", len(sent))
	}
	var found bool
	for _, m := range sent[1] {
		for _, tc := range m.ToolCalls {
			found = found || tc.Signature == "c2lnLWxvb2t1cA=="
		}
	}
	if !found {
		t.Fatalf("the second call's request lost the call's signature: %+v", sent[1])
	}
}

// scriptedProvider is an llm.Provider answering each request with f's
// response.
type scriptedProvider func(*llm.Request) *llm.Response

func (f scriptedProvider) Ready(context.Context) error { return nil }

func (f scriptedProvider) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	resp := f(req)
	resp.Raw = json.RawMessage(`{}`)
	return resp, nil
}
