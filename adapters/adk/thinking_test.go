package adk_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestThinkingThroughTheBridge: a bridged model's reasoning (Anthropic's
// extended thinking: a signed thinking block and a redacted one) goes
// into ADK-Go's session as thought parts and back to the model, exactly,
// with the calls it came with, on the next request of the tool turn, as
// Anthropic requires; and it is kept in the runtime's history. Before,
// the bridge dropped it (and a streamed call lost its signatures to the
// generic assembly), and Anthropic refused every tool turn's second
// request with 400.
func TestThinkingThroughTheBridge(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run("streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
			srv, requests := adaptertest.AnthropicThinkingUpstream(t, "lookup_order", `{"order":"7"}`, "Order 7 ships Thursday.")
			adaptertest.ThinkingToolTurn(t, modelHarness(t, adaptertest.ThinkingAgent(t, adk.Name, srv.URL, streaming)), requests)
		})
	}
}

// TestThinkingAcrossRestart: an approval asked by a reasoning model,
// given after a restart that lost ADK-Go's in-memory session, completes:
// the call's reasoning is kept in the runtime's history and seeded back
// into ADK-Go's session with the call, so the request answering the call
// starts with it, as Anthropic requires.
func TestThinkingAcrossRestart(t *testing.T) {
	srv, requests := adaptertest.AnthropicThinkingUpstream(t, "issue_refund", `{"order":"5","amount":30}`, "The refund is done.")
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	ctx := context.Background()
	ag := adaptertest.ThinkingAgent(t, adk.Name, srv.URL, true)
	out, err := agentHarness(t, st, ag).Send(ctx, "s", llm.UserText("refund order 5"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("refund turn: %v %#v", err, out)
	}
	out, err = agentHarness(t, st, ag).Signal(ctx, chat.Signal{SessionID: "s", SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")})
	c, ok := out.(*chat.Completed)
	if err != nil || !ok {
		t.Fatalf("approval after the restart: %v %#v\nrequests:\n%s", err, out, strings.Join(requests(), "\n"))
	}
	if got := c.Replies[len(c.Replies)-1].Text(); got != "The refund is done." {
		t.Fatalf("reply %q", got)
	}
	for _, m := range c.Replies {
		if len(m.ToolCalls) > 0 {
			adaptertest.WantReasoning(t, m)
		}
	}
}
