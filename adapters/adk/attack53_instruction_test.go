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

// TestAttack53SystemPromptBraces: a workspace agent's system: prompt is
// the adk agent's default instruction, and the adapter hands it to
// ADK-Go's session-state templating (instructionutil.InjectSessionState
// in setInstruction), so a prompt holding a word in braces ("Reply in
// the form {answer}") fails every turn of the agent with "state key
// does not exist". The same prompt works on a native agent (no
// templating), and through the binary the failure is reported as
// node_exception, retryable_transient: REST says "Try again in a
// moment", the OpenAI endpoint answers 503 with Retry-After: 1, so
// clients (the official SDKs retry 5xx on their own) retry a turn that
// can never succeed. Expected: the workspace's system prompt reaches the
// model as written (ADK-Go's templating is for the adk: section's own
// instruction), and the turn completes.
func TestAttack53SystemPromptBraces(t *testing.T) {
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
		t.Fatalf("a turn of an agent whose system prompt holds {answer} failed: %v", err)
	}
	if res.Output == nil || res.Output.Text != "ok" {
		t.Fatalf("result %+v, want the model's answer", res)
	}
	if !strings.Contains(sent, "{answer}") {
		t.Fatalf("system instruction sent %q, want the workspace's prompt as written", sent)
	}
}
