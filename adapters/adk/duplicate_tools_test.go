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

// TestFactoryRefusesDuplicateTool: the adapter's factory refuses an agent
// that names a tool twice (tools: [lookup_order, lookup_order]), as the
// native backend does (agent.New). ADK-Go cannot run such an agent: every
// turn would fail inside it as node_exception, retryable_transient, so
// clients would retry a turn that can never succeed. Refusing it at
// startup reports the mistake where it is made.
func TestFactoryRefusesDuplicateTool(t *testing.T) {
	tools := adaptertest.Tools()
	p := adaptertest.ProviderFunc(func(*llm.Request) {})
	ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(`{}`), Provider: p, Model: "m",
		Tools: append(tools[:1:1], tools[0])}
	ctx := context.Background()
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		return // refused at startup
	}
	defer func() { _ = a.(interface{ Close() error }).Close() }()
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	_, err = a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
	t.Fatalf("Factory built an agent naming lookup_order twice, want it refused (its turn returned %v)", err)
}
