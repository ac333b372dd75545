package eino_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestInstructions: a turn's per-request instructions (the Responses
// API's instructions field, agent.WithInstructions) reach its model
// calls in place of the agent's instruction, streamed or not; the next
// turn without them has the agent's again. Before, Eino always sent the
// agent's.
func TestInstructions(t *testing.T) {
	for _, section := range []string{`{"streaming":false}`, `{"streaming":true}`} {
		t.Run("section "+section, func(t *testing.T) {
			adaptertest.CheckInstructions(t, eino.Name, eino.Factory, section)
		})
	}
}

// recordingModel is the scripted demo model recording each call's
// system prompt.
type recordingModel struct {
	mu      sync.Mutex
	systems []string
}

func (*recordingModel) Ready(context.Context) error { return nil }

func (r *recordingModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	r.mu.Lock()
	r.systems = append(r.systems, req.System)
	r.mu.Unlock()
	return demo.Model{}.Complete(ctx, req)
}

// take returns and forgets the system prompts recorded.
func (r *recordingModel) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.systems
	r.systems = nil
	return s
}

// TestInstructionsAcrossApproval: the model calls of a turn resumed by
// an approval have the resuming request's per-request instructions, or
// the agent's instruction when it has none, whatever the suspending
// turn had (Eino's checkpoint keeps the system message of the run's
// start: each call's is replaced, not the checkpoint's).
func TestInstructionsAcrossApproval(t *testing.T) {
	ctx := context.Background()
	rec := &recordingModel{}
	e, err := eino.NewEngine(ctx, eino.Config{Instruction: "Own.", Tools: demo.Tools(), Model: eino.NewProviderModel(rec)})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
		session.NewMemoryStore(session.MemoryConfig{}))
	var signal string
	for _, tc := range []struct {
		name, instructions string // instructions: "" none
		want               string // every call's system prompt
	}{
		{name: "suspending turn with", instructions: "Per.", want: "Per."},
		{name: "resume without", want: "Own."},
		{name: "suspending turn without", want: "Own."},
		{name: "resume with", instructions: "Resumed.", want: "Resumed."},
	} {
		tctx := ctx
		if tc.instructions != "" {
			tctx = agent.WithInstructions(ctx, tc.instructions)
		}
		var out chat.Outcome
		if signal == "" {
			out, err = h.Send(tctx, "acme/s", llm.UserText("please refund order 7"))
		} else {
			out, err = h.Signal(tctx, chat.Signal{SignalID: signal, SessionID: "acme/s", Payload: agent.Approve("")})
		}
		signal = ""
		if s, ok := out.(*chat.Suspended); ok {
			signal = s.Descriptor.SignalID
		} else if !isCompleted(out) {
			t.Fatalf("%s: %#v %v", tc.name, out, err)
		}
		got := rec.take()
		if len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != tc.want }) {
			t.Errorf("%s: system prompts %q, want %q", tc.name, got, tc.want)
		}
	}
}
