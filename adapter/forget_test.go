package adapter_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// A deleted session's tool-call index goes with it, in the graph Compile
// builds around an adapter as in the chat harness: kept, it held the
// deleted history's call ids until 1,024 other sessions pushed it out.
func TestDeleteForgetsAdapterCallIndex(t *testing.T) {
	ctx := context.Background()
	g, indexes, err := adapter.CompileIndexed(reuser{}, nil, &adapter.Agent{ID: "helper", Backend: "reuser"},
		graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	// Each turn adds 6 messages (the question, two calls and their
	// results, the answer): past 64 the call ids are indexed.
	for i := range 12 {
		for _, id := range []string{"x", "y"} {
			out, err := h.Send(ctx, id, llm.UserText("where is order 7?"))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := out.(*chat.Completed); !ok {
				t.Fatalf("turn %d of %s: %#v", i, id, out)
			}
		}
	}
	if n := indexes(); n != 2 {
		t.Fatalf("%d call indexes after two sessions' turns, want 2", n)
	}
	if err := h.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if n := indexes(); n != 1 {
		t.Fatalf("%d call indexes after a delete, want 1", n)
	}
}
