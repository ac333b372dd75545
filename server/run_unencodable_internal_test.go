package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// finish ends every run, whatever of its ending does not encode: a
// suspension whose descriptor's metadata holds a NaN is recorded on its
// signal id alone (which still resumes it), a completion whose replies
// are not messages ends the run failed, saying so; none is left in the
// recorder's live set.
func TestFinishEndsRunsWhoseEndingDoesNotEncode(t *testing.T) {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	s := &Server{log: slog.New(slog.DiscardHandler), runs: rec}
	for _, c := range []struct {
		name   string
		out    chat.Outcome
		status runtime.Status
		check  func(t *testing.T, run *runtime.Run, evs []runtime.Event)
	}{
		{"suspended", &chat.Suspended{Turn: chat.Turn{InvocationID: "inv-1"},
			Descriptor: graph.SignalDescriptor{SignalID: "go", Metadata: map[string]any{"score": math.NaN()}}},
			runtime.StatusSuspended, func(t *testing.T, run *runtime.Run, evs []runtime.Event) {
				if run.InvocationID != "inv-1" {
					t.Errorf("invocation id %q", run.InvocationID)
				}
				for _, e := range evs {
					if e.Type == runtime.EventRequestSuspended && !strings.Contains(string(e.Data), `"signal_id":"go"`) {
						t.Errorf("%s: %s, want the signal id", e.Type, e.Data)
					}
				}
			}},
		{"completed", &chat.Completed{Replies: []llm.Message{{Role: "narrator"}}},
			runtime.StatusFailed, func(t *testing.T, run *runtime.Run, _ []runtime.Event) {
				if run.Error == nil || run.Error.Category != string(errcat.ChatMessageShapeInvalid) {
					t.Errorf("run error %+v, want %s", run.Error, errcat.ChatMessageShapeInvalid)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s-" + c.name, AgentID: "a"})
			if err != nil {
				t.Fatal(err)
			}
			s.finish(ctx, tctx, turn, c.out, nil)
			run, err := rec.Store().Run(ctx, "", turn.ID())
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != c.status {
				raw, _ := json.Marshal(run)
				t.Fatalf("run %s, want status %s", raw, c.status)
			}
			evs, err := rec.Store().Events(ctx, runtime.EventsRequest{RunID: turn.ID(), Limit: runtime.MaxEventsLimit})
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, run, evs)
			if rec.Cancel(ctx, "", turn.ID()) {
				t.Error("the run's turn is still live")
			}
		})
	}
}
