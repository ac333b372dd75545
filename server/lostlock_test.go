package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// noLock is a session locker that lets every turn in at once: what two
// replicas see when one lost its lock's connection (the database closed
// it, a network blip) while its turn ran, and the other took the lock.
type noLock struct{}

func (noLock) Lock(context.Context, string) (func(), error) { return func() {}, nil }

// heldModel answers at once, except a message containing "slow", whose
// call signals entered and waits for release.
type heldModel struct {
	once             sync.Once
	entered, release chan struct{}
}

func (*heldModel) Ready(context.Context) error { return nil }

func (m *heldModel) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1].Text()
	if strings.Contains(last, "slow") {
		m.once.Do(func() { close(m.entered) })
		<-m.release
	}
	return &llm.Response{Message: llm.AssistantText("reply to " + last), FinishReason: llm.FinishStop}, nil
}

// A turn that lost its session lock while it ran, and whose session
// another replica's turn wrote meanwhile, fails with
// session_write_conflict (retryable) instead of writing its history
// over the other turn, which its client was told had completed. Before,
// its append lost the race and it fell back to saving the whole record:
// the other turn vanished from the session, both runs recorded as
// completed.
func TestLostSessionLockCannotOverwriteATurn(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/s.db"
	m := &heldModel{entered: make(chan struct{}), release: make(chan struct{})}
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	replica := func() *server.Agent { // one replica's agent, its own store on the shared database
		store := servertest.SQLiteAt(t, path)
		sa, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: adapter.NewNative(a), Agent: &adapter.Agent{ID: "demo", Backend: adapter.Native},
			Sessions: store, Records: store.Checkpoints(), Locker: noLock{}})
		if err != nil {
			t.Fatal(err)
		}
		return sa
	}
	ra, rb := replica(), replica()
	key := server.DefaultTenant + "/s"
	if out, err := ra.Chat.Send(ctx, key, llm.UserText("zero")); err != nil {
		t.Fatalf("first turn: %#v %v", out, err)
	}
	done := make(chan chat.Outcome, 1)
	go func() {
		out, _ := ra.Chat.Send(ctx, key, llm.UserText("slow alpha"))
		done <- out
	}()
	<-m.entered // replica A's turn runs; it has lost its lock
	if out, err := rb.Chat.Send(ctx, key, llm.UserText("beta")); err != nil {
		t.Fatalf("replica B's turn: %#v %v", out, err)
	}
	close(m.release)
	out := <-done
	e, ok := out.(*chat.Errored)
	if !ok || e.Category != errcat.SessionWriteConflict {
		t.Fatalf("replica A's turn after B's: %#v, want errored %s", out, errcat.SessionWriteConflict)
	}
	if !errors.Is(e.Err, errcat.SessionWriteConflict) && e.Bucket != "retryable_transient" {
		t.Errorf("bucket %q", e.Bucket)
	}
	var texts []string
	for _, msg := range historyOf(t, servertest.SQLiteAt(t, path), "s") {
		texts = append(texts, msg.Text())
	}
	if got := strings.Join(texts, " | "); got != "zero | reply to zero | beta | reply to beta" {
		t.Fatalf("the session after both turns: %s", got)
	}
}
