package agent_test

import (
	"context"
	"sync"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

// TestTypedCallEvents: an agent turn reports its model calls and tool
// executions to the graph's observers as typed events.
func TestTypedCallEvents(t *testing.T) {
	p := llmtest.New(
		llmtest.CallTools(call("c1", "get_weather", `{"city":"Paris"}`), call("c2", "get_weather", `{"city":"Atlantis"}`)),
		llmtest.Reply("Sunny."),
	)
	a, err := agent.New(agent.Config{Provider: p, Tools: []agent.Tool{weatherTool(t)}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		kinds []string
	)
	if _, err := g.AddObserver(func(_ context.Context, ev graph.Event) error {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *graph.LLMCompletionEvent:
			kinds = append(kinds, "llm")
		case *graph.ToolCallEvent:
			kinds = append(kinds, "tool:"+e.ToolCallID)
		case *graph.ToolCallFailedEvent:
			kinds = append(kinds, "tool_failed:"+e.ToolCallID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Send(t.Context(), "s1", llm.UserText("Weather?")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"llm", "tool:c1", "tool_failed:c2", "llm"}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
}
