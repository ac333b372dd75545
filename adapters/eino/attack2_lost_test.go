package eino_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// TestAttackLostCheckpointStartsNoTool: an approval whose checkpoint is
// gone (the in-memory store lost it in a restart, or another replica's
// resume deleted it), or one Eino cannot load (corrupt), fails with
// eino.ErrNoCheckpoint, and the run's
// events do not say the approved call started: it never ran. An
// approval that finds its checkpoint reports the call's start, then its
// result.
func TestAttackLostCheckpointStartsNoTool(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		lose        bool
		corrupt     bool // the checkpoint is there, but Eino cannot load it
		wantStarted bool
	}{
		{name: "lost", lose: true},
		{name: "corrupt", corrupt: true},
		{name: "found", wantStarted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := eino.NewMemoryStore()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms})
			if err != nil {
				t.Fatal(err)
			}
			a := &eino.Adapter{Engine: e}
			ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()}
			var (
				mu     sync.Mutex
				phases []string
			)
			emit := adapter.EmitterFunc(func(_ context.Context, ev adapter.Event) bool {
				mu.Lock()
				phases = append(phases, string(ev.Phase))
				mu.Unlock()
				return true
			})
			res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", RequestID: "r1", Input: llm.UserText("please refund order 7")}, emit)
			if err != nil || res.Suspension == nil {
				t.Fatalf("refund: %+v %v", res, err)
			}
			if tc.lose {
				if err := e.Discard(ctx, eino.Pending{CheckpointID: "/s/r1"}); err != nil || ms.Len() != 0 {
					t.Fatalf("lose the checkpoint: %v, %d left", err, ms.Len())
				}
			}
			if tc.corrupt {
				if err := ms.Set(ctx, "/s/r1", []byte("garbage{{")); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			phases = nil
			mu.Unlock()
			sp := res.Suspension
			_, err = a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", RequestID: "r2",
				Resume: &adapter.Resume{SignalID: "approval:" + sp.ToolCall.ID, Approved: true, ToolCall: sp.ToolCall, State: sp.State}}, emit)
			if (tc.lose || tc.corrupt) != errors.Is(err, eino.ErrNoCheckpoint) {
				t.Fatalf("the approval: %v", err)
			}
			started := 0
			for _, p := range phases {
				if p == string(runtime.PhaseToolStart) {
					started++
				}
			}
			if (started == 1) != tc.wantStarted || started > 1 {
				t.Errorf("the approval's events %v: %d tool starts", phases, started)
			}
		})
	}
}
