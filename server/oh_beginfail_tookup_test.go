package server

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
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// failStart is a run store whose StartRun fails while fail is set (the
// run store unreachable for a moment; the session store is fine).
type failStart struct {
	runtime.Store
	fail atomic.Bool
}

func (f *failStart) StartRun(ctx context.Context, run runtime.Run) error {
	if f.fail.Load() {
		return errors.New("run store: connection reset")
	}
	return f.Store.StartRun(ctx, run)
}

// TestOpenHarnessBeginFailedResumeTookUpIsNotRunAgain: when the run store cannot
// record the resume's run, resumeSignal falls back to a.Chat.Signal
// without turnEvents (no tookUp). A resume that then runs the approved
// refund and fails on the upstream is answered exactly as one that
// never took its suspension up: not spent (ohSpent false), retryable.
// The same continuation resent must not run the refund again and must
// be answered as final.
func TestOpenHarnessBeginFailedResumeTookUpIsNotRunAgain(t *testing.T) {
	ctx := context.Background()
	ohRefDir(t)
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	m := &failAfterRefund{}
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()),
		Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	fs := &failStart{Store: store.Runs()}
	runs, err := runtime.NewRecorder(runtime.RecorderConfig{Store: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runs.Close(context.Background()) })
	srv, err := New(Config{Agents: []*Agent{{ID: "demo", Chat: h}}, Sessions: store, Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	e := &ohEnv{srv: srv, h: srv.Handler(), store: store}

	s := e.post(t, ohBody("rid-s", `{"session_id": "s-bf", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	fs.fail.Store(true)
	m.fail.Store(true)
	r := e.post(t, ohDecide("rid-c", "s-bf", cont.RunID, cont.ContinuationToken, "approve"))
	fs.fail.Store(false)
	m.fail.Store(false)
	t.Logf("first: %s", r.raw)
	again := e.post(t, ohDecide("rid-c", "s-bf", cont.RunID, cont.ContinuationToken, "approve"))
	t.Logf("same request_id: %s", again.raw)
	other := e.post(t, ohDecide("rid-c2", "s-bf", cont.RunID, cont.ContinuationToken, "approve"))
	t.Logf("new request_id: %s", other.raw)
	if n := m.afterTool.Load(); n != 1 {
		t.Errorf("the model saw the refund's result %d times, want 1 (the approved refund ran again)", n)
	}
	if x := again.ext(t); x.Outcome == "completed" {
		t.Errorf("resend (same request_id) completed the turn: the took-up failure was not final")
	}
	if x := other.ext(t); x.Outcome == "completed" {
		t.Errorf("resend (new request_id) completed the turn: the took-up failure was not final")
	}
}
