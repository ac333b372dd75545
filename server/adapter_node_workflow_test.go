package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// PROTOCOLS.md §3: "graph node completed | runtime.adapter.event with
// agent.node.completed{workflowId, nodeId}"; stable-harness §1.1.4 lists
// workflowId among the common fields. A native turn's node events carry
// it (the agent's graph); a backend adapter's (ADK-Go's, and every
// adapter that reports Node alone) do not.
func TestAdapterNodeEventsNameTheirWorkflow(t *testing.T) {
	srv, _ := turnFuncServer(t, adaptertest.Scripted{})
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	_, evs := settledRun(t, srv, resp.RunID)
	for _, e := range evs {
		if e.Type != runtime.EventAdapterEvent {
			continue
		}
		var d struct {
			Event map[string]any `json:"event"`
		}
		_ = json.Unmarshal(e.Data, &d)
		if d.Event["phase"] == runtime.PhaseNodeCompleted {
			if _, ok := d.Event["workflowId"]; !ok {
				t.Errorf("agent.node.completed without workflowId: %s", e.Data)
			}
		}
	}
}
