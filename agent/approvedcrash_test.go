package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/sqlite"
)

// stallAfterTool calls send_email for the first request, blocks the
// second (the one after the tool's result) until its context ends,
// entered closed once it blocks, and answers every later one; it keeps
// the transcript of the last.
type stallAfterTool struct {
	calls   atomic.Int32
	entered chan struct{}
	last    atomic.Pointer[[]llm.Message]
}

func (m *stallAfterTool) Ready(context.Context) error { return nil }

func (m *stallAfterTool) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	msgs := req.Transcript()
	m.last.Store(&msgs)
	switch m.calls.Add(1) {
	case 1:
		return &llm.Response{Message: llm.AssistantToolCalls(call("c1", "send_email", `{"to":"bob@example.com"}`)), FinishReason: llm.FinishToolCalls}, nil
	case 2:
		close(m.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &llm.Response{Message: llm.AssistantText("Done."), FinishReason: llm.FinishStop}, nil
}

// An approved call that ran is not run again when the process dies
// before its turn ends and the approval is given again on a new
// process: its result was saved as it came (the turn's next model call
// was under way), the approval is refused as spent, and the session's
// next message tells the model the call's result. Before, the approval
// given again ran the email a second time.
func TestApprovedCallRunsOnceAcrossACrash(t *testing.T) {
	t.Run("whole", func(t *testing.T) { approvedCallAcrossACrash(t, agent.Window{}, 0, false) })
	// A window, and no session cache: the history is loaded by its tail.
	t.Run("tail", func(t *testing.T) { approvedCallAcrossACrash(t, agent.Window{MaxMessages: 8}, -1, false) })
	// A denial is spent as an approval is: approving the call after the
	// crash does not run it. Before, it did.
	t.Run("denied", func(t *testing.T) { approvedCallAcrossACrash(t, agent.Window{}, 0, true) })
}

func approvedCallAcrossACrash(t *testing.T, window agent.Window, cache int, deny bool) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	m := &stallAfterTool{entered: make(chan struct{})}
	var sent atomic.Int32
	email := emailTool(t, &sent)
	// process is a new process on the store's file: a store of its own
	// (the first one's session lock dies with it).
	process := func() *chat.Harness {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(ctx) })
		a, err := agent.New(agent.Config{Provider: m, Tools: []agent.Tool{email.WithApproval()}, Window: window})
		if err != nil {
			t.Fatal(err)
		}
		g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st, CacheSize: cache}), graph.WithCheckpointStore(st.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints())})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := process()
	out, _ := first.Send(ctx, "s", llm.UserText("Email Bob"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("the email did not ask for approval: %#v", out)
	}
	dying, die := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		payload := agent.Approve("")
		if deny {
			payload = agent.Deny("")
		}
		_, _ = first.Signal(dying, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: payload})
	}()
	<-m.entered // the email was sent (or denied); the next model call is under way
	second := process()
	if out, err := second.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")}); err == nil {
		t.Fatalf("the approval given again on a new process: %#v, want it refused", out)
	} else if !errors.Is(err, chat.ErrDecisionTookEffect) {
		// Told apart from a signal that matches nothing: the decision
		// took effect, the turn's answer was never written.
		t.Fatalf("the approval given again: %v, want chat.ErrDecisionTookEffect", err)
	}
	want, result := int32(1), "sent to bob@example.com"
	if deny {
		want, result = 0, "The user denied this call."
	}
	if n := sent.Load(); n != want {
		t.Fatalf("the email was sent %d times, want %d", n, want)
	}
	if out, err := second.Send(ctx, "s", llm.UserText("did it go?")); !isCompletedOutcome(out) {
		t.Fatalf("the next message: %#v, %v", out, err)
	}
	results := 0
	for _, msg := range *m.last.Load() {
		if msg.Role == llm.RoleTool {
			if msg.Text() != result {
				t.Fatalf("the model was told %q of the email", msg.Text())
			}
			results++
		}
	}
	if results != 1 {
		t.Fatalf("the model was told the email's result %d times, want once: %v", results, *m.last.Load())
	}
	die()
	<-done
}

func isCompletedOutcome(out chat.Outcome) bool {
	_, ok := out.(*chat.Completed)
	return ok
}
