package eino_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestUnreadableCheckpoint: an approval whose checkpoint file is gone,
// or holds what Eino cannot load (a corrupt file), fails with
// eino.ErrNoCheckpoint, harness_signal_correlation_failed (sending it
// again cannot help: the runtime retired the paused turn), not as a
// retryable node exception; the file is deleted; and the session's
// history answers the call with what happened (approved: not run, its
// checkpoint unreadable; denied: the denial), not with the runtime's
// text for an approval that was cancelled.
func TestUnreadableCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		corrupt  bool
		approved bool
		want     string // the call's result in the history
	}{
		{name: "missing, approved", approved: true, want: "error: " + eino.NotRunText},
		{name: "corrupt, approved", corrupt: true, approved: true, want: "error: " + eino.NotRunText},
		{name: "corrupt, denied", corrupt: true, want: "The user denied this call. Reason: no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs, err := eino.NewFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: fs})
			if err != nil {
				t.Fatal(err)
			}
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()}, sessions)
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			files, _ := filepath.Glob(filepath.Join(dir, "*.ckpt"))
			if !ok || len(files) != 1 {
				t.Fatalf("refund: %#v, checkpoint files %q", out, files)
			}
			if tc.corrupt {
				err = os.WriteFile(files[0], []byte("garbage{{"), 0o600)
			} else {
				err = os.Remove(files[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			payload := agent.Deny("no")
			if tc.approved {
				payload = agent.Approve("")
			}
			sig := chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: payload}
			out, _ = h.Signal(ctx, sig)
			if e, ok := out.(*chat.Errored); !ok || !errors.Is(e.Err, eino.ErrNoCheckpoint) || e.Category != errcat.HarnessSignalCorrelationFailed {
				t.Fatalf("the decision: %#v", out)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "*.ckpt")); len(files) != 0 {
				t.Errorf("checkpoint files left after the failed resume: %q", files)
			}
			out, _ = h.Signal(ctx, sig)
			if e, ok := out.(*chat.Errored); !ok || e.Category != errcat.HarnessSignalCorrelationFailed {
				t.Fatalf("the decision sent again: %#v", out)
			}
			if out, err := h.Send(ctx, "acme/s", llm.UserText("hello")); !isCompleted(out) {
				t.Fatalf("next turn: %#v %v", out, err)
			}
			st, err := h.Harness().Graph().SessionState(ctx, "acme/s")
			if err != nil {
				t.Fatal(err)
			}
			var results []string
			for _, m := range chat.Messages.Get(st) {
				if m.Role == llm.RoleTool && m.ToolCallID == s.Descriptor.Metadata[agent.MetadataCallID] {
					results = append(results, m.Text())
				}
			}
			if len(results) != 1 || results[0] != tc.want {
				t.Errorf("the call's results in the history: %q, want %q", results, tc.want)
			}
		})
	}
}

// TestCancelledCheckpointGoesAtOnce: the checkpoint of a cancelled
// suspension (the runs API's cancel) is deleted with the cancel
// (adapter.OnCancel); before, it was kept until the turn after the
// next, or for ever in a session with no further message. A superseded
// suspension's stays while the turn that superseded it is not
// committed: its approval still resumes it.
func TestCancelledCheckpointGoesAtOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		cancel    bool
		lostWrite bool // the next turn's session write fails
		want      int  // checkpoints after the next turn
	}{
		{name: "cancelled", cancel: true},
		{name: "cancelled, next turn not committed", cancel: true, lostWrite: true},
		{name: "superseded, next turn not committed", lostWrite: true, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := eino.NewMemoryStore()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms})
			if err != nil {
				t.Fatal(err)
			}
			sessions := &adaptertest.FlakySessions{Store: session.NewMemoryStore(session.MemoryConfig{})}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()}, sessions)
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok || ms.Len() != 1 {
				t.Fatalf("refund: %#v, %d checkpoints", out, ms.Len())
			}
			if tc.cancel {
				if err := h.CancelSuspended(ctx, "acme/s", s.InvocationID); err != nil {
					t.Fatal(err)
				}
				// Released with the cancel (chat.Config.OnCancel,
				// adapter.OnCancel), not only at a later turn: a
				// session that gets no further message keeps nothing.
				if n := ms.Len(); n != 0 {
					t.Fatalf("%d checkpoints right after the cancel, want 0", n)
				}
			}
			if tc.lostWrite {
				sessions.FailNext(1)
			}
			out, err = h.Send(ctx, "acme/s", llm.UserText("hello"))
			if isCompleted(out) == tc.lostWrite {
				t.Fatalf("next turn: %#v %v", out, err)
			}
			if n := ms.Len(); n != tc.want {
				t.Fatalf("%d checkpoints after the next turn, want %d", n, tc.want)
			}
			if tc.want == 0 {
				return
			}
			out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			if !isCompleted(out) || ms.Len() != 0 {
				t.Fatalf("the approval after an uncommitted superseding turn: %#v %v, %d checkpoints", out, err, ms.Len())
			}
		})
	}
}
