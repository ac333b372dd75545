package eino_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"
)

// TestToolPanicAnswersTheModel: a tool that panics answers the model
// "error: the tool failed: ...", as Armature's own agent answers it, and
// the run goes on; the panic does not fail the turn.
func TestToolPanicAnswersTheModel(t *testing.T) {
	bad := agent.Tool{Definition: llm.Tool{Name: "explode", Parameters: json.RawMessage(`{"type":"object"}`)},
		Call: func(context.Context, json.RawMessage) (string, error) { panic("boom") }}
	it, err := eino.NewTool(bad)
	if err != nil {
		t.Fatal(err)
	}
	out, err := it.InvokableRun(context.Background(), `{}`)
	if err != nil || !strings.HasPrefix(out, "error: the tool failed: boom") {
		t.Fatalf("InvokableRun = %q, %v; want the failure as the result, no error", out, err)
	}
}
