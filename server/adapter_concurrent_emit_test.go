package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// adapter.Emitter: "Emit is safe to call from any goroutine while Run
// runs". Artifacts emitted from concurrent goroutines (an upstream
// running tools in parallel) must all be recorded, each with its own
// id, on the run's output and as runtime.artifact.created events.
func TestAdapterArtifactsEmittedConcurrentlyAllListed(t *testing.T) {
	const workers, each = 16, 2000
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{Name: fmt.Sprintf("w%d-%d", w, i)}})
				}
			}()
		}
		wg.Wait()
		return adapter.Completed("done", nil), nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	run, evs := settledRun(t, srv, resp.RunID)
	var out struct {
		Artifacts []runtime.Artifact `json:"artifacts"`
	}
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, a := range out.Artifacts {
		ids[a.ID]++
	}
	created := 0
	for _, e := range evs {
		if e.Type == runtime.EventArtifactCreated {
			created++
		}
	}
	dups := 0
	for _, n := range ids {
		if n > 1 {
			dups += n - 1
		}
	}
	t.Logf("emitted %d, output lists %d (%d distinct ids), %d runtime.artifact.created events", workers*each, len(out.Artifacts), len(ids), created)
	if len(out.Artifacts) != workers*each || dups > 0 || created != workers*each {
		t.Errorf("emitted %d artifacts concurrently: run output lists %d with %d duplicate ids; %d created events", workers*each, len(out.Artifacts), dups, created)
	}
}
