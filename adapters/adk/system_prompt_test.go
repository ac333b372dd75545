package adk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/llm"
)

// TestSystemPromptSentAsWritten: a workspace agent's system: prompt, the
// adk agent's default instruction, reaches the model as written, braces
// included ("Reply in the form {answer}"), and the turn completes, as on
// a native agent. ADK-Go's session-state templating
// (instructionutil.InjectSessionState) is for the adk: section's own
// instruction only; applied to the workspace's prompt it would fail every
// turn with "state key does not exist", reported as a retryable failure
// that clients would retry without end.
func TestSystemPromptSentAsWritten(t *testing.T) {
	const system = "You are a support agent. Reply in the form {answer} followed by a short reason."
	var sent string
	p := adaptertest.ProviderFunc(func(req *llm.Request) { sent = req.System })
	ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(`{}`), System: system, Provider: p, Model: "m"}
	ctx := context.Background()
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.(interface{ Close() error }).Close() }()
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
	if err != nil {
		t.Fatalf("a turn of an agent whose system prompt holds {answer}: %v, want it to complete", err)
	}
	if res.Output == nil || res.Output.Text != "ok" {
		t.Fatalf("result %+v, want the model's answer", res)
	}
	if !strings.Contains(sent, "{answer}") {
		t.Fatalf("system instruction sent %q, want the workspace's prompt as written", sent)
	}
}
