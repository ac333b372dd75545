package adk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/llm"
)

// TestAttack53DuplicateToolRefusedAtStartup: a workspace agent naming a
// tool twice (tools: [lookup_order, lookup_order]) is refused at startup
// on the native backend (agent.New refuses a tool named twice, and the
// workspace checks it before the store opens), but an adk agent starts,
// and then every turn fails inside ADK-Go (node_exception,
// retryable_transient: "Try again in a moment", a 503 with Retry-After
// on the OpenAI endpoint) however often it is retried. Expected: the
// adapter's factory refuses the agent, as the native one does.
func TestAttack53DuplicateToolRefusedAtStartup(t *testing.T) {
	tools := adaptertest.Tools()
	p := adaptertest.ProviderFunc(func(*llm.Request) {})
	ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(`{}`), Provider: p, Model: "m",
		Tools: append(tools[:1:1], tools[0])}
	ctx := context.Background()
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		return // refused at startup: expected
	}
	defer func() { _ = a.(interface{ Close() error }).Close() }()
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	_, err = a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
	t.Fatalf("an agent with lookup_order twice was built; its turn then returned %v", err)
}
