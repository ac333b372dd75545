package eino_test

import (
	"context"
	"errors"
	"sync/atomic"
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

// cancellingStore is a checkpoint store that calls cancel after each Set:
// the turn is cancelled as Eino saves an interrupted run.
type cancellingStore struct {
	*eino.MemoryStore
	cancel func()
}

func (s *cancellingStore) Set(ctx context.Context, id string, b []byte) error {
	err := s.MemoryStore.Set(ctx, id, b)
	if s.cancel != nil {
		s.cancel()
	}
	return err
}

// TestAttackCancelAtInterrupt: a turn cancelled as its run interrupts
// for an approval fails, and never reaches the runtime as a suspension,
// so nothing would resume or discard the checkpoint Eino saved: the
// failed turn deletes it (it was kept until the session's delete).
func TestAttackCancelAtInterrupt(t *testing.T) {
	ctx := context.Background()
	st := &cancellingStore{MemoryStore: eino.NewMemoryStore()}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
		session.NewMemoryStore(session.MemoryConfig{}))
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st.cancel = cancel
	if out, err := h.Send(tctx, "acme/s", llm.UserText("please refund order 7")); isCompleted(out) || isSuspended(out) {
		t.Fatalf("the turn cancelled at its interrupt: %#v %v", out, err)
	}
	st.cancel = nil
	for _, text := range []string{"hello", "hello again"} {
		if out, err := h.Send(ctx, "acme/s", llm.UserText(text)); !isCompleted(out) {
			t.Fatalf("%s: %#v %v", text, out, err)
		}
	}
	if n := st.Len(); n != 0 {
		t.Errorf("%d checkpoints left after a turn cancelled at its interrupt", n)
	}
}

// flakyGetStore is a checkpoint store whose next Get fails.
type flakyGetStore struct {
	*eino.MemoryStore
	fail atomic.Bool
}

func (s *flakyGetStore) Get(ctx context.Context, id string) ([]byte, bool, error) {
	if s.fail.CompareAndSwap(true, false) {
		return nil, false, errors.New("the database went away")
	}
	return s.MemoryStore.Get(ctx, id)
}

// TestAttackResumeStoreFailure: an approval whose checkpoint the store
// fails to read fails (with eino.ErrNoCheckpoint and the store's error),
// and the runtime retires its paused turn: the checkpoint, which nothing
// can resume any more, is deleted (it was kept until the session's
// delete).
func TestAttackResumeStoreFailure(t *testing.T) {
	ctx := context.Background()
	st := &flakyGetStore{MemoryStore: eino.NewMemoryStore()}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
		session.NewMemoryStore(session.MemoryConfig{}))
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok || st.Len() != 1 {
		t.Fatalf("refund: %#v, %d checkpoints", out, st.Len())
	}
	st.fail.Store(true)
	out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	if e, ok := out.(*chat.Errored); !ok || !errors.Is(e.Err, eino.ErrNoCheckpoint) {
		t.Fatalf("the approval: %#v", out)
	}
	if n := st.Len(); n != 0 {
		t.Errorf("%d checkpoints left after the failed resume", n)
	}
}
