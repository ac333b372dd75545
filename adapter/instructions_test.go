package adapter_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// TestRequestInstructions: a turn run under agent.WithInstructions hands
// the adapter its per-request instructions in Request.Instructions ("" is
// instructions too: none are sent); a turn without them, the next one or
// a resume, hands none; a resume has the resuming request's.
func TestRequestInstructions(t *testing.T) {
	ctx := context.Background()
	r := &refunder{}
	h := newHarness(t, r)
	var signal string // the last suspension's
	for _, tc := range []struct {
		name         string
		instructions *string
		text         string // the message; "" resumes the suspension
	}{
		{name: "instructions", instructions: new("Answer in French."), text: "hello"},
		{name: "next turn", text: "hello again"},
		{name: "empty instructions", instructions: new(""), text: "hello"},
		{name: "suspending turn", instructions: new("Be brief."), text: "refund please"},
		{name: "resume without", text: ""},
		{name: "suspending turn again", text: "refund please"},
		{name: "resume with", instructions: new("Confirm politely."), text: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tctx := ctx
			if tc.instructions != nil {
				tctx = agent.WithInstructions(ctx, *tc.instructions)
			}
			n := len(r.seen)
			var (
				out chat.Outcome
				err error
			)
			if tc.text == "" {
				out, err = h.Signal(tctx, chat.Signal{SignalID: signal, SessionID: "s", Payload: agent.Approve("")})
			} else {
				out, err = h.Send(tctx, "s", llm.UserText(tc.text))
			}
			if err != nil || len(r.seen) != n+1 {
				t.Fatalf("turn: %#v %v, %d runs", out, err, len(r.seen)-n)
			}
			if s, ok := out.(*chat.Suspended); ok {
				signal = s.Descriptor.SignalID
			}
			got := r.seen[n].Instructions
			switch {
			case tc.instructions == nil && got != nil:
				t.Errorf("Instructions %q, want none", *got)
			case tc.instructions != nil && (got == nil || *got != *tc.instructions):
				t.Errorf("Instructions %v, want %q", got, *tc.instructions)
			}
		})
	}
}

// TestInstructionsContext: WithInstructions carries a turn's
// instructions to the upstream's model hooks, "" included; nil carries
// none and hides an outer context's.
func TestInstructionsContext(t *testing.T) {
	outer := adapter.WithInstructions(context.Background(), new("outer"))
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		want   string
		wantOK bool
	}{
		{"none", context.Background(), "", false},
		{"text", adapter.WithInstructions(context.Background(), new("Be brief.")), "Be brief.", true},
		{"empty", adapter.WithInstructions(context.Background(), new("")), "", true},
		{"nil hides the outer", adapter.WithInstructions(outer, nil), "", false},
		{"inner wins", adapter.WithInstructions(outer, new("inner")), "inner", true},
	} {
		if got, ok := adapter.InstructionsOf(tc.ctx); got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}
