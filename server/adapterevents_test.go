package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// A backend adapter's turn records the upstream's node completions and
// none of the scaffolding graph Compile wraps it in (adapter.Wraps): its
// run node is the runtime's, not the upstream's.
func TestAdapterTurnRecordsUpstreamNodesOnly(t *testing.T) {
	ctx := context.Background()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	for _, tool := range []bool{false, true} {
		s := adaptertest.Scripted{Tool: tool}
		a, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: s, Agent: &adapter.Agent{ID: "scripted", Backend: s.Name()},
			Sessions: sessions})
		if err != nil {
			t.Fatal(err)
		}
		store := runtime.NewMemoryStore(runtime.MemoryConfig{})
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{Agents: []*server.Agent{a}, Sessions: sessions, Runs: rec})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
		resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hello")})
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resp.RunID})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			if e.Type != runtime.EventAdapterEvent {
				continue
			}
			var d struct {
				Event struct {
					Phase, NodeID string
				} `json:"event"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Event.Phase+" "+d.Event.NodeID)
		}
		want := []string{"agent.handoff ", "agent.output.delta ", "agent.node.completed agent"}
		if tool {
			want = []string{"agent.handoff ", "agent.tool.start ", "agent.tool.result ", "agent.output.delta ", "agent.node.completed agent"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("tool %v: agent events %q, want %q", tool, got, want)
		}
	}
}
