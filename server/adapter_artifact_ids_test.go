package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// An artifact the runtime numbered ("artifact-1") and one the adapter
// names "artifact-1" afterwards: the run's output must not list two
// artifacts under one id (the commit promises ids unique in a run).
func TestAdapterArtifactIDTakenLaterGetsASuffix(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{Name: "draft"}})
		res := adapter.Completed("done", nil)
		res.Output.Artifacts = []runtime.Artifact{{ID: "artifact-1", Name: "final"}}
		return res, nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := settledRun(t, srv, resp.RunID)
	var out struct {
		Artifacts []runtime.Artifact `json:"artifacts"`
	}
	_ = json.Unmarshal(run.Output, &out)
	seen := map[string]string{}
	for _, a := range out.Artifacts {
		if prev, ok := seen[a.ID]; ok {
			t.Errorf("artifacts %q and %q share id %q in run output %s", prev, a.Name, a.ID, run.Output)
		}
		seen[a.ID] = a.Name
	}
}
