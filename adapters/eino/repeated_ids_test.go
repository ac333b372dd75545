package eino_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestRepeatedCallIDs: a model repeating a tool call id is never sent
// two calls of one id (the bridge gives a repeated id a fresh one), and
// each result answers its own call.
func TestRepeatedCallIDs(t *testing.T) {
	ctx := context.Background()
	m := &adaptertest.SameIDs{}
	ag := &adapter.Agent{ID: "x", Backend: eino.Name, Provider: m, Tools: demo.Tools()}
	a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
	for _, n := range []string{"1", "2", "3"} {
		if out, _ := h.Send(ctx, "acme/s", llm.UserText("where is order "+n+"?")); out == nil {
			t.Fatal("no outcome")
		} else if _, ok := out.(*chat.Completed); !ok {
			t.Fatalf("order %s: %#v", n, out)
		}
	}
	adaptertest.CheckCallIDs(t, m.Requests())
}

// TestRunaway: a model that never stops calling tools, first one nobody
// declared: the undeclared call is answered with an error the model
// reads, and the turn ends completed at max_iterations saying so.
// Before, both failed the turn as node_exception (retryable: a client's
// retries ran its tools again).
func TestRunaway(t *testing.T) {
	adaptertest.CheckRunaway(t, eino.Name, eino.Factory, `{"max_iterations":5}`, 5)
}

// TestClosedCalls: a call awaiting approval that a new message
// superseded, or that was cancelled, reaches the model as not run.
func TestClosedCalls(t *testing.T) {
	adaptertest.CheckClosedCalls(t, eino.Name, eino.Factory)
}
