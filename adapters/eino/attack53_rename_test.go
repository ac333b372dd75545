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

// TestAttack53RenamedAgentApproval: the workspace's eino: name (the
// ChatModelAgent's name, which Eino writes into the interrupted run's
// checkpoint and its interrupt address) changes while an approval is
// pending, and the server restarts (a deploy). Eino loads the
// checkpoint, then the resumed run fails at its first event ("no child
// agents leading to interrupted agent were found"). The adapter treats
// that as a failure of a running run, not as a run that cannot be
// resumed: the approval is answered node_exception, retryable ("Try
// again in a moment"), though a retry can only fail (the paused turn is
// retired and the checkpoint deleted), and the history closes the
// approved call with the runtime's "cancelled before it was approved",
// which is false; the refund never runs.
//
// Expected (the adapter's own contract for a run Eino cannot load,
// eino.ErrNoCheckpoint): the approval fails
// harness_signal_correlation_failed, not retryable, and the history
// answers the call with eino.NotRunText.
func TestAttack53RenamedAgentApproval(t *testing.T) {
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
			t.Errorf("the approval that can never be applied is answered %s/%s: %q (%v)", o.Bucket, o.Category, o.Reply.Text(), o.Err)
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
		t.Errorf("the approved call is closed as cancelled before it was approved: %s", hist)
	}
}
