package adk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// TestSupersededHalfDecidedStep: a model step asking two confirmations,
// the first approved (recorded, not yet run: ADK-Go takes a step's
// answers together), then a new message supersedes the turn. Neither
// call runs, and the model's next request answers both calls with the
// runtime's closing results, not ADK-Go's "requires confirmation".
func TestSupersededHalfDecidedStep(t *testing.T) {
	ctx := context.Background()
	m := &refundScript{}
	h := scriptHarness(t, m)
	out, err := h.Send(ctx, "acme/s", llm.UserText("refund two"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("first: %#v %v", out, err)
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	if _, ok := out.(*chat.Suspended); err != nil || !ok {
		t.Fatalf("after the first decision: %#v %v", out, err)
	}
	out, err = h.Send(ctx, "acme/s", llm.UserText("hello"))
	if _, ok := out.(*chat.Completed); err != nil || !ok {
		t.Fatalf("new message: %#v %v", out, err)
	}
	got := m.results()
	for _, id := range []string{"r1", "r2"} {
		if r, ok := got[id]; !ok || r == "" || strings.Contains(r, "requires confirmation") || strings.Contains(r, "refunded") {
			t.Errorf("call %s answered %q", id, r)
		}
	}
}
