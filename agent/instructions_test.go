package agent_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/agent"
)

// TestInstructionsGetter: Instructions reads what WithInstructions
// attached, "" included (no system prompt), and reports none otherwise.
func TestInstructionsGetter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		want   string
		wantOK bool
	}{
		{name: "none", ctx: context.Background()},
		{name: "empty", ctx: agent.WithInstructions(context.Background(), ""), wantOK: true},
		{name: "set", ctx: agent.WithInstructions(context.Background(), "Be brief."), want: "Be brief.", wantOK: true},
		{name: "innermost", ctx: agent.WithInstructions(agent.WithInstructions(context.Background(), "a"), "b"), want: "b", wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := agent.Instructions(tc.ctx); got != tc.want || ok != tc.wantOK {
				t.Errorf("Instructions = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
