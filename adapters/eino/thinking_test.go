package eino_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// TestThinkingThroughTheBridge: a bridged model's reasoning (Anthropic's
// extended thinking: a signed thinking block and a redacted one) rides
// with its Eino message (ContentExtra, and ReasoningContent for Eino's
// readers) and goes back to the model exactly, with the calls it came
// with, on the next request of the tool turn, as Anthropic requires; it
// is kept in the runtime's history. Before, the bridge dropped it (and a
// streamed call lost its signatures to the generic assembly), and
// Anthropic refused every tool turn's second request with 400.
func TestThinkingThroughTheBridge(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run("streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
			srv, requests := adaptertest.AnthropicThinkingUpstream(t, "lookup_order", `{"order":"7"}`, "Order 7 ships Thursday.")
			adaptertest.ThinkingToolTurn(t, modelHarness(t, adaptertest.ThinkingAgent(t, eino.Name, srv.URL, streaming)), requests)
		})
	}
}

// TestThinkingSurvivesApproval: a reasoning model's call that needs
// approval interrupts Eino; the call's reasoning survives Eino's
// checkpoint of the run, so that the request after the approval starts
// with it, as Anthropic requires.
func TestThinkingSurvivesApproval(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run("streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
			srv, requests := adaptertest.AnthropicThinkingUpstream(t, "issue_refund", `{"order":"5","amount":30}`, "The refund is done.")
			ctx := context.Background()
			h := modelHarness(t, adaptertest.ThinkingAgent(t, eino.Name, srv.URL, streaming))
			out, err := h.Send(ctx, "s", llm.UserText("refund order 5"))
			s, ok := out.(*chat.Suspended)
			if err != nil || !ok {
				t.Fatalf("refund turn: %v %#v", err, out)
			}
			out, err = h.Signal(ctx, chat.Signal{SessionID: "s", SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")})
			c, ok := out.(*chat.Completed)
			if err != nil || !ok {
				t.Fatalf("approval: %v %#v\nrequests:\n%s", err, out, strings.Join(requests(), "\n"))
			}
			if got := c.Replies[len(c.Replies)-1].Text(); got != "The refund is done." {
				t.Fatalf("reply %q", got)
			}
			for _, m := range c.Replies {
				if len(m.ToolCalls) > 0 {
					adaptertest.WantReasoning(t, m)
				}
			}
		})
	}
}
