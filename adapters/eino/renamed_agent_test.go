package eino_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestRenamedAgentApprovalNotResumable: when the workspace's eino: name
// (the ChatModelAgent's name, which Eino writes into the interrupted
// run's checkpoint and its interrupt address) changes while an approval
// is pending and the server restarts, the approval fails
// harness_signal_correlation_failed, not retryable, and the history does
// not close the approved call as "cancelled before it was approved". Eino
// loads the checkpoint but cannot resume the run under the new name
// ("no child agents leading to interrupted agent were found"); that is a
// run that cannot be resumed (the adapter's contract for
// eino.ErrNoCheckpoint), not a transient failure: a retry can only fail,
// since the paused turn is retired and its checkpoint deleted.
func TestRenamedAgentApprovalNotResumable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ckpt")
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	h := newHarness(t, st, `{"name":"alpha","checkpoint":{"driver":"file","dir":`+strconvQuote(path)+`}}`)
	out, err := h.Send(ctx, "acme/s1", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("want a suspension, got %#v %v", out, err)
	}
	// The restart, with the agent renamed in the workspace.
	h = newHarness(t, st, `{"name":"beta","checkpoint":{"driver":"file","dir":`+strconvQuote(path)+`}}`)
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: agent.Approve("")})
	switch o := out.(type) {
	case *chat.Completed:
		// The approval applied: fine.
		return
	case *chat.Errored:
		if o.Category != errcat.HarnessSignalCorrelationFailed || o.Bucket == harness.RetryableTransient {
			t.Errorf("the approval that can never be applied is answered %s/%s: %q (%v), want %s, not retryable", o.Bucket, o.Category, o.Reply.Text(), o.Err, errcat.HarnessSignalCorrelationFailed)
		}
	default:
		t.Fatalf("approval: %#v %v", out, err)
	}
	out, err = h.Send(ctx, "acme/s1", llm.UserText("hello"))
	if _, ok := out.(*chat.Completed); !ok {
		t.Fatalf("next turn: %#v %v", out, err)
	}
	rec, err := st.sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s1"})
	if err != nil {
		t.Fatal(err)
	}
	hist := string(rec.State[chat.MessagesField])
	if strings.Contains(hist, chat.DefaultCancelledResult) {
		t.Errorf("history closes the approved call as cancelled before it was approved, want it answered as not run: %s", hist)
	}
}
