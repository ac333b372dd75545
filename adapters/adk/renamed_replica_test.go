package adk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestApprovalOnReplicaWithRenamedAgent: two replicas share the
// runtime's stores and ADK-Go's sessions on PostgreSQL, the second with
// the adk: section's name changed (a rolling deploy of a new workspace).
// A refund suspended on the first and approved on the second resumes:
// the refund runs and the model reads its result. ADK-Go reads another
// agent name's events as quoted context, so the adapter gives a session
// last written under another name the runtime's history again, under
// this agent's name, with the pending confirmation.
func TestApprovalOnReplicaWithRenamedAgent(t *testing.T) {
	ctx := context.Background()
	url := postgresURL(t)
	m := adaptertest.NewModel()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	cps := checkpoint.NewMemoryStore(nil)
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: demo.Tools()}
	replica := func(name string) *chat.Harness {
		e, err := adk.NewEngine(ctx, adk.Config{Name: name, Tools: demo.Tools(), LLM: adk.NewProviderModel("m", m),
			Session: adk.SessionConfig{Driver: adk.SessionPostgres, URL: url}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		g, err := adapter.Compile(&adk.Adapter{Engine: e}, nil, ag, graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(cps))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cps)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := replica("alpha"), replica("beta")

	out, err := a.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("refund on replica A: %#v %v", out, err)
	}
	out, err = b.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	if c, ok := out.(*chat.Completed); !ok || !strings.Contains(c.Replies[len(c.Replies)-1].Text(), "refunded") {
		t.Errorf("approval on replica B: %v, want the refund's result answered", err)
	}
	out, err = b.Send(ctx, "acme/s", llm.UserText("what happened?"))
	if _, ok := out.(*chat.Completed); err != nil || !ok {
		t.Fatalf("next message on replica B: %#v %v", out, err)
	}
	var sent []string
	for _, msg := range m.LastTranscript() {
		sent = append(sent, string(msg.Role)+": "+msg.Text())
	}
	if all := strings.Join(sent, "\n"); !strings.Contains(all, "refunded") || strings.Contains(all, "requires confirmation") {
		t.Errorf("the next model call was sent\n%s\nwant the refund's result (it ran), not a call awaiting confirmation", all)
	}
}
