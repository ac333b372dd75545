package agent_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// sendAll sends text to each session n times; every turn must complete.
func sendAll(t *testing.T, h *chat.Harness, n int, text string, sessions ...string) {
	t.Helper()
	for i := range n {
		for _, id := range sessions {
			out, err := h.Send(context.Background(), id, llm.UserText(text))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := out.(*chat.Completed); !ok {
				t.Fatalf("turn %d of %s: %#v", i, id, out)
			}
		}
	}
}

// A deleted session's tool-call index goes with it, in the agent as in
// the chat harness: kept, it held the deleted history's call ids until
// 1,024 other sessions pushed it out.
func TestDeleteForgetsAgentCallIndex(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	// A history of 64 messages and more has its call ids indexed (each
	// turn adds 4: the question, the call, its result, the answer).
	sendAll(t, h, 17, "where is order 8?", "x", "y")
	if n := agent.CallIndexes(a); n != 2 {
		t.Fatalf("%d call indexes after two sessions' turns, want 2", n)
	}
	if err := h.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if n := agent.CallIndexes(a); n != 1 {
		t.Fatalf("%d call indexes after a delete, want 1", n)
	}
	// The session begins again under its id, with a history of its own.
	sendAll(t, h, 1, "where is order 9?", "x")
	st, err := g.SessionState(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if msgs := chat.Messages.Get(st); len(msgs) != 4 {
		t.Fatalf("the session begun again holds %d messages, want 4", len(msgs))
	}
}

// A graph running several agents as subgraphs, served by a chat
// harness: deleting a session drops its call index in every agent.
func TestDeleteForgetsCallIndexOfEveryAgent(t *testing.T) {
	var agents []*agent.Agent
	schema, err := chat.NewSchema(graph.NewDynamicField("first_out", graph.TypeAny), graph.NewDynamicField("second_out", graph.TypeAny))
	if err != nil {
		t.Fatal(err)
	}
	b := graph.NewBuilder(schema)
	for _, name := range []string{"first", "second"} {
		a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := a.Compile()
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		// Each agent reads the conversation and leaves its own messages
		// in a field of its own.
		b = b.AddSubgraph(name, sub, graph.Inputs(map[string]string{chat.MessagesField: chat.MessagesField}),
			graph.Outputs(map[string]string{name + "_out": chat.MessagesField}))
	}
	g, err := b.AddEdge("first", "second").
		AddNode("reply", func(context.Context, graph.State) (graph.Update, error) {
			return chat.Messages.Add(llm.AssistantText("done")), nil
		}).
		AddEdge("second", "reply").AddEdge("reply", graph.End).SetEntry("first").
		Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{}), Fields: []string{chat.MessagesField}}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	// Each turn adds 2 messages to the conversation: past 64 the agents
	// index its call ids.
	sendAll(t, h, 33, "where is order 8?", "x", "y")
	for i, a := range agents {
		if n := agent.CallIndexes(a); n != 2 {
			t.Fatalf("agent %d: %d call indexes after two sessions' turns, want 2", i, n)
		}
	}
	if err := h.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	for i, a := range agents {
		if n := agent.CallIndexes(a); n != 1 {
			t.Fatalf("agent %d: %d call indexes after a delete, want 1", i, n)
		}
	}
}
