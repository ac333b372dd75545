package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/runtime"
)

// TestResponsesAnswered: a suspended response counts as answered only
// when a decision resumed it. A child run whose resume was refused (its
// payload or the suspension record invalid, a signal that correlated
// with nothing) or cancelled (a busy session, POST /v1/runs/{id}/cancel)
// did not answer it, whatever the session holds, so a decision refused
// afterwards is told "no turn awaits it" (400), not "already answered"
// (409). Before, a refused payload counted as an answer.
func TestResponsesAnswered(t *testing.T) {
	ctx := context.Background()
	failed := func(cat errcat.Category) func(*runtime.FinishRequest) {
		return func(f *runtime.FinishRequest) {
			f.Status = runtime.StatusFailed
			f.Error = &runtime.RunError{Category: string(cat), Message: "m"}
		}
	}
	status := func(st runtime.Status) func(*runtime.FinishRequest) {
		return func(f *runtime.FinishRequest) { f.Status = st }
	}
	for _, c := range []struct {
		name     string
		children []func(*runtime.FinishRequest)
		later    int // runs of the session after the children
		want     bool
	}{
		{"none", nil, 0, false},
		{"completed", []func(*runtime.FinishRequest){status(runtime.StatusCompleted)}, 0, true},
		{"suspended again", []func(*runtime.FinishRequest){status(runtime.StatusSuspended)}, 0, true},
		{"failed upstream", []func(*runtime.FinishRequest){failed(errcat.ProviderUnavailable)}, 0, true},
		{"cancelled", []func(*runtime.FinishRequest){status(runtime.StatusCancelled)}, 0, false},
		{"correlation failed", []func(*runtime.FinishRequest){failed(errcat.HarnessSignalCorrelationFailed)}, 0, false},
		{"payload invalid", []func(*runtime.FinishRequest){failed(errcat.SuspensionResumePayloadInvalid)}, 0, false},
		{"record invalid", []func(*runtime.FinishRequest){failed(errcat.SuspensionRecordInvalid)}, 0, false},
		{"busy", []func(*runtime.FinishRequest){failed(errcat.InvocationCancelled)}, 0, false},
		{"refused, then completed", []func(*runtime.FinishRequest){failed(errcat.SuspensionResumePayloadInvalid), status(runtime.StatusCompleted)}, 0, true},
		// The session went on for longer than the scan's pages: the
		// resume is found through its parent (ListRunsRequest.ParentID).
		// Before, it was not, past 4000 runs.
		{"completed, then many runs", []func(*runtime.FinishRequest){status(runtime.StatusCompleted)}, 4500, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := runtime.NewMemoryStore(runtime.MemoryConfig{})
			rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close(ctx)
			start := func(id, parent string) {
				if err := store.StartRun(ctx, runtime.Run{ID: id, Tenant: "acme", SessionID: "s", AgentID: "a", ParentID: parent}); err != nil {
					t.Fatal(err)
				}
			}
			start("prev", "")
			if err := store.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "prev", Status: runtime.StatusSuspended, InvocationID: "inv"}); err != nil {
				t.Fatal(err)
			}
			for i, finish := range c.children {
				id := "child" + string(rune('0'+i))
				start(id, "prev")
				f := runtime.FinishRequest{Tenant: "acme", RunID: id}
				finish(&f)
				if err := store.Finish(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
			for i := range c.later {
				start(fmt.Sprintf("later%d", i), "")
			}
			start("own", "prev") // the decision being answered is not its own answer
			e := &responsesEndpoint{s: &Server{runs: rec}}
			if got := e.answered(ctx, "acme", "s", "prev", "own"); got != c.want {
				t.Errorf("answered = %v, want %v", got, c.want)
			}
			if e.answered(ctx, "other", "s", "prev", "own") {
				t.Error("another tenant's runs answered the approval")
			}
		})
	}
}
