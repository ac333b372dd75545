package eino_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestLostCheckpointReply: a decision on an approval whose interrupted
// run's checkpoint was lost (the in-memory store across a restart, a
// deleted or corrupt checkpoint file) fails with eino.ErrNoCheckpoint
// (harness_signal_correlation_failed), and the reply says what happened:
// the decision could not be applied and the tool did not run (not the
// sentinel's bare "no checkpoint"); the refund never runs.
func TestLostCheckpointReply(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		lose     string // restart (memory), delete or corrupt (file)
		approved bool
		want     string
	}{
		{name: "memory, restarted, approved", lose: "restart", approved: true,
			want: "the approval could not be applied, as the interrupted run's checkpoint is missing or unreadable: the tool did not run"},
		{name: "file deleted, approved", lose: "delete", approved: true,
			want: "the approval could not be applied, as the interrupted run's checkpoint is missing or unreadable: the tool did not run"},
		{name: "file corrupt, approved", lose: "corrupt", approved: true,
			want: "the approval could not be applied, as the interrupted run's checkpoint is missing or unreadable: the tool did not run"},
		{name: "file corrupt, denied", lose: "corrupt",
			want: "the denial could not be applied, as the interrupted run's checkpoint is missing or unreadable: the tool did not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tools, ran := countedTools()
			engine := func() *eino.Engine {
				var store eino.CheckPointStore = eino.NewMemoryStore()
				if tc.lose != "restart" {
					fs, err := eino.NewFileStore(dir)
					if err != nil {
						t.Fatal(err)
					}
					store = fs
				}
				e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: store})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			a := &eino.Adapter{Engine: engine()}
			h := adaptertest.Harness(t, a, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools}, session.NewMemoryStore(session.MemoryConfig{}))
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("refund: %#v", out)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.ckpt"))
			var err error
			switch tc.lose {
			case "restart":
				a.Engine = engine()
			case "delete":
				err = os.Remove(files[0])
			case "corrupt":
				err = os.WriteFile(files[0], []byte("garbage{{"), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			payload := agent.Deny("no")
			if tc.approved {
				payload = agent.Approve("")
			}
			out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: payload})
			e, ok := out.(*chat.Errored)
			if !ok || e.Category != errcat.HarnessSignalCorrelationFailed || !errors.Is(e.Err, eino.ErrNoCheckpoint) {
				t.Fatalf("the decision: %#v", out)
			}
			if !strings.Contains(e.Reply.Text(), tc.want) {
				t.Errorf("the reply %q does not say %q", e.Reply.Text(), tc.want)
			}
			if n := ran(); n != 0 {
				t.Errorf("%d tool calls", n)
			}
		})
	}
}
